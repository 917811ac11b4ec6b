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
  type JetStreamPublishOptions,
  type PubAck,
  type StoredMsg,
} from '@nats-io/jetstream';
import { deadline, delay } from '@nats-io/transport-node';
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

/** How long an append may take in all before it fails (the caller answers UNAVAILABLE)... */
const PUBLISH_TIMEOUT_MS = 5_000;
/**
 * ...and one try of it. A try that gets no answer is sent again with the same id: an append sent while the
 * stream had no leader (a node lost, an election running) is dropped by the server, not queued, so waiting
 * out the whole timeout would hold every append of that moment for 5 s after the stream can take them again.
 * JetStream's duplicate window (two minutes) makes a repeat of an entry that was stored land once.
 */
const PUBLISH_TRY_MS = 1_000;
/** Between tries that failed at once (no responders: no stream leader yet). */
const PUBLISH_PAUSE_MS = 100;
/** How long one read by position waits for its answer (a hung node never answers). */
const READ_TRY_MS = 1_000;
/** How long a reader whose consumer ended waits before it opens a new one, at first... */
const REOPEN_FIRST_MS = 200;
/** ...and at most, while opening fails (a consumer is made by the cluster's meta leader, which may be electing). */
const REOPEN_MAX_MS = 2_000;
/** How often a reader checks that it is not stalled behind the log. */
const STALL_CHECK_MS = 1_000;
/** While stalled, how often the reader reads what the log holds past it directly. */
const DIRECT_POLL_MS = 100;
/** A consumer that delivered nothing this long while the log moved on is replaced... */
const REPLACE_AFTER_MS = 2_000;
/** ...and the direct reads stop once they found nothing new for this long (the watchdog looks again). */
const DIRECT_IDLE_MS = 2_000;
/** What a reader logs (at error level) when the log holds fewer entries than its replica applied. */
export const LOG_REGRESSED =
  'replication log holds fewer entries than this replica applied: the broker lost entries; this replica may differ from the others';
/** Checks in a row that find the log's last position below what this replica applied before it says so. */
const REGRESSED_CHECKS = 5;
/** A warning that repeats (the same failure, retried) is logged at most this often, with a count. */
const WARN_EVERY_MS = 5_000;
/**
 * The ordered consumer's pulls. The consumer itself lives on one node (R1); when that node is lost or hung
 * the client only notices by missed heartbeats (two), and then makes a new one. The default (a heartbeat
 * every 15 s) left readers stalled for 30 s after a node loss; with one a second the client replaces the
 * consumer within a few seconds, and the reader reads directly meanwhile.
 */
const CONSUME_OPTIONS = { max_messages: 256, expires: 5_000, idle_heartbeat: 1_000 };
/** The header JetStream deduplicates on; readers use it to tell their own appends. */
const MSG_ID_HEADER = 'Nats-Msg-Id';

/** Whether a failed append may be tried again: anything but a verdict of the stream (a JetStream API error). */
function retryable(err: unknown): boolean {
  if (err instanceof JetStreamApiError) return err.status === 503;
  return true;
}

/** A warning (or error) logged once, then at most every WARN_EVERY_MS with how often it happened meanwhile. */
function throttledLog(log: Logger, msg: string, level: 'warn' | 'error' = 'warn'): (fields: Record<string, unknown>) => void {
  let lastAt = Number.NEGATIVE_INFINITY;
  let repeats = 0;
  return (fields) => {
    const now = performance.now();
    if (now - lastAt < WARN_EVERY_MS) {
      repeats++;
      return;
    }
    log[level]({ ...fields, ...(repeats > 0 ? { repeats } : {}) }, msg);
    lastAt = now;
    repeats = 0;
  };
}

export class ReplicationLog {
  /** Whether the stream answers direct gets (allow_direct): then any of its nodes serves reads by position. */
  private direct = false;
  /**
   * A position the log is known to hold through: the highest its leader named as its last, or acknowledged one
   * of this replica's appends at. Reads by position go no further (see `read`).
   */
  private confirmed = 0;

  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    readonly stream: string,
    private readonly subjects: LogSubjects,
    private readonly log: Logger,
  ) {}

  /**
   * Whether reads by position may also go to any node of the stream (its `allow_direct`), besides through
   * its leader (see entryAt): while a returning node makes the cluster elect its meta leader again, the
   * JetStream API (stream info, reads through the leader, making consumers) does not answer; direct gets do.
   */
  useDirectGets(allowed: boolean): void {
    this.direct = allowed;
  }

  /**
   * Appends an entry; answers its position once JetStream has stored it. `msgId` makes a retry of the same
   * append (after a lost acknowledgement) land once: the duplicate's acknowledgement carries the original
   * position.
   */
  async append(kind: 'req' | 'lead', entry: Uint8Array, msgId: string): Promise<number> {
    const ack = await this.publish(this.subjects[kind], entry, msgId, { streamName: this.stream });
    return ack.seq;
  }

  /**
   * Appends a leadership claim only if the last claim in the log is still the one at `lastClaimSeq` (0: no
   * claim yet). Answers the claim's position, or undefined when another claim got there first.
   */
  async claim(entry: Uint8Array, lastClaimSeq: number, msgId: string): Promise<number | undefined> {
    try {
      const ack = await this.publish(this.subjects.term, entry, msgId, { streamName: this.stream, lastSubjectSequence: lastClaimSeq });
      return ack.seq;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) return undefined;
      throw err;
    }
  }

  /** One append, tried again with the same id (see PUBLISH_TRY_MS) until PUBLISH_TIMEOUT_MS has passed. */
  private async publish(subject: string, entry: Uint8Array, msgId: string, expect: JetStreamPublishOptions['expect']): Promise<PubAck> {
    const giveUpAt = performance.now() + PUBLISH_TIMEOUT_MS;
    for (;;) {
      const sentAt = performance.now();
      const timeout = Math.max(1, Math.min(PUBLISH_TRY_MS, giveUpAt - sentAt));
      try {
        const ack = await this.js.publish(subject, entry, { msgID: msgId, timeout, expect });
        this.confirmed = Math.max(this.confirmed, ack.seq);
        return ack;
      } catch (err) {
        if (!retryable(err) || performance.now() + PUBLISH_PAUSE_MS >= giveUpAt) throw err;
        // A failure that came at once (no stream leader to answer) is not tried again at once.
        if (performance.now() - sentAt < PUBLISH_PAUSE_MS) await delay(PUBLISH_PAUSE_MS);
      }
    }
  }

  /** The position of the last entry stored (0 when the log is empty): a replica has caught up once it applied it. */
  async lastSeq(): Promise<number> {
    const info = await this.jsm.streams.info(this.stream);
    this.confirmed = Math.max(this.confirmed, info.state.last_seq);
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
   * The entry at `seq`, or null when the stream holds none there (yet). Asked two ways at once, and the first
   * entry either brings is taken: through the stream's leader (needs the cluster's meta leader, which a
   * returning node makes the cluster elect again, for many seconds), and, where the stream allows it, by a
   * direct get, which any node of the stream answers but which a hung node (SIGSTOP, a frozen host) is also
   * picked for while the others still route to it, and never answers. Each waits READ_TRY_MS. `stored` says
   * the entry is known to be stored (a later one was delivered): then the leader's "none" means purged, and
   * a lagging node's "none" is a failure to try again.
   */
  private entryAt(seq: number, stored: boolean): Promise<StoredMsg | null> {
    const reads = [deadline(this.jsm.streams.getMessage(this.stream, { seq }), READ_TRY_MS).then((entry) => ({ entry, leader: true }))];
    if (this.direct) {
      reads.push(deadline(this.jsm.direct.getMessage(this.stream, { seq }), READ_TRY_MS).then((entry) => ({ entry, leader: false })));
    }
    return new Promise((resolve, reject) => {
      let pending = reads.length;
      let none = false;
      let purged = false;
      let failure: unknown;
      for (const read of reads) {
        read
          .then(
            ({ entry, leader }) => {
              if (entry) return resolve(entry);
              none = true;
              if (leader && stored) purged = true;
            },
            (err: unknown) => {
              failure ??= err;
            },
          )
          .finally(() => {
            if (--pending > 0) return;
            if (purged) reject(new Error(`entry ${seq} of ${this.stream} is gone (purged)`));
            else if (none && !stored) resolve(null);
            else reject(failure ?? new Error(`entry ${seq} of ${this.stream} was not found where it was asked for`));
          });
      }
    });
  }

  /**
   * Whether the log holds an entry at `seq` (the reader is behind if it has not applied it), and the last
   * position the stream's leader named, when it answered in time.
   */
  private async holds(seq: number): Promise<{ behind: boolean; last: number | undefined }> {
    const [entry, last] = await Promise.allSettled([this.entryAt(seq, false), deadline(this.lastSeq(), READ_TRY_MS)]);
    const lastSeq = last.status === 'fulfilled' ? last.value : undefined;
    return { behind: (entry.status === 'fulfilled' && entry.value !== null) || (lastSeq ?? 0) >= seq, last: lastSeq };
  }

  /**
   * Reads the log in order from `fromSeq`, calling `onEntry` for each entry (with the id it was appended
   * with) and waiting for it before the next. An ordered consumer; when it ends or fails (a broker node
   * lost, a stream leader election) the reader opens a new one from the entry after the last it applied,
   * and when it stalls the reader reads the entries by position meanwhile (see `stalled` below).
   * An entry that cannot be applied stops the reader for good: this replica cannot follow the log past it.
   */
  async read(
    fromSeq: number,
    onEntry: (seq: number, entry: Uint8Array, msgId: string | undefined) => Promise<void> | void,
  ): Promise<LogReader> {
    let next = Math.max(1, fromSeq);
    let stopped = false;
    // Entries are applied one at a time, in order, whichever path brings them (the consumer, or the
    // direct reads below): each path takes this turn before applying.
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
    /** Reads entries by position up to `through` (all stored: a later one was delivered), one request each. */
    const readThrough = async (through: number) => {
      while (!stopped && next <= through) {
        const entry = (await this.entryAt(next, true))!;
        await apply(entry.seq, entry.data, entry.header?.get(MSG_ID_HEADER) || undefined);
      }
    };
    /**
     * Reads by position what the log is known to hold past the last entry applied (`confirmed`, asking its
     * leader when that does not reach the next entry); answers how many. Not further: a direct get may be answered by a node holding entries the
     * leader does not, which the log then loses (seen with nats-server 2.9 around a hung leader's return), and a
     * replica that applied them would wait past the log's end.
     */
    const readAvailable = async () => {
      if (next > this.confirmed) await deadline(this.lastSeq(), READ_TRY_MS).catch(() => undefined);
      let read = 0;
      while (!stopped && next <= this.confirmed) {
        const entry = (await this.entryAt(next, true))!;
        await apply(entry.seq, entry.data, entry.header?.get(MSG_ID_HEADER) || undefined);
        read++;
      }
      return read;
    };
    const open = async () => {
      const consumer = await this.js.consumers.get(this.stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: next });
      return consumer.consume(CONSUME_OPTIONS);
    };
    let messages: ConsumerMessages = await open();
    /** When the current consumer was opened, and whether it has delivered anything since. */
    let openedAt = performance.now();
    let delivered = false;
    const warnReopen = throttledLog(this.log, 'replication log reader could not reopen; retrying');
    const warnDirect = throttledLog(this.log, 'replication log could not be read directly; retrying');
    const warnRegressed = throttledLog(this.log, LOG_REGRESSED, 'error');
    // A consumer can stall without ending or failing: its node lost or hung, and the client notices only
    // by missed heartbeats, and cannot make a new one while the cluster has no meta leader. When the log
    // holds an entry past the last one applied and nothing came for a while, the reader reads the log
    // directly, by position, every DIRECT_POLL_MS, and replaces a consumer that stays silent meanwhile,
    // until a consumer delivers again or nothing more comes.
    let progressAt = next;
    let regressedChecks = 0;
    let stalled: Promise<void> | undefined;
    const readDirectly = async () => {
      let foundAt = performance.now();
      while (!stopped && !delivered) {
        try {
          if ((await exclusive(readAvailable)) > 0) foundAt = performance.now();
        } catch (err) {
          warnDirect({ stream: this.stream, next, err });
        }
        if (delivered || performance.now() - foundAt >= DIRECT_IDLE_MS) break;
        if (performance.now() - openedAt >= REPLACE_AFTER_MS && foundAt > openedAt) {
          openedAt = performance.now();
          messages.stop();
        }
        await delay(DIRECT_POLL_MS);
      }
      if (!stopped) this.log.info({ stream: this.stream, next, consumerDelivers: delivered }, 'replication log reader reads on');
    };
    const watchdog = setInterval(() => {
      if (stopped || stalled) return;
      const stalledAt = next;
      if (stalledAt !== progressAt) {
        progressAt = stalledAt;
        return;
      }
      this.holds(stalledAt).then(
        ({ behind, last }) => {
          // The stream's leader names a last position below entries this replica applied, check after check
          // (a new leader may lag for a moment): the broker lost them after they were delivered (seen with
          // nats-server 2.9 after a hung stream leader came back). New entries will take those positions,
          // and this replica, waiting past them, will not read them.
          regressedChecks = last !== undefined && last < stalledAt - 1 ? regressedChecks + 1 : 0;
          if (regressedChecks >= REGRESSED_CHECKS) warnRegressed({ stream: this.stream, applied: stalledAt - 1, last });
          if (stopped || stalled || !behind || next !== stalledAt) return;
          this.log.warn({ stream: this.stream, next }, 'replication log reader stalled; reading directly until a consumer delivers');
          delivered = false;
          stalled = readDirectly().finally(() => {
            stalled = undefined;
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
            delivered = true;
            await exclusive(async () => {
              // The direct path may have applied it (and what comes before it) already.
              if (msg.seq < next) return;
              if (msg.seq > next) await readThrough(msg.seq - 1);
              await apply(msg.seq, msg.data, msg.headers?.get(MSG_ID_HEADER) || undefined);
            });
          }
        } catch (err) {
          if (stopped) throw err;
          this.log.warn({ stream: this.stream, next, err }, 'replication log reader failed; reading on');
        }
        for (let waitMs = REOPEN_FIRST_MS; !stopped; waitMs = Math.min(waitMs * 2, REOPEN_MAX_MS)) {
          await delay(waitMs);
          try {
            messages = await open();
            openedAt = performance.now();
            delivered = false;
            break;
          } catch (err) {
            warnReopen({ stream: this.stream, next, err });
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
        await stalled;
      },
    };
  }
}
