// What makes the HTTP port safe to open in a browser that also browses the web (docs/security.md): a
// request from a foreign page (its Origin) is refused, a state-changing request must carry JSON (a plain
// HTML form cannot send that), and with HTTP_ALLOWED_HOSTS the Host header must name this service, so a
// DNS-rebinding page that reaches the port under its own name is refused too.
import type { IncomingHttpHeaders } from 'node:http';
import { permissionDenied, quote, ServiceError } from '../errors.js';

export interface HttpGuardSettings {
  /** Origins (scheme://host[:port]) served besides the service's own. */
  allowedOrigins: readonly string[];
  /** Host header values (host, or host:port) answered; empty: any. */
  allowedHosts: readonly string[];
  /** The scheme browsers reach the port with: the service's own origin is `${scheme}://${Host}`. */
  scheme: 'http' | 'https';
}

/** Comma-separated setting values, trimmed and lowercased; an origin loses a trailing slash. */
export const settingList = (value: string): string[] =>
  value
    .split(',')
    .map((s) => s.trim().toLowerCase().replace(/\/+$/, ''))
    .filter((s) => s !== '');

export class HttpGuard {
  private readonly origins: ReadonlySet<string>;

  constructor(private readonly settings: HttpGuardSettings) {
    this.origins = new Set(settings.allowedOrigins);
  }

  /** Refuses a request (or WebSocket upgrade) whose Host is not allowed or whose Origin is foreign: PERMISSION_DENIED. */
  checkSource(headers: IncomingHttpHeaders): void {
    const host = (headers.host ?? '').toLowerCase();
    if (this.settings.allowedHosts.length > 0 && !this.settings.allowedHosts.some((allowed) => sameHost(allowed, host))) {
      throw permissionDenied(`Host ${quote(host)} is not one this service answers to (HTTP_ALLOWED_HOSTS)`);
    }
    const origin = headers.origin?.toLowerCase();
    if (origin === undefined || origin === `${this.settings.scheme}://${host}` || this.origins.has(origin)) return;
    throw permissionDenied(`requests from the origin ${quote(origin)} are not served (HTTP_ALLOWED_ORIGINS)`);
  }

  /** Refuses a state-changing request whose body is not declared JSON: 415 (no body and no type is allowed). */
  checkBody(method: string, headers: IncomingHttpHeaders): void {
    if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return;
    const type = headers['content-type'];
    if (type === undefined && !hasBody(headers)) return;
    const media = (type ?? '').split(';')[0]!.trim().toLowerCase();
    if (media === 'application/json') return;
    throw new ServiceError(
      'INVALID_ARGUMENT',
      `${method} needs a JSON body: Content-Type must be application/json${type === undefined ? '' : `, not ${quote(type)}`}`,
      { reason: 'UNSUPPORTED_MEDIA_TYPE' },
    );
  }
}

/** An allowed entry without a port matches the host on any port. */
function sameHost(allowed: string, host: string): boolean {
  if (allowed === host) return true;
  return !allowed.includes(':') && host.replace(/:\d+$/, '') === allowed;
}

function hasBody(headers: IncomingHttpHeaders): boolean {
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0');
}
