// The broker sink: publishes each queue's outcomes to a NATS JetStream stream (docs/outcomes-broker.md),
// over the process's one broker connection (src/outcomes/broker/connection.ts). Subjects are
// <prefix>.<queue_id>.<kind>; the payload is the binary matchmaker.outcomes.v1.Outcome; the JetStream
// message id (Nats-Msg-Id) is the outcome id, so a re-sent outcome (the dispatcher retries a whole batch
// after a failure) is dropped by the stream's duplicate window instead of stored twice.
//
// Order: outcomes are published one at a time, each only after the previous one's PubAck. Pipelining would
// be faster, but if outcome k failed while k+1 was stored, the retry would store k after k+1 and break the
// per-queue order the contract promises.
//
// Failures (NATS unreachable, stream missing or unsuitable, publish timeout) make deliver() throw a
// BrokerError; the dispatcher retries with backoff.
import { toBinary } from '@bufbuild/protobuf';
import type { PubAck } from '@nats-io/jetstream';
import { headers, NoRespondersError } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { OutcomeSchema, type Outcome } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { BrokerError, findCause } from '../broker/broker-error.js';
import { REQUEST_TIMEOUT_MS, type BrokerConnection } from '../broker/connection.js';
import type { OutcomeSink, RetryPolicy } from '../sink.js';

/** Content type of every published outcome. */
export const OUTCOME_CONTENT_TYPE = 'application/x-protobuf';

/** The subject of an outcome: <prefix>.<queue_id>.<kind>. */
export function outcomeSubject(prefix: string, queueId: string, kind: string): string {
  return `${prefix}.${queueId}.${kind}`;
}

export class BrokerSink implements OutcomeSink {
  readonly kind = 'broker';
  readonly batchSize = 100;
  readonly retry: RetryPolicy = { maxRetries: Infinity, baseDelayMs: 200, maxDelayMs: 10_000 };
  constructor(
    readonly queueId: string,
    readonly connection: BrokerConnection,
    readonly log: Logger,
  ) {
    connection.warmUp();
  }

  async deliver(outcomes: readonly Outcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    const { js } = await this.connection.ready();
    const stream = this.connection.streamName;
    let duplicates = 0;
    for (const outcome of outcomes) {
      const subject = outcomeSubject(this.connection.prefix, this.queueId, outcome.kind);
      const h = headers();
      h.set('Content-Type', OUTCOME_CONTENT_TYPE);
      let ack: PubAck;
      try {
        ack = await js.publish(subject, toBinary(OutcomeSchema, outcome), { msgID: outcome.id, headers: h, timeout: REQUEST_TIMEOUT_MS });
      } catch (err) {
        // No responders: nothing stores the subject any more (stream deleted, server without its store).
        // nats.js reports it as "jetstream is not enabled" with the NoRespondersError as its cause.
        if (findCause(err, NoRespondersError)) this.connection.recheckStream();
        throw new BrokerError('publish', `publishing outcome ${outcome.id} to ${subject} failed`, { cause: err, stream, subject });
      }
      if (ack.stream !== stream) {
        throw new BrokerError('wrong-stream', `outcome ${outcome.id} on ${subject} was stored by stream "${ack.stream}", not "${stream}"`, {
          stream,
          subject,
        });
      }
      if (ack.duplicate) duplicates++;
    }
    if (duplicates > 0) this.log.debug({ queue: this.queueId, duplicates }, 'outcomes already in the stream (re-sent after a failure)');
  }

  async close(): Promise<void> {}
}
