// The broker sink's failures, typed by what went wrong rather than by their text. Each carries the nats.js
// error underneath as its cause; its message names the problem (and the setting or stream to look at) and
// ends with the cause's message, because the dispatcher logs only the message. Messages never hold
// credentials: URLs in them are redacted.
import { redactSecrets } from '../log.js';

export type BrokerErrorKind =
  /** A broker setting is invalid (the message names it). */
  | 'config'
  /** The service closed the connection (it is shutting down). */
  | 'closed'
  /** No NATS server answered: refused, timed out, or the connection is reconnecting. */
  | 'unreachable'
  /** The server refused the credentials. */
  | 'unauthorized'
  /** JetStream did not answer or refused a request (not enabled for the account, API error). */
  | 'jetstream'
  /** BROKER_RESOURCE_MODE=bind and the outcome stream does not exist. */
  | 'stream-missing'
  /** The outcome stream exists but its subjects do not cover <prefix>.>. */
  | 'stream-subjects'
  /** A publish got no PubAck: timed out, nothing stores the subject, or not permitted. */
  | 'publish'
  /** A PubAck came from another stream than the outcome stream. */
  | 'wrong-stream';

export interface BrokerErrorOptions {
  cause?: unknown;
  /** The outcome stream concerned, if any. */
  stream?: string;
  /** The subject concerned, if any. */
  subject?: string;
}

export class BrokerError extends Error {
  readonly stream: string | undefined;
  readonly subject: string | undefined;

  constructor(
    readonly kind: BrokerErrorKind,
    message: string,
    options: BrokerErrorOptions = {},
  ) {
    const text = options.cause === undefined ? message : `${message}: ${describeError(options.cause)}`;
    super(redactSecrets(text), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BrokerError';
    this.stream = options.stream;
    this.subject = options.subject;
  }
}

/**
 * An error's message for a log line, redacted: a BrokerError's message (which already ends with its
 * cause's), or any other error's message with its direct cause's, as nats.js often puts the detail there.
 */
export function describeError(err: unknown): string {
  if (err instanceof BrokerError) return err.message;
  if (err instanceof Error) {
    const cause = err.cause instanceof Error && err.cause.message !== err.message ? ` (${err.cause.message})` : '';
    return redactSecrets(`${err.message}${cause}`);
  }
  return redactSecrets(String(err));
}

/** The first error in `err`'s cause chain (itself included) that is a `type`, if any. */
export function findCause<T extends Error>(err: unknown, type: abstract new (...args: never[]) => T): T | undefined {
  const seen = new Set<unknown>();
  for (let e = err; e instanceof Error && !seen.has(e); e = e.cause) {
    if (e instanceof type) return e;
    seen.add(e);
  }
  return undefined;
}
