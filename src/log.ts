// The service's logger (pino, JSON lines on stdout). Credentials must never reach the log, whoever logs
// them: every line is passed through redactSecrets just before it is written, and fields named like a
// secret are masked whatever they hold. Sources should still not log secrets (the broker connection logs
// its URL redacted); this is the net under them.
import { pino, type DestinationStream, type Logger } from 'pino';

/** What replaces a secret. */
export const REDACTED = '***';

// <scheme>://<userinfo>@ : the userinfo runs to the last @ before the host (a password may hold an
// unencoded @), and stops at what ends a URL's authority, a list separator, whitespace or a JSON quote.
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#"',\\]+)@/gi;
// An nkey seed: S, the key type (user, account, operator, server, cluster, curve), then 56 base32 chars.
const NKEY_SEED = /\bS[UAONCX][A-Z2-7]{56}\b/g;

/**
 * Masks credentials in text: the password of `scheme://user:password@host` (or the whole userinfo when it
 * is a token, `scheme://token@host`), for every URL in the text, and nkey seeds. Host and port are kept.
 */
export function redactSecrets(text: string): string {
  return text
    .replace(URL_USERINFO, (_all, scheme: string, userinfo: string) => {
      const colon = userinfo.indexOf(':');
      return colon < 0 ? `${scheme}${REDACTED}@` : `${scheme}${userinfo.slice(0, colon)}:${REDACTED}@`;
    })
    .replace(NKEY_SEED, REDACTED);
}

/** Fields masked whatever their value, at the top level and one level down. */
const SECRET_FIELDS = ['password', 'pass', 'token', 'seed', 'nkey', 'authorization', 'broker_nkey'];

/** A logger at `level`, writing JSON lines to `destination` (stdout by default) with credentials masked. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { service: 'matchmaker' },
    redact: { paths: SECRET_FIELDS.flatMap((f) => [f, `*.${f}`]), censor: REDACTED },
    hooks: { streamWrite: redactSecrets },
  };
  return destination ? pino(options, destination) : pino(options);
}
