// Signing of webhook outcome requests, and its verification for receivers (docs/outcomes-webhook.md).
//
// Signing input: the ASCII decimal epoch-seconds timestamp exactly as sent in X-SVC-Timestamp, one "."
// (0x2E), then the raw request body bytes exactly as sent (no re-encoding, no trimming):
//
//   signature = lowercase hex( HMAC-SHA256( key = UTF-8 bytes of the secret, message = `${timestamp}.` || body ) )
//   X-SVC-Signature: sha256=<signature>
//
// A receiver recomputes it over the bytes it received, compares in constant time, and rejects a timestamp
// more than `toleranceSecs` (default 300) away from its own clock, in either direction.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The scheme prefix of X-SVC-Signature. */
export const SIGNATURE_PREFIX = 'sha256=';
/** How far a receiver tolerates X-SVC-Timestamp from its own clock, in seconds, by default. */
export const DEFAULT_TOLERANCE_SECS = 300;

export type WebhookBody = Uint8Array | string;

const TIMESTAMP_PATTERN = /^[0-9]{1,15}$/;
const SIGNATURE_PATTERN = /^sha256=[0-9a-f]{64}$/i;

const bytesOf = (value: WebhookBody): Buffer =>
  typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value.buffer, value.byteOffset, value.byteLength);

/** The exact bytes that are signed: `${timestamp}.` followed by the body. */
export function webhookSigningInput(timestamp: string | number, body: WebhookBody): Buffer {
  return Buffer.concat([Buffer.from(`${timestamp}.`, 'ascii'), bytesOf(body)]);
}

/** The X-SVC-Signature value (`sha256=<64 lowercase hex digits>`) of a request. */
export function signWebhook(params: { secret: string | Uint8Array; timestamp: string | number; body: WebhookBody }): string {
  const hmac = createHmac('sha256', typeof params.secret === 'string' ? Buffer.from(params.secret, 'utf8') : params.secret);
  hmac.update(webhookSigningInput(params.timestamp, params.body));
  return SIGNATURE_PREFIX + hmac.digest('hex');
}

export type WebhookVerification =
  | { ok: true }
  | { ok: false; reason: 'missing_header' | 'malformed_timestamp' | 'stale_timestamp' | 'malformed_signature' | 'signature_mismatch' };

export interface VerifyWebhookParams {
  /** The webhook secret, or several (during a rotation: the request verifies when any of them matches). */
  secret: string | Uint8Array | readonly (string | Uint8Array)[];
  /** X-SVC-Timestamp as received. */
  timestamp: string | null | undefined;
  /** X-SVC-Signature as received. */
  signature: string | null | undefined;
  /** The raw request body as received (bytes; a string is taken as its UTF-8 encoding). */
  body: WebhookBody;
  /** Largest tolerated |now - timestamp| in seconds; DEFAULT_TOLERANCE_SECS when omitted. */
  toleranceSecs?: number;
  /** The receiver's clock in epoch seconds (for tests); the system clock when omitted. */
  nowSecs?: number;
}

/** Like verifyWebhookSignature, with the reason of a rejection (for the receiver's logs; not for the response). */
export function checkWebhookSignature(params: VerifyWebhookParams): WebhookVerification {
  const { timestamp, signature } = params;
  if (!timestamp || !signature) return { ok: false, reason: 'missing_header' };
  if (!TIMESTAMP_PATTERN.test(timestamp)) return { ok: false, reason: 'malformed_timestamp' };
  const tolerance = params.toleranceSecs ?? DEFAULT_TOLERANCE_SECS;
  const now = params.nowSecs ?? Math.floor(Date.now() / 1000);
  if (!(Math.abs(now - Number(timestamp)) <= tolerance)) return { ok: false, reason: 'stale_timestamp' };
  if (!SIGNATURE_PATTERN.test(signature)) return { ok: false, reason: 'malformed_signature' };
  const received = Buffer.from(signature.slice(SIGNATURE_PREFIX.length).toLowerCase(), 'hex');
  const secrets = Array.isArray(params.secret)
    ? (params.secret as readonly (string | Uint8Array)[])
    : [params.secret as string | Uint8Array];
  let matched = false;
  for (const secret of secrets) {
    const expected = Buffer.from(signWebhook({ secret, timestamp, body: params.body }).slice(SIGNATURE_PREFIX.length), 'hex');
    // Both are 32 bytes; every candidate is compared (no early exit), in constant time.
    if (timingSafeEqual(expected, received)) matched = true;
  }
  return matched ? { ok: true } : { ok: false, reason: 'signature_mismatch' };
}

/**
 * True when X-SVC-Signature is the HMAC of this timestamp and body under the secret and the timestamp is
 * within `toleranceSecs` of now. Pass the raw body bytes: a body parsed and re-serialized does not verify.
 */
export function verifyWebhookSignature(params: VerifyWebhookParams): boolean {
  return checkWebhookSignature(params).ok;
}
