// Failures of the replicated mode's broker resources, typed by what went wrong rather than by their text.
// Each message names the resource (stream, bucket, object store or queue) and what to change; a nats.js
// error underneath is the cause, and its message ends the text, because startup logs only the message.

export type ReplicationErrorKind =
  /** A queue file does not declare what bind mode needs (`replication.binding.stream_name`), or two queues bind one stream. */
  | 'binding'
  /** BROKER_RESOURCE_MODE=bind and the resource does not exist. */
  | 'missing'
  /** The stream's subjects do not cover the queue's subjects, or capture another queue's. */
  | 'subjects'
  /** The stream has an age, size or count limit, or is sealed: log records could be dropped or refused. */
  | 'limits'
  /** The stream's retention is not `limits`: records would be removed once consumed. */
  | 'retention'
  /** An existing resource differs from what the settings ask for (replicas, storage, TTL). */
  | 'mismatch'
  /** JetStream did not answer or refused a request. */
  | 'jetstream';

export type ReplicationResourceType = 'stream' | 'kv' | 'object-store';

export interface ReplicationErrorOptions {
  cause?: unknown;
  /** The resource concerned, if any. */
  resource?: { type: ReplicationResourceType; name: string };
  /** The queue concerned, if any. */
  queueId?: string;
}

export class ReplicationResourceError extends Error {
  readonly resource: ReplicationErrorOptions['resource'];
  readonly queueId: string | undefined;

  constructor(
    readonly kind: ReplicationErrorKind,
    message: string,
    options: ReplicationErrorOptions = {},
  ) {
    const text = options.cause === undefined ? message : `${message}: ${causeMessage(options.cause)}`;
    super(text, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ReplicationResourceError';
    this.resource = options.resource;
    this.queueId = options.queueId;
  }
}

function causeMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // nats.js often puts the detail (the server's description) in the cause.
  const inner = err.cause instanceof Error && err.cause.message !== err.message ? ` (${err.cause.message})` : '';
  return `${err.message}${inner}`;
}

/**
 * A replica cannot follow its queue's log from where it must start: the log was purged past the entry after
 * its newest usable checkpoint (or past its start, with no usable checkpoint), or the checkpoint is ahead of
 * the log (a log recreated under the same name). Applying from anywhere else would diverge.
 */
export class LogPositionError extends Error {
  constructor(
    readonly queueId: string,
    readonly stream: string,
    /** The position the replica must read next. */
    readonly needed: number,
    /** The first and last positions the log holds. */
    readonly held: { first: number; last: number },
    /** The checkpoint restored, if any: the position of its last entry. */
    readonly checkpointSeq: number | undefined,
  ) {
    const from = checkpointSeq === undefined ? "no usable checkpoint, so from the log's start" : `after its checkpoint at ${checkpointSeq}`;
    const problem =
      needed < held.first
        ? `the log (stream "${stream}") was purged up to ${held.first - 1}`
        : `the log (stream "${stream}") ends at ${held.last}: the checkpoint is of another log`;
    super(`queue "${queueId}": this replica must read the log from position ${needed} (${from}), but ${problem}`);
    this.name = 'LogPositionError';
  }
}
