// Signing of webhook outcome requests (docs/outcomes-webhook.md). Receivers verify with the client package
// (packages/client/src/outcomes/webhook-signature.ts), whose check the tests run against this signing.
//
// Signing input: the ASCII decimal epoch-seconds timestamp exactly as sent in X-SVC-Timestamp, one "."
// (0x2E), then the raw request body bytes exactly as sent (no re-encoding, no trimming):
//
//   signature = lowercase hex( HMAC-SHA256( key = UTF-8 bytes of the secret, message = `${timestamp}.` || body ) )
//   X-SVC-Signature: sha256=<signature>
//
// A receiver recomputes it over the bytes it received, compares in constant time, and rejects a timestamp
// more than `toleranceSecs` (default 300) away from its own clock, in either direction.
import { createHmac } from 'node:crypto';

/** The scheme prefix of X-SVC-Signature. */
export const SIGNATURE_PREFIX = 'sha256=';

export type WebhookBody = Uint8Array | string;

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
