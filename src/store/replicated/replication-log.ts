// One queue's replication stream as a log of opaque entries: append (acknowledged once JetStream has stored
// the entry), a compare-and-set append for leadership claims, and an ordered read from any sequence. The
// stream's sequence is the log position; one stream gives one total order across its subjects.
import { DeliverPolicy, JetStreamApiCodes, JetStreamApiError, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
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
   * Reads the log in order from `fromSeq`, calling `onEntry` for each entry (with the id it was appended
   * with) and waiting for it before the next. An ordered consumer: it recreates itself after a broker failure and resumes where it was.
   */
  async read(
    fromSeq: number,
    onEntry: (seq: number, entry: Uint8Array, msgId: string | undefined) => Promise<void> | void,
  ): Promise<LogReader> {
    const consumer = await this.js.consumers.get(this.stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: Math.max(1, fromSeq),
    });
    const messages = await consumer.consume();
    const done = (async () => {
      for await (const msg of messages) {
        try {
          await onEntry(msg.seq, msg.data, msg.headers?.get(MSG_ID_HEADER) || undefined);
        } catch (err) {
          // A corrupt entry or a failed local commit: this replica cannot follow the log any further.
          this.log.fatal({ stream: this.stream, seq: msg.seq, err }, 'replication log entry could not be applied');
          messages.stop();
          throw err;
        }
      }
    })();
    return {
      stop: async () => {
        messages.stop();
        await done.catch(() => undefined);
      },
    };
  }
}
