// The broker sink: publishes each queue's outcomes to a NATS JetStream stream (docs/outcomes-broker.md),
// over the process's one broker connection (src/outcomes/broker/connection.ts). Subjects are
// <prefix>.<queue_id>.<kind>; the payload is the binary matchmaker.outcomes.v1.Outcome; the JetStream
// message id (Nats-Msg-Id) is the outcome id, so a re-sent outcome (the dispatcher retries a whole batch
// after a failure) is dropped by the stream's duplicate window instead of stored twice.
//
// Order: a batch's publishes are all issued before any acknowledgement is awaited (pipelined), over the
// one connection, which carries them to the stream in that order; the stream stores them in the order they
// arrive. A fault can still drop one publish of a batch while the server stores a later one (a connection
// lost between them, a stream leader changing): the retry then stores the earlier outcome after the later
// one. The PubAcks show it (a duplicate's ack carries the stream sequence it was first stored at), so a
// batch whose stream sequences do not rise with occurrence order is reported (logged as an error), not
// hidden; consumers can restore the order by producer_sequence.
//
// Failures (NATS unreachable, stream missing or unsuitable, publish timeout) make deliver() throw a
// BrokerError; the dispatcher retries with backoff.
import { toBinary } from '@bufbuild/protobuf';
import type { PubAck } from '@nats-io/jetstream';
import { headers, NoRespondersError, TimeoutError } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { OutcomeSchema, type Outcome } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { BrokerError, findCause } from '../../nats/broker-error.js';
import { REQUEST_TIMEOUT_MS, type BrokerConnection } from '../broker/connection.js';
import type { OutcomeSink, RetryPolicy } from '../sink.js';

/** Content type of every published outcome. */
export const OUTCOME_CONTENT_TYPE = 'application/x-protobuf';

/**
 * What the sink logs (at error level) when a NATS fault made the stream store an outcome after a later one of its
 * queue (see "Order" above): the one exception to the stream's occurrence order, reported, not hidden.
 */
export const OUTCOME_STORED_LATE =
  'outcome stored after a later one of its queue (a publish was lost in a NATS fault while a later one was stored); order by producer_sequence';

/** The subject of an outcome: <prefix>.<queue_id>.<kind>. */
export function outcomeSubject(prefix: string, queueId: string, kind: string): string {
  return `${prefix}.${queueId}.${kind}`;
}

export class BrokerSink implements OutcomeSink {
  readonly kind = 'broker';
  /** Outcomes in flight at once: one batch's publishes are pipelined. */
  readonly batchSize = 500;
  // At most 2 s between tries: a NATS fault that ends is followed by delivery within about that long.
  readonly retry: RetryPolicy = { maxRetries: Infinity, baseDelayMs: 200, maxDelayMs: 2_000 };
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
    const acks = await Promise.allSettled(
      outcomes.map((outcome) => {
        // One header set per message: nats.js writes the message id into the set it is given.
        const h = headers();
        h.set('Content-Type', OUTCOME_CONTENT_TYPE);
        return js.publish(this.subject(outcome), toBinary(OutcomeSchema, outcome), {
          msgID: outcome.id,
          headers: h,
          timeout: REQUEST_TIMEOUT_MS,
        });
      }),
    );
    let duplicates = 0;
    let previous: { outcome: Outcome; seq: number } | undefined;
    for (const [i, settled] of acks.entries()) {
      const outcome = outcomes[i]!;
      if (settled.status === 'rejected') throw this.publishFailed(outcome, settled.reason, acks.slice(i + 1));
      const ack = settled.value;
      this.checkStream(outcome, ack);
      if (ack.duplicate) duplicates++;
      if (previous !== undefined && ack.seq < previous.seq) {
        this.log.error(
          {
            queue: this.queueId,
            outcome: previous.outcome.id,
            producerSequence: String(previous.outcome.producerSequence),
            storedAt: previous.seq,
            later: outcome.id,
            laterStoredAt: ack.seq,
          },
          OUTCOME_STORED_LATE,
        );
      }
      previous = { outcome, seq: ack.seq };
    }
    if (duplicates > 0) this.log.debug({ queue: this.queueId, duplicates }, 'outcomes already in the stream (re-sent after a failure)');
  }

  private subject(outcome: Outcome): string {
    return outcomeSubject(this.connection.prefix, this.queueId, outcome.kind);
  }

  /** The error of a batch whose first failed publish is `outcome`; `later` are the settled publishes after it. */
  private publishFailed(outcome: Outcome, err: unknown, later: readonly PromiseSettledResult<PubAck>[]): BrokerError {
    const stream = this.connection.streamName;
    const subject = this.subject(outcome);
    // No responders: nothing stores the subject any more (stream deleted, server without its store).
    // nats.js reports it as "jetstream is not enabled" with the NoRespondersError as its cause.
    if (findCause(err, NoRespondersError)) this.connection.recheckStream();
    // Unanswered: the server itself may be hung (the connection then moves to another node).
    if (findCause(err, TimeoutError)) this.connection.suspectSilence();
    const storedAfter = later.filter((a) => a.status === 'fulfilled' && !a.value.duplicate).length;
    if (storedAfter > 0) {
      this.log.warn(
        { queue: this.queueId, outcome: outcome.id, storedAfter },
        'a publish failed while later outcomes of the batch were stored: the retry may store it after them',
      );
    }
    return new BrokerError('publish', `publishing outcome ${outcome.id} to ${subject} failed`, { cause: err, stream, subject });
  }

  private checkStream(outcome: Outcome, ack: PubAck): void {
    const stream = this.connection.streamName;
    if (ack.stream === stream) return;
    const subject = this.subject(outcome);
    throw new BrokerError('wrong-stream', `outcome ${outcome.id} on ${subject} was stored by stream "${ack.stream}", not "${stream}"`, {
      stream,
      subject,
    });
  }

  async close(): Promise<void> {}
}
