// Where the broker connection goes and how it authenticates: the servers of BROKER_URL (credentials in
// their userinfo taken out), and at most one of user:password (or a token) in BROKER_URL,
// BROKER_CREDENTIALS_FILE or BROKER_NKEY; and which of the servers a reconnect dials next.
import { readFileSync } from 'node:fs';
import { fromSeed } from '@nats-io/nkeys';
import {
  credsAuthenticator,
  nkeyAuthenticator,
  type Authenticator,
  type NodeConnectionOptions,
  type Server,
} from '@nats-io/transport-node';
import type { ServiceConfig } from '../config/service-config.js';
import { redactSecrets } from '../log.js';
import { BrokerError } from './broker-error.js';

// scheme://userinfo@rest; the userinfo runs to the last @ (a password may hold an unencoded @).
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)?(?:([^/?#]*)@)?(.*)$/i;

/** The connection options BROKER_URL, BROKER_CREDENTIALS_FILE and BROKER_NKEY make. */
export interface BrokerTarget {
  /** The servers without their credentials. */
  servers: string[];
  /** BROKER_URL as it may be logged: every password or token masked. */
  display: string;
  /** The credentials, as nats.js takes them. */
  auth: Pick<NodeConnectionOptions, 'user' | 'pass' | 'token' | 'authenticator'>;
}

/**
 * Reads the broker settings; throws a `config` BrokerError naming the setting when they are invalid.
 * nats.js ignores the userinfo of a server URL, so user:password@ (or token@, as other NATS clients read
 * it) becomes its user and pass (or token) options.
 */
export function brokerTarget(config: ServiceConfig): BrokerTarget {
  const display = redactSecrets(config.broker_url);
  const servers: string[] = [];
  const userinfos = new Set<string>();
  for (const entry of config.broker_url.split(',')) {
    const trimmed = entry.trim();
    if (trimmed === '') continue;
    const [, scheme = '', userinfo, rest = ''] = USERINFO.exec(trimmed)!;
    if (userinfo !== undefined) userinfos.add(userinfo);
    servers.push(`${scheme}${rest}`);
  }
  if (userinfos.size > 1)
    throw new BrokerError('config', `BROKER_URL ${display} gives different credentials to different servers; give one`);
  const [userinfo] = userinfos;
  const file = config.broker_credentials_file;
  const seed = config.broker_nkey.trim();
  const ways = [userinfo !== undefined && 'user:password in BROKER_URL', file && 'BROKER_CREDENTIALS_FILE', seed && 'BROKER_NKEY'].filter(
    Boolean,
  );
  if (ways.length > 1) throw new BrokerError('config', `set only one of ${ways.join(' and ')}`);
  let auth: BrokerTarget['auth'] = {};
  if (userinfo !== undefined) auth = userinfoAuth(userinfo, display);
  else if (file) auth = { authenticator: credsFileAuthenticator(file) };
  else if (seed) auth = { authenticator: nkeySeedAuthenticator(seed) };
  return { servers, display, auth };
}

function userinfoAuth(userinfo: string, display: string): BrokerTarget['auth'] {
  const colon = userinfo.indexOf(':');
  try {
    if (colon < 0) return { token: decodeURIComponent(userinfo) };
    return { user: decodeURIComponent(userinfo.slice(0, colon)), pass: decodeURIComponent(userinfo.slice(colon + 1)) };
  } catch (err) {
    // The error of decodeURIComponent does not quote its input, so it cannot leak the password.
    throw new BrokerError('config', `BROKER_URL ${display} has credentials that are not URL-encoded`, { cause: err });
  }
}

function credsFileAuthenticator(file: string): Authenticator {
  let creds: Uint8Array;
  try {
    creds = readFileSync(file);
  } catch (err) {
    throw new BrokerError('config', `cannot read BROKER_CREDENTIALS_FILE ${file}`, { cause: err });
  }
  // Re-read on every (re)connect so rotated credentials are picked up; fall back to the last good copy.
  return credsAuthenticator(() => {
    try {
      creds = readFileSync(file);
    } catch {
      // keep the previous contents
    }
    return creds;
  });
}

function nkeySeedAuthenticator(seed: string): Authenticator {
  const bytes = new TextEncoder().encode(seed);
  let publicKey: string;
  try {
    publicKey = fromSeed(bytes).getPublicKey();
  } catch (err) {
    throw new BrokerError('config', 'BROKER_NKEY is not a valid nkey seed', { cause: err });
  }
  if (!publicKey.startsWith('U')) throw new BrokerError('config', 'BROKER_NKEY must be a user nkey seed (SU...)');
  return nkeyAuthenticator(bytes);
}

/**
 * Which server to dial next: the one dialed least recently. nats.js would dial the server it just lost
 * first (its pool keeps the first server it connected to at the head); a hung server (SIGSTOP, a frozen
 * host) still accepts the TCP connection and then says nothing, so that cost a whole connect timeout
 * (5 s) before the client tried another node.
 */
export function leastRecentlyDialed(pool: ReadonlyArray<Server>): Server | null {
  let pick: Server | null = null;
  for (const server of pool) if (pick === null || server.lastConnect < pick.lastConnect) pick = server;
  return pick;
}
