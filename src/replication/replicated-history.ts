// A queue's history when several replicas serve it: its replication log. A replica appends the records of
// the requests it takes (batched per event turn), and the leader the records of its ticks; every replica
// applies every entry in log order with QueueState.apply, so all of them hold the same state, and answers a
// request with what its own record applied, once JetStream has stored it and this replica has applied it.
//
// Leadership: the replica holding the queue's lease (leader-lease.ts) claims a term in the log: a claim
// appended only if the last claim is still the one it has seen. Its term is the claim's position. Records
// only a leader appends carry its term, and an entry whose term is not the latest claim's is skipped by
// every replica, so a deposed leader's late records take no effect anywhere.
//
// Checkpoints (queue-checkpoints.ts): a replica starts from the newest usable checkpoint and reads the
// log after it; the leader takes one when its CheckpointSchedule says so (records, bytes or time since
// the last one, whichever comes first; checkpoint-taker.ts).
import { randomUUID } from 'node:crypto';
import type { ObjectStore } from '@nats-io/obj';
import type { Logger } from 'pino';
import { unavailable } from '../errors.js';
import { LogPositionError } from './jetstream/errors.js';
import type { LeaderLease } from './jetstream/leader-lease.js';
import type { LogReader, ReplicationLog } from './jetstream/replication-log.js';
import type { OutboxStore } from '../store/store.js';
import type { Checkpoint } from './wire/checkpoint-codec.js';
import { CheckpointTaker } from './checkpoint-taker.js';
import type { QueueApplier, QueueHistory } from '../queue/queue-history.js';
import { commitSnapshot } from '../queue/queue-snapshot.js';
import type { Applied } from '../queue/queue-state.js';
import { decodeLogEntry, encodeLogEntry, LEADER_RECORD_TYPES, type LogEntry } from './wire/record-codec.js';
import type { QueueRecord } from '../queue/records.js';
import type { CheckpointCompression } from './jetstream/checkpoint-objects.js';
import { DEFAULT_CHECKPOINT_INTERVALS, QueueCheckpoints } from './queue-checkpoints.js';
import { MAX_ENTRY_BYTES, RequestBatcher } from './request-batcher.js';

export interface ReplicatedHistoryOptions {
  queueId: string;
  /** This replica's id (in the entries it appends, and its lease). */
  replicaId: string;
  replicationLog: ReplicationLog;
  lease: LeaderLease;
  /** The replica's own copy of the queue's stored state and outbox, written in log order. */
  store: OutboxStore;
  log: Logger;
  /** How long to wait to apply an entry this replica appended before answering UNAVAILABLE (default 10 s). */
  applyTimeoutMs?: number;
  /** The checkpoint object store; without it the replica reads the whole log and takes no checkpoints. */
  checkpoints?: ObjectStore;
  /** The leader takes a checkpoint after this many records since the last (default 50 000)... */
  checkpointIntervalRecords?: number;
  /** ...or this many bytes of log entries (default 16 MiB)... */
  checkpointIntervalBytes?: number;
  /** ...or this long after the last, if any entry came since (default 60 s), whichever comes first; all three
   *  stretched for a large pool (queue-checkpoints.ts, CheckpointSchedule). */
  checkpointIntervalMs?: number;
  /** How the leader stores its checkpoints (default zstd; checkpoint-objects.ts). */
  checkpointCompression?: CheckpointCompression;
  /** Runs first at start, retried like the other start-up steps: making sure of the queue's stream. */
  prepare?: () => Promise<void>;
  /** Whether the broker connection is up now (absent: taken as up). */
  reachable?: () => boolean;
}

/**
 * What a replica logs (at error level) when an entry carries a term whose position held no claim when this
 * replica applied it: the broker changed entries it had delivered, to this replica or to the leader
 * (docs/replication.md, "What is left"). A deposed leader's late entries name a claim this replica applied.
 */
export const LOG_DIVERGED =
  "replication log entry names a claim at a position where this replica applied another entry: the broker changed entries it had delivered; this replica and the entry's leader differ";

/** What a replica logs (info, once a term) when it skips entries of a term other than the one it applies. */
export const TERM_SKIPPED = 'entries of an earlier term skipped';

/** Backoff of the start-up steps while the broker does not answer. */
const START_RETRY_FIRST_MS = 250;
const START_RETRY_MAX_MS = 5_000;

/** How long a replica waits to apply an entry it appended before it answers UNAVAILABLE. */
const APPLY_TIMEOUT_MS = 10_000;

export class ReplicatedHistory implements QueueHistory {
  /** Log position of the last entry applied. */
  private applied = 0;
  /** The current term: the position of the last claim applied (0 before any). */
  private term = 0;
  /** This replica's term while the latest claim is its own (0 otherwise). */
  private ownTerm = 0;
  /** The positions of the claims this replica applied (since its checkpoint): terms it can vouch for. */
  private readonly claimsApplied = new Set<number>();
  /** The last term whose entries showed this replica's log differs from the broker's (LOG_DIVERGED). */
  private divergedTerm = 0;
  /** The term whose entries this replica last skipped (said once a term). */
  private skippedTerm = 0;
  /** Distinguishes this run's claims from an earlier run's of the same replica id. */
  private readonly incarnation = randomUUID();
  /**
   * Appends of this replica waiting to be applied, by append id, with the entry appended: when the log
   * delivers it, it is applied as it was proposed rather than decoded again (decodeLogEntry(encodeLogEntry(e))
   * equals e, record-codec.ts). Decoding its own entries was a twentieth of a busy replica's time.
   */
  private readonly waiting = new Map<string, { entry: LogEntry; resolve: (applied: Applied[]) => void }>();
  /** Positions someone waits to see applied. */
  private readonly seen: { seq: number; resolve: () => void }[] = [];
  private readonly requests: RequestBatcher;
  private reader: LogReader | undefined;
  private stopped = false;
  private readonly leadingListeners: (() => void)[] = [];
  private readonly checkpoints: QueueCheckpoints | undefined;
  /** Takes this queue's checkpoints while this replica leads it (with the checkpoint store only). */
  private readonly checkpointTaker: CheckpointTaker | undefined;
  /** The position of the checkpoint this replica started from (undefined: from the log's start). */
  private restoredSeqValue: number | undefined;
  /** Entries this replica has read from the log since it started. */
  private entriesReadValue = 0;
  /**
   * The last entry of the replay at start: up to it, an entry's tickets are views of one copy of the
   * entry (TicketCopies 'entry'), one allocation an entry rather than one a ticket (a sixth of a 500,000-ticket
   * replay's time in its profile, with their collection). A waiting ticket then pins the rest of its
   * entry, so what the replay's tickets can pin is at most the log replayed, which the checkpoint schedule
   * bounds (queue-checkpoints.ts), as a restored checkpoint's tickets pin its bytes. Later entries copy
   * each ticket.
   */
  private replayThrough = 0;

  constructor(
    private readonly applier: QueueApplier,
    private readonly options: ReplicatedHistoryOptions,
  ) {
    const { checkpoints, queueId, replicationLog, log, replicaId } = options;
    if (checkpoints) {
      const d = DEFAULT_CHECKPOINT_INTERVALS;
      this.checkpoints = new QueueCheckpoints(
        queueId,
        checkpoints,
        replicationLog,
        log,
        {
          records: options.checkpointIntervalRecords ?? d.records,
          bytes: options.checkpointIntervalBytes ?? d.bytes,
          ms: options.checkpointIntervalMs ?? d.ms,
        },
        options.checkpointCompression,
      );
      this.checkpointTaker = new CheckpointTaker(this.checkpoints, this, applier, options.store, queueId, log);
    }
    const requestEntry = (records: readonly QueueRecord[]): LogEntry => ({ kind: 'records', replicaId, term: 0, records });
    this.requests = new RequestBatcher(
      (records) => encodeLogEntry(requestEntry(records)),
      (records, bytes) => this.append('req', requestEntry(records), bytes),
    );
  }

  /** The position of the checkpoint this replica started from; undefined when it read the log from its start. */
  get restoredSeq(): number | undefined {
    return this.restoredSeqValue;
  }

  /** The log position of the last entry applied (or of the checkpoint restored). */
  get appliedSeq(): number {
    return this.applied;
  }

  /** The term of the last claim applied (0 before any): a leader's entries of another term are skipped. */
  get appliedTerm(): number {
    return this.term;
  }

  /** How many log entries this replica has read since it started. */
  get entriesRead(): number {
    return this.entriesReadValue;
  }

  /** The position of the last checkpoint this replica saved, if it saved one. */
  get savedSeq(): number | undefined {
    return this.checkpointTaker?.savedSeq;
  }

  get reachable(): boolean {
    return this.options.reachable?.() ?? true;
  }

  get leading(): boolean {
    return this.ownTerm !== 0 && this.ownTerm === this.term && this.options.lease.leading;
  }

  begin(caughtUp: () => void): void {
    this.start().then(caughtUp, (err: unknown) =>
      this.options.log.error({ queue: this.options.queueId, err }, 'queue could not follow its replication log'),
    );
  }

  /**
   * Restores the newest usable checkpoint (if any), reads the log from the entry after it (else from its
   * start) and resolves once the entries stored before the call are applied. Fails with LogPositionError
   * when the log no longer holds that entry.
   */
  async start(): Promise<void> {
    const { replicationLog, lease, queueId } = this.options;
    // Where to start: nothing changes until both are known, so a broker that does not answer yet (a cluster
    // still forming, a stream electing its leader) is waited out rather than leaving the queue starting.
    const { prepare } = this.options;
    // A queue added by a reload may have no stream yet (create mode), or must wait for it (bind mode).
    if (prepare) await this.untilAnswered('make sure of its replication stream', prepare);
    const { checkpoint, caughtUp, from } = await this.untilAnswered('locate the log and its checkpoint', async () => {
      const checkpoint = await this.checkpoints?.latest();
      const caughtUp = await replicationLog.lastSeq();
      const from = (checkpoint?.appliedSeq ?? 0) + 1;
      const first = await replicationLog.firstSeq();
      if (first > from || from > caughtUp + 1) {
        throw new LogPositionError(queueId, replicationLog.stream, from, { first, last: caughtUp }, checkpoint?.appliedSeq);
      }
      return { checkpoint, caughtUp, from };
    });
    if (checkpoint) await this.restore(checkpoint);
    this.replayThrough = caughtUp;
    this.reader = await this.untilAnswered('open the log reader', () =>
      replicationLog.read(from, (seq, bytes, msgId) => this.onEntry(seq, bytes, msgId)),
    );
    await this.appliedThrough(caughtUp);
    lease.onChange((leading) => {
      if (leading) void this.claim();
      else this.ownTerm = 0;
    });
    lease.start();
    this.checkpointTaker?.start();
  }

  /**
   * Runs `step` until it answers, retrying with backoff while the broker fails or times out; a log that
   * cannot be followed (LogPositionError) fails at once, as does a stop.
   */
  private async untilAnswered<T>(what: string, step: () => Promise<T>): Promise<T> {
    for (let retryInMs = START_RETRY_FIRST_MS; ; retryInMs = Math.min(retryInMs * 2, START_RETRY_MAX_MS)) {
      if (this.stopped) throw unavailable(`queue "${this.options.queueId}" is stopping`);
      try {
        return await step();
      } catch (err) {
        if (err instanceof LogPositionError || this.stopped) throw err;
        this.options.log.warn({ queue: this.options.queueId, err, retryInMs }, `could not ${what}; retrying`);
        await new Promise((resolve) => setTimeout(resolve, retryInMs));
      }
    }
  }

  onLeading(listener: () => void): void {
    this.leadingListeners.push(listener);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.ownTerm = 0;
    const checkpointsDone = this.checkpointTaker?.stop();
    await this.options.lease.stop();
    await this.reader?.stop();
    await checkpointsDone;
    const err = unavailable(`queue "${this.options.queueId}" is stopping; retry with backoff`);
    this.requests.rejectWaiting(err);
  }

  propose<R extends QueueRecord>(records: readonly R[]): Promise<Applied<R['type']>[]> {
    if (this.stopped) return Promise.reject(unavailable(`queue "${this.options.queueId}" is stopping; retry with backoff`));
    if (records.some((r) => LEADER_RECORD_TYPES.has(r.type))) {
      if (!this.leading) return Promise.reject(unavailable(`this replica no longer leads queue "${this.options.queueId}"`));
      return this.appendLead(records) as Promise<Applied<R['type']>[]>;
    }
    return this.requests.propose(records) as Promise<Applied<R['type']>[]>;
  }

  /**
   * A leader's records in one entry, or in halves, one after the other, while their entry would pass
   * MAX_ENTRY_BYTES (a tick proposes a slice's matches together). Answers what each record did; none for
   * the records after a half it no longer leads to append, as for an entry the log skipped.
   */
  private async appendLead(records: readonly QueueRecord[]): Promise<Applied[]> {
    const entry: LogEntry = { kind: 'records', replicaId: this.options.replicaId, term: this.ownTerm, records };
    const bytes = encodeLogEntry(entry);
    if (bytes.byteLength <= MAX_ENTRY_BYTES || records.length === 1) return this.append('lead', entry, bytes);
    const half = records.length >> 1;
    const first = await this.appendLead(records.slice(0, half));
    return this.leading ? [...first, ...(await this.appendLead(records.slice(half)))] : first;
  }

  /** Appends an entry (`bytes`, its encoding) and answers what it applied, once this replica has applied it. */
  private async append(kind: 'req' | 'lead', entry: LogEntry, bytes: Uint8Array): Promise<Applied[]> {
    const msgId = randomUUID();
    const applied = new Promise<Applied[]>((resolve) => this.waiting.set(msgId, { entry, resolve }));
    try {
      await this.options.replicationLog.append(kind, bytes, msgId);
    } catch (err) {
      this.waiting.delete(msgId);
      // Not stored, or not known to be: the caller retries (a CreateTicket retry is idempotent by its id).
      throw unavailable(`the replication log of queue "${this.options.queueId}" did not store the request; retry with backoff`, err);
    }
    // Stored: this replica applies it as soon as its reader gets there. A reader that cannot (the broker
    // gone right after the append) must not hold the caller forever; the record takes effect regardless.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        this.waiting.delete(msgId);
        reject(
          unavailable(
            `queue "${this.options.queueId}": the request was stored but this replica has not applied it yet; retry with backoff`,
          ),
        );
      }, this.options.applyTimeoutMs ?? APPLY_TIMEOUT_MS);
    });
    try {
      return await Promise.race([applied, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A checkpoint's state into the queue and the local store (empty until now): the queue's records (so
   * restored tickets' bytes can be read) and its outbox (so numbering goes on where every replica's does).
   */
  private async restore(checkpoint: Checkpoint): Promise<void> {
    const { store, queueId, log } = this.options;
    await commitSnapshot(store, queueId, checkpoint.state);
    store.restoreOutbox(queueId, checkpoint.outbox);
    this.applier.restore(checkpoint.state);
    this.applied = checkpoint.appliedSeq;
    this.term = checkpoint.term;
    this.restoredSeqValue = checkpoint.appliedSeq;
    log.info(
      { queue: queueId, seq: checkpoint.appliedSeq, term: checkpoint.term, tickets: checkpoint.state.active.length },
      'queue restored from a checkpoint',
    );
  }

  /** One log entry, in order: a claim moves the term; records apply unless fenced out by it. */
  private onEntry(seq: number, bytes: Uint8Array, msgId: string | undefined): Promise<void> | undefined {
    // The log has no holes: a missing entry (purged while this replica read it) would make it diverge.
    if (seq !== this.applied + 1) {
      throw new Error(`queue "${this.options.queueId}": log entry ${seq} follows ${this.applied}; entries between are gone`);
    }
    this.entriesReadValue++;
    // An entry this replica appended, and waits for: applied as it was proposed.
    const appended = msgId === undefined ? undefined : this.waiting.get(msgId);
    if (appended) this.waiting.delete(msgId!);
    const entry = appended?.entry ?? decodeLogEntry(bytes, seq <= this.replayThrough ? 'entry' : 'ticket');
    let applied: Applied[] = [];
    if (entry.kind === 'claim') {
      this.term = seq;
      this.claimsApplied.add(seq);
      const own = entry.replicaId === this.options.replicaId && entry.incarnation === this.incarnation;
      this.ownTerm = own && this.options.lease.leading ? seq : 0;
      if (own) this.options.log.info({ queue: this.options.queueId, term: seq }, 'leading the queue');
      else this.options.log.info({ queue: this.options.queueId, term: seq, leader: entry.replicaId }, 'following the queue');
      if (this.ownTerm !== 0) for (const listener of this.leadingListeners) listener();
    } else if (entry.term === 0 || entry.term === this.term) {
      applied = entry.records.map((record) => this.applier.apply(record));
      const changes = applied.flatMap((a) => a.changes);
      // The local copy is written in log order; its commits apply in call order.
      if (changes.length > 0) {
        const records = entry.records;
        void this.options.store.commit(changes).then(() => this.applier.committed(records));
      }
    } else if (!this.claimsApplied.has(entry.term) && entry.term > (this.restoredSeqValue ?? 0)) {
      // Every entry of a term comes after its claim, and this replica applied each position in order: the
      // entry it applied at position `entry.term` was not a claim. Said once per term.
      if (this.divergedTerm !== entry.term) {
        this.divergedTerm = entry.term;
        this.options.log.error(
          { queue: this.options.queueId, seq, claimAt: entry.term, term: this.term, leader: entry.replicaId },
          LOG_DIVERGED,
        );
      }
    } else if (this.skippedTerm !== entry.term) {
      // A deposed leader's late entries, normally: said once a term, so that a replica that keeps skipping its
      // leader's entries (another term applied than the leader's) shows in its log.
      this.skippedTerm = entry.term;
      this.options.log.info(
        { queue: this.options.queueId, seq, term: entry.term, current: this.term, leader: entry.replicaId },
        TERM_SKIPPED,
      );
    }
    this.applied = seq;
    appended?.resolve(applied);
    while (this.seen.length > 0 && this.seen[0]!.seq <= seq) this.seen.shift()!.resolve();
    return this.checkpointTaker?.applied(bytes.length, entry.kind === 'claim' ? 1 : entry.records.length);
  }

  private appliedThrough(seq: number): Promise<void> {
    if (this.applied >= seq) return Promise.resolve();
    return new Promise((resolve) => {
      this.seen.push({ seq, resolve });
      this.seen.sort((a, b) => a.seq - b.seq);
    });
  }

  /**
   * Claims a term after winning the lease: appended only if no other claim came after the last one this
   * replica applied; on losing that race it catches up and tries again, while it still holds the lease.
   */
  private async claim(): Promise<void> {
    const { replicationLog, lease, replicaId } = this.options;
    while (lease.leading && !this.stopped && this.ownTerm === 0) {
      try {
        const claimed = await replicationLog.claim(
          encodeLogEntry({ kind: 'claim', replicaId, incarnation: this.incarnation }),
          this.term,
          randomUUID(),
        );
        await this.appliedThrough(claimed ?? (await replicationLog.lastSeq()));
        if (claimed !== undefined) return;
      } catch (err) {
        this.options.log.warn({ queue: this.options.queueId, err }, 'leadership claim not appended; retrying');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }
}
