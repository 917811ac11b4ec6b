// One queue's replication stream as a log of opaque entries: append (acknowledged once JetStream has stored
// the entry), a compare-and-set append for leadership claims, and an ordered read from any sequence. The
// stream's sequence is the log position; one stream gives one total order across its subjects.
import {
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
} from '@nats-io/jetstream';
import type { Logger } from 'pino';

/** The log's subjects: request records any replica appends, a leader's records, and leadership claims. */
export interface LogSubjects {
  req: string;
  lead: string;
  term: string;
}

export interface LogReader {
  /** Resolves when the reader has stopped. */
  stop(): Promise<void>;
}

const PUBLISH_TIMEOUT_MS = 5_000;
/** How long a reader whose consumer ended waits before it opens a new one. */
const REOPEN_AFTER_MS = 200;
/** How often a reader checks that it is not stalled behind the log. */
const STALL_CHECK_MS = 1_000;
/** While stalled, how often the reader reads what the log holds past it directly. */
const DIRECT_POLL_MS = 100;
/** The header JetStream deduplicates on; readers use it to tell their own appends. */
const MSG_ID_HEADER = 'Nats-Msg-Id';

export class ReplicationLog {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly stream: string,
    private readonly subjects: LogSubjects,
    private readonly log: Logger,
  ) {}

  /**
   * Appends an entry; answers its position once JetStream has stored it. `msgId` makes a retry of the same
   * append (after a lost acknowledgement) land once: the duplicate's acknowledgement carries the original
   * position.
   */
  async append(kind: 'req' | 'lead', entry: Uint8Array, msgId: string): Promise<number> {
    const ack = await this.js.publish(this.subjects[kind], entry, {
      msgID: msgId,
      timeout: PUBLISH_TIMEOUT_MS,
      expect: { streamName: this.stream },
    });
    return ack.seq;
  }

  /**
   * Appends a leadership claim only if the last claim in the log is still the one at `lastClaimSeq` (0: no
   * claim yet). Answers the claim's position, or undefined when another claim got there first.
   */
  async claim(entry: Uint8Array, lastClaimSeq: number, msgId: string): Promise<number | undefined> {
    try {
      const ack = await this.js.publish(this.subjects.term, entry, {
        msgID: msgId,
        timeout: PUBLISH_TIMEOUT_MS,
        expect: { streamName: this.stream, lastSubjectSequence: lastClaimSeq },
      });
      return ack.seq;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) return undefined;
      throw err;
    }
  }

  /** The position of the last entry stored (0 when the log is empty): a replica has caught up once it applied it. */
  async lastSeq(): Promise<number> {
    const info = await this.jsm.streams.info(this.stream);
    return info.state.last_seq;
  }

  /**
   * The position of the first entry the log still holds: entries below it were purged (1, or 0 for a log
   * never written, when nothing was; last + 1 when everything was).
   */
  async firstSeq(): Promise<number> {
    const info = await this.jsm.streams.info(this.stream);
    return info.state.first_seq;
  }

  /** Removes the entries below `seq` (a kept checkpoint includes them); answers how many were removed. */
  async purgeBefore(seq: number): Promise<number> {
    const response = await this.jsm.streams.purge(this.stream, { seq });
    return response.purged;
  }

  /**
   * Reads the log in order from `fromSeq`, calling `onEntry` for each entry (with the id it was appended
   * with) and waiting for it before the next. An ordered consumer; when it ends or fails (a broker node
   * lost, a stream leader election) the reader opens a new one from the entry after the last it applied.
   * An entry that cannot be applied stops the reader for good: this replica cannot follow the log past it.
   */
  async read(
    fromSeq: number,
    onEntry: (seq: number, entry: Uint8Array, msgId: string | undefined) => Promise<void> | void,
  ): Promise<LogReader> {
    let next = Math.max(1, fromSeq);
    let stopped = false;
    // Entries are applied one at a time, in order, whichever path brings them (the consumer, or the
    // catch-up by direct reads below): each path takes this turn before applying.
    let turn: Promise<unknown> = Promise.resolve();
    const exclusive = <T>(step: () => Promise<T>): Promise<T> => {
      const run = turn.then(step);
      turn = run.catch(() => undefined);
      return run;
    };
    const apply = async (seq: number, data: Uint8Array, msgId: string | undefined) => {
      try {
        await onEntry(seq, data, msgId);
      } catch (err) {
        this.log.fatal({ stream: this.stream, seq, err }, 'replication log entry could not be applied');
        stopped = true;
        messages.stop();
        throw err;
      }
      next = seq + 1;
    };
    /** Reads entries by their position up to `through`, one request each: no consumer involved. */
    const readDirect = async (through: number) => {
      while (!stopped && next <= through) {
        const stored = await this.jsm.streams.getMessage(this.stream, { seq: next });
        if (!stored) throw new Error(`entry ${next} of ${this.stream} is gone (purged)`);
        await apply(stored.seq, stored.data, stored.header?.get(MSG_ID_HEADER) || undefined);
      }
    };
    const open = async () => {
      const consumer = await this.js.consumers.get(this.stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: next });
      return consumer.consume();
    };
    let messages: ConsumerMessages = await open();
    // A consumer can stall without ending or failing (seen after a node of the cluster is killed, and its
    // replacements with it, for many seconds, while the stream still answered requests). When the log holds
    // entries past the last one read and nothing came for a while, the reader reads the log directly, by
    // position, every DIRECT_POLL_MS, and keeps replacing its consumer, until a consumer delivers again.
    let progressAt = next;
    let consumerDelivered = false;
    let direct: Promise<void> | undefined;
    const readDirectly = async () => {
      let replacedAt = performance.now();
      while (!stopped && !consumerDelivered) {
        try {
          const last = await this.lastSeq();
          await exclusive(() => readDirect(last));
        } catch (err) {
          this.log.warn({ stream: this.stream, next, err }, 'replication log could not be read directly; retrying');
        }
        if (performance.now() - replacedAt >= STALL_CHECK_MS) {
          replacedAt = performance.now();
          messages.stop();
        }
        await new Promise((resolve) => setTimeout(resolve, DIRECT_POLL_MS));
      }
      if (!stopped) this.log.info({ stream: this.stream, next }, 'replication log reader delivers again');
    };
    const watchdog = setInterval(() => {
      if (stopped || direct) return;
      const stalledAt = next;
      if (stalledAt !== progressAt) {
        progressAt = stalledAt;
        return;
      }
      this.lastSeq().then(
        (last) => {
          if (stopped || direct || last < stalledAt || next !== stalledAt) return;
          this.log.warn({ stream: this.stream, next, last }, 'replication log reader stalled; reading directly until a consumer delivers');
          consumerDelivered = false;
          messages.stop();
          direct = readDirectly().finally(() => {
            direct = undefined;
            progressAt = next;
          });
        },
        () => undefined,
      );
    }, STALL_CHECK_MS);
    const done = (async () => {
      while (!stopped) {
        try {
          for await (const msg of messages) {
            consumerDelivered = true;
            await exclusive(async () => {
              // The direct path may have applied it (and what comes before it) already.
              if (msg.seq < next) return;
              if (msg.seq > next) await readDirect(msg.seq - 1);
              await apply(msg.seq, msg.data, msg.headers?.get(MSG_ID_HEADER) || undefined);
            });
          }
        } catch (err) {
          if (stopped) throw err;
          this.log.warn({ stream: this.stream, next, err }, 'replication log reader failed; reading on');
        }
        while (!stopped) {
          await new Promise((resolve) => setTimeout(resolve, REOPEN_AFTER_MS));
          try {
            messages = await open();
            break;
          } catch (err) {
            this.log.warn({ stream: this.stream, next, err }, 'replication log reader could not reopen; retrying');
          }
        }
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        clearInterval(watchdog);
        messages.stop();
        await done.catch(() => undefined);
        await direct;
      },
    };
  }
}
