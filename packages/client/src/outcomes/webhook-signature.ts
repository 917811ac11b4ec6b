// Verification of the webhook sink's signature (X-SVC-Signature over X-SVC-Timestamp and the body):
//   signature = lowercase hex of HMAC-SHA256(key = the secret's UTF-8 bytes, message = "<timestamp>." + raw body)
//   X-SVC-Signature: sha256=<signature>
// A request is accepted when the signature matches under one of the secrets (a list during a rotation) and the
// timestamp is within the tolerance of the receiver's clock, either way (it bounds replays).
import { createHmac, timingSafeEqual } from 'node:crypto';

export const DEFAULT_TOLERANCE_SECS = 300;

export type WebhookSecret = string | Uint8Array | readonly (string | Uint8Array)[];

export type WebhookRejection = 'missing_header' | 'malformed_timestamp' | 'stale_timestamp' | 'malformed_signature' | 'signature_mismatch';

export type WebhookCheck = { ok: true } | { ok: false; reason: WebhookRejection };

export interface WebhookSignatureInput {
  secret: WebhookSecret;
  /** X-SVC-Timestamp as received. */
  timestamp: string | undefined;
  /** X-SVC-Signature as received. */
  signature: string | undefined;
  /** The raw body bytes as received. */
  body: Uint8Array;
  /** Largest accepted |now - timestamp| in seconds (default 300). */
  toleranceSecs?: number;
  /** The receiver's clock in epoch seconds (default: now). */
  nowSecs?: number;
}

const DIGITS = /^[0-9]{1,15}$/;
const SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/;

/** The X-SVC-Signature value for a timestamp and body (what the service sends; for tests of a receiver). */
export function signWebhook(secret: string | Uint8Array, timestamp: string | number, body: Uint8Array | string): string {
  const hmac = createHmac('sha256', typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret);
  hmac.update(`${timestamp}.`, 'ascii');
  hmac.update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  return `sha256=${hmac.digest('hex')}`;
}

/** Checks a request's signature and timestamp; says why a request is rejected (for logs, not for the answer). */
export function checkWebhookSignature(input: WebhookSignatureInput): WebhookCheck {
  if (!input.timestamp || !input.signature) return { ok: false, reason: 'missing_header' };
  if (!DIGITS.test(input.timestamp)) return { ok: false, reason: 'malformed_timestamp' };
  const now = input.nowSecs ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - Number(input.timestamp)) > (input.toleranceSecs ?? DEFAULT_TOLERANCE_SECS)) {
    return { ok: false, reason: 'stale_timestamp' };
  }
  const hex = SIGNATURE.exec(input.signature)?.[1];
  if (hex === undefined) return { ok: false, reason: 'malformed_signature' };
  const received = Buffer.from(hex.toLowerCase(), 'hex');
  const secrets: readonly (string | Uint8Array)[] =
    typeof input.secret === 'string' || input.secret instanceof Uint8Array ? [input.secret] : input.secret;
  let match = false;
  for (const secret of secrets) {
    const expected = Buffer.from(signWebhook(secret, input.timestamp, input.body).slice('sha256='.length), 'hex');
    // Every secret is compared, in constant time, whatever the earlier ones gave.
    match = timingSafeEqual(expected, received) || match;
  }
  return match ? { ok: true } : { ok: false, reason: 'signature_mismatch' };
}

export function verifyWebhookSignature(input: WebhookSignatureInput): boolean {
  return checkWebhookSignature(input).ok;
}
