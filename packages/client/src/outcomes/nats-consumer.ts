// Outcomes from the broker sink: a durable pull consumer with explicit acknowledgements on the outcome stream
// (default SVC_MATCH_OUTCOMES, subjects <prefix>.<queue_id>.<kind>, each message a binary Outcome). The durable
// consumer keeps the position across restarts of this process; an outcome is acknowledged to JetStream (and
// confirmed) only when the caller acks its delivery, so anything unhandled is redelivered after ack_wait.
import { fromBinary } from '@bufbuild/protobuf';
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
import { backoffDelay, sleep, type BackoffPolicy } from '../backoff.js';
import { OutcomeSchema } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { QueuedConsumer, type QueueOptions } from './consumer.js';
import type { OutcomeCoreOptions } from './outcome-core.js';

export const DEFAULT_OUTCOME_STREAM = 'SVC_MATCH_OUTCOMES';
export const DEFAULT_SUBJECT_PREFIX = 'svc.match.outcomes';

export interface NatsConsumerOptions extends OutcomeCoreOptions, QueueOptions {
  /** A connection of your own (left open on close), or `servers` (and `connectOptions`) to open one. */
  connection?: NatsConnection;
  servers?: string | string[];
  connectOptions?: Omit<ConnectionOptions, 'servers'>;
  /** The outcome stream (default SVC_MATCH_OUTCOMES, the service's BROKER_STREAM_OUTCOMES). */
  stream?: string;
  /** The durable consumer's name: its position survives restarts. */
  durable: string;
  /** The service's BROKER_SUBJECT_PREFIX_OUTCOMES (default svc.match.outcomes). */
  subjectPrefix?: string;
  /** One queue id or a namespace (`eu` gives `<prefix>.eu.>`); omitted: every queue. Ignored with filterSubject. */
  queueId?: string;
  /** The consumer's subject filter, in place of the one queueId makes. */
  filterSubject?: string;
  /**
   * Create the durable consumer when it does not exist (the default), from the start of the stream. With false
   * it must exist (provisioned by hand); its configuration is never changed either way.
   */
  createConsumer?: boolean;
  /** JetStream redelivers an outcome not acknowledged within this time (default 30000). */
  ackWaitMs?: number;
  /** Waits between attempts to reach the stream and the consumer (default below 250 ms doubling to 10 s). */
  retry?: Partial<BackoffPolicy>;
  /** Non-fatal problems: the stream missing yet, a message that is not an Outcome, a lost connection. */
  onError?: (err: Error) => void;
}

const RETRY: BackoffPolicy = { initialDelayMs: 250, maxDelayMs: 10_000 };

export class NatsOutcomeConsumer extends QueuedConsumer {
  private nc: NatsConnection | undefined;
  private messages: ConsumerMessages | undefined;
  private readonly stopped = new AbortController();
  private readonly running: Promise<void>;
  /** The subject filter of the durable consumer this creates. */
  readonly filterSubject: string;
  readonly stream: string;

  constructor(private readonly options: NatsConsumerOptions) {
    const prefix = options.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX;
    const filterSubject = options.filterSubject ?? (options.queueId === undefined ? `${prefix}.>` : `${prefix}.${options.queueId}.>`);
    super({ ...options, detectGaps: options.detectGaps ?? filterSubject === `${prefix}.>` });
    this.filterSubject = filterSubject;
    this.stream = options.stream ?? DEFAULT_OUTCOME_STREAM;
    this.running = this.loop().then(
      () => this.finish(),
      (err: unknown) => this.finish(err),
    );
  }

  private async loop(): Promise<void> {
    const nc =
      this.options.connection ??
      (await connect({
        maxReconnectAttempts: -1,
        waitOnFirstConnect: true,
        ...this.options.connectOptions,
        servers: this.options.servers,
      }));
    this.nc = nc;
    const policy = { ...RETRY, ...this.options.retry };
    for (let attempt = 1; !this.stopped.signal.aborted; attempt++) {
      try {
        await this.ensureConsumer(nc);
        const consumer = await jetstream(nc).consumers.get(this.stream, this.options.durable);
        const messages = await consumer.consume({ max_messages: this.highWaterMark });
        this.messages = messages;
        if (this.stopped.signal.aborted) messages.stop();
        attempt = 0;
        for await (const m of messages) {
          this.take(m);
          await this.untilSpace();
        }
        if (!this.stopped.signal.aborted) throw new Error('the consumer stopped delivering');
      } catch (err) {
        if (this.stopped.signal.aborted || nc.isClosed()) return;
        this.options.onError?.(err instanceof Error ? err : new Error(String(err)));
        await sleep(backoffDelay(attempt, policy), this.stopped.signal);
      }
    }
  }

  /** Creates the durable consumer if it is missing (and allowed to); a missing stream is retried by the loop. */
  private async ensureConsumer(nc: NatsConnection): Promise<void> {
    const jsm = await jetstreamManager(nc);
    try {
      await jsm.consumers.info(this.stream, this.options.durable);
      return;
    } catch (err) {
      const missing = err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound;
      if (!missing || this.options.createConsumer === false) throw err;
    }
    await jsm.consumers.add(this.stream, {
      durable_name: this.options.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: this.filterSubject,
      ack_wait: (this.options.ackWaitMs ?? 30_000) * 1_000_000,
    });
  }

  private take(m: JsMsg): void {
    let outcome: ReturnType<typeof fromBinary<typeof OutcomeSchema>>;
    try {
      outcome = fromBinary(OutcomeSchema, m.data);
    } catch (err) {
      // Not an Outcome: it can never be handled, so it is not redelivered either.
      m.term('not a matchmaker.outcomes.v1.Outcome');
      this.options.onError?.(new Error(`message ${m.seq} on ${m.subject} is not an Outcome`, { cause: err }));
      return;
    }
    this.receive(outcome, async () => {
      if (!(await m.ackAck())) throw new Error(`JetStream did not confirm the acknowledgement of ${m.subject} #${m.seq}`);
    });
  }

  protected reportError(err: unknown): void {
    this.options.onError?.(err instanceof Error ? err : new Error(String(err)));
  }

  /** Stops pulling; a connection this consumer opened is closed (after its pending acknowledgements are sent). */
  async close(): Promise<void> {
    if (this.stopped.signal.aborted) return this.running;
    this.stopped.abort();
    this.finish();
    this.messages?.stop();
    await this.running;
    if (!this.options.connection && this.nc && !this.nc.isClosed()) await this.nc.drain();
  }
}

/** Opens a durable pull consumer of the outcome stream; it starts pulling at once. */
export function natsConsumer(options: NatsConsumerOptions): NatsOutcomeConsumer {
  return new NatsOutcomeConsumer(options);
}
