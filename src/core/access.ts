// Who may call: bearer tokens from the tokens file (by SHA-256) and signed JWTs (jwt-verifier.ts), each with
// scopes; the per-token rate limit (rate-limiter.ts); and the audit log of refusals and operator actions.
// With neither AUTH_TOKENS_FILE nor AUTH_JWKS_FILE set, every call is allowed, as before (docs/security.md).
import { createHash } from 'node:crypto';
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import type { JWK } from 'jose';
import { parseJwksFile, parseTokensFile, readAccessFile, type Scope, type TokenEntry } from '../config/access-files.js';
import { watchDirectories } from '../config/file-watch.js';
import type { ServiceConfig } from '../config/service-config.js';
import { permissionDenied, resourceExhausted, unauthenticated } from '../errors.js';
import { JwtVerifier, looksLikeJwt, type Principal } from './jwt-verifier.js';
import { RateLimiter } from './rate-limiter.js';

export type { Principal };

/** Refusals logged per window at most; the rest are counted in the window's last line. */
const AUDIT_REFUSALS_PER_WINDOW = 20;
const AUDIT_WINDOW_MS = 10_000;
/** Debounce of the access files' reload (editors write several events per save). */
const RELOAD_DEBOUNCE_MS = 250;

export interface AccessOptions {
  tokens?: readonly TokenEntry[];
  jwt?: JwtVerifier;
  rateLimit?: { perSec: number; burst: number };
  /** Told each refusal (metrics). */
  onRefusal?: (scope: Scope, code: string) => void;
}

export class Access {
  private tokens: Map<string, Principal> | undefined;
  private readonly limiter: RateLimiter | undefined;
  private refusals = { windowStartMs: 0, logged: 0, suppressed: 0 };
  /** Logs a full window's count of refusals left out when the window ends. */
  private suppressedTimer: NodeJS.Timeout | undefined;
  private watcher: { close(): void } | undefined;
  /** Each access file's text (or read error) as last handled: the poll re-reads unchanged files every few
   *  seconds, and an unchanged file must neither drop the verified JWTs nor log its error again. */
  private readonly lastRead = new Map<string, string>();

  constructor(
    private readonly log: Logger,
    private readonly options: AccessOptions = {},
  ) {
    if (options.tokens) this.setTokens(options.tokens);
    const { rateLimit } = options;
    if (rateLimit && rateLimit.perSec > 0)
      this.limiter = new RateLimiter(rateLimit.perSec, rateLimit.burst || Math.max(1, Math.ceil(rateLimit.perSec)));
  }

  /** Reads the access files the settings name (a bad file fails the start) and re-reads them on change. */
  static async open(config: ServiceConfig, log: Logger, onRefusal?: AccessOptions['onRefusal']): Promise<Access> {
    const tokensFile = config.auth_tokens_file;
    const jwksFile = config.auth_jwks_file;
    const lastRead = new Map<string, string>();
    const tokens = tokensFile === '' ? undefined : orThrow(parseTokensFile(tokensFile, textOrThrow(tokensFile, lastRead))).entries;
    const jwt =
      jwksFile === ''
        ? undefined
        : await JwtVerifier.create(orThrow(parseJwksFile(jwksFile, textOrThrow(jwksFile, lastRead))).jwks as { keys: JWK[] }, {
            issuer: config.auth_jwt_issuer,
            audience: config.auth_jwt_audience,
            scopesClaim: config.auth_jwt_scopes_claim,
          }).catch((err: Error) => {
            throw new Error(`${jwksFile}: ${err.message}`);
          });
    const access = new Access(log, {
      ...(tokens ? { tokens } : {}),
      ...(jwt ? { jwt } : {}),
      rateLimit: { perSec: config.auth_rate_limit_per_sec, burst: config.auth_rate_limit_burst },
      ...(onRefusal ? { onRefusal } : {}),
    });
    if (!access.enabled) {
      log.warn('no AUTH_TOKENS_FILE or AUTH_JWKS_FILE: every call is allowed; restrict who reaches the ports (docs/security.md)');
      return access;
    }
    for (const [file, text] of lastRead) access.lastRead.set(file, text);
    const files = [tokensFile, jwksFile].filter((f) => f !== '');
    access.watcher = watchDirectories(
      files.map((f) => dirname(f)),
      RELOAD_DEBOUNCE_MS,
      () => void access.reload(tokensFile, jwksFile),
    );
    log.info({ tokens: tokens?.length, jwks: jwt !== undefined }, 'bearer tokens required');
    return access;
  }

  /** Whether calls need a bearer token. */
  get enabled(): boolean {
    return this.tokens !== undefined || this.options.jwt !== undefined;
  }

  /**
   * The caller of a call that needs `scope`, from its `Authorization` header: undefined when tokens are off.
   * Throws UNAUTHENTICATED (no or unknown token), PERMISSION_DENIED (no such scope) or RESOURCE_EXHAUSTED
   * (over the rate limit); each refusal is audited with `peer`.
   */
  async authorize(authorization: string | undefined, scope: Scope, peer: string): Promise<Principal | undefined> {
    if (!this.enabled) return undefined;
    let principal: Principal;
    try {
      principal = await this.authenticate(authorization);
      if (!principal.scopes.has(scope)) throw permissionDenied(`token "${principal.name}" does not have the scope "${scope}"`);
      const waitSecs = this.limiter?.take(principal.name) ?? 0;
      if (waitSecs > 0)
        throw resourceExhausted(`token "${principal.name}" is over its rate limit; retry after ${Math.ceil(waitSecs)} s`, waitSecs);
    } catch (err) {
      this.auditRefusal(err as Error, scope, peer);
      throw err;
    }
    return principal;
  }

  /** One audit line for an operator action (clear, release) by `principal` (none: tokens are off). */
  audit(principal: Principal | undefined, action: string, details: Record<string, unknown>): void {
    this.log.info({ audit: action, by: principal?.name ?? null, ...details }, `audit: ${action}`);
  }

  close(): void {
    this.watcher?.close();
    clearTimeout(this.suppressedTimer);
  }

  private async authenticate(authorization: string | undefined): Promise<Principal> {
    if (authorization === undefined || authorization === '')
      throw unauthenticated('this call needs a bearer token: Authorization: Bearer <token>');
    const match = /^Bearer +(\S+) *$/i.exec(authorization);
    if (!match) throw unauthenticated('the Authorization header must be "Bearer <token>"');
    const token = match[1]!;
    // A lookup by the token's digest: the table holds digests only, and comparing digests leaks nothing
    // useful about a token through timing.
    const known = this.tokens?.get(createHash('sha256').update(token).digest('hex'));
    if (known) return known;
    if (this.options.jwt && looksLikeJwt(token)) return this.options.jwt.verify(token);
    throw unauthenticated('unknown bearer token');
  }

  private setTokens(entries: readonly TokenEntry[]): void {
    this.tokens = new Map(entries.map((e) => [e.sha256, { name: e.name, scopes: new Set(e.scopes) }]));
  }

  private async reload(tokensFile: string, jwksFile: string): Promise<void> {
    const tokensText = tokensFile === '' ? undefined : this.changedText(tokensFile);
    if (tokensText !== undefined) {
      const read = 'message' in tokensText ? tokensText : parseTokensFile(tokensFile, tokensText.text);
      if ('message' in read) this.log.error({ file: tokensFile }, `tokens file refused; the last good one stays in force: ${read.message}`);
      else if (!sameEntries(read.entries, this.tokens)) {
        this.setTokens(read.entries);
        this.log.info({ file: tokensFile, tokens: read.entries.length }, 'tokens file reloaded');
      }
    }
    const jwt = this.options.jwt;
    const jwksText = jwt ? this.changedText(jwksFile) : undefined;
    if (jwt && jwksText !== undefined) {
      try {
        const read = 'message' in jwksText ? jwksText : parseJwksFile(jwksFile, jwksText.text);
        if ('message' in read) throw new Error(read.message);
        await jwt.setKeys(read.jwks as { keys: JWK[] });
        this.log.info({ file: jwksFile }, 'JWKS file reloaded');
      } catch (err) {
        this.log.error({ file: jwksFile }, `JWKS file refused; the last good keys stay in force: ${(err as Error).message}`);
      }
    }
  }

  /** The file's text or read error if it changed since it was last handled; undefined when it did not. */
  private changedText(file: string): { text: string } | { message: string } | undefined {
    const read = readAccessFile(file);
    const seen = 'text' in read ? read.text : read.message;
    if (this.lastRead.get(file) === seen) return undefined;
    this.lastRead.set(file, seen);
    return read;
  }

  /** Logs how many refusals of `window` were not logged, once. */
  private logSuppressed(window: { suppressed: number }): void {
    if (window.suppressed === 0) return;
    this.log.warn({ audit: 'refused', suppressed: window.suppressed }, `audit: ${window.suppressed} more refusals not logged`);
    window.suppressed = 0;
  }

  /** Refusals are logged, at most AUDIT_REFUSALS_PER_WINDOW a window, so a flood cannot flood the log. */
  private auditRefusal(err: Error & { code?: string }, scope: Scope, peer: string): void {
    this.options.onRefusal?.(scope, err.code ?? 'INTERNAL');
    const now = Date.now();
    if (now - this.refusals.windowStartMs >= AUDIT_WINDOW_MS) {
      this.logSuppressed(this.refusals);
      this.refusals = { windowStartMs: now, logged: 0, suppressed: 0 };
    }
    const window = this.refusals;
    if (window.logged >= AUDIT_REFUSALS_PER_WINDOW) {
      // The count is logged when the window ends, even if no refusal follows the flood.
      if (window.suppressed === 0) {
        this.suppressedTimer = setTimeout(() => this.logSuppressed(window), window.windowStartMs + AUDIT_WINDOW_MS - now);
        this.suppressedTimer.unref();
      }
      window.suppressed += 1;
      return;
    }
    this.refusals.logged += 1;
    this.log.warn({ audit: 'refused', code: err.code, scope, peer }, `audit: refused: ${err.message}`);
  }
}

/** The file's text for the start (recorded in `lastRead`); a file that cannot be read stops the start. */
function textOrThrow(file: string, lastRead: Map<string, string>): string {
  const read = readAccessFile(file);
  if ('message' in read) throw new Error(read.message);
  lastRead.set(file, read.text);
  return read.text;
}

function orThrow<T extends object>(read: T | { message: string }): T {
  if ('message' in read) throw new Error(read.message);
  return read;
}

function sameEntries(entries: readonly TokenEntry[], table: ReadonlyMap<string, Principal> | undefined): boolean {
  if (!table || table.size !== entries.length) return false;
  return entries.every((e) => {
    const p = table.get(e.sha256);
    return p !== undefined && p.name === e.name && p.scopes.size === e.scopes.length && e.scopes.every((s) => p.scopes.has(s));
  });
}
