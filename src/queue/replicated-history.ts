// A queue's history when several replicas serve it: its replication log. A replica appends the records of
// the requests it takes (batched per event turn), and the leader the records of its ticks; every replica
// applies every entry in log order with QueueState.apply, so all of them hold the same state, and answers a
// request with what its own record applied, once JetStream has stored it and this replica has applied it.
//
// Leadership: the replica holding the queue's lease (leader-lease.ts) claims a term in the log: a claim
// appended only if the last claim is still the one it has seen. Its term is the claim's position. Records
// only a leader appends carry its term, and an entry whose term is not the latest claim's is skipped by
// every replica, so a deposed leader's late records take no effect anywhere.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { unavailable } from '../errors.js';
import type { LeaderLease } from '../store/replicated/leader-lease.js';
import type { LogReader, ReplicationLog } from '../store/replicated/replication-log.js';
import type { Store } from '../store/store.js';
import type { QueueApplier, QueueHistory } from './queue-history.js';
import type { Applied } from './queue-state.js';
import { decodeLogEntry, encodeLogEntry, LEADER_RECORD_TYPES, type LogEntry } from './record-codec.js';
import type { QueueRecord } from './records.js';

export interface ReplicatedHistoryOptions {
  queueId: string;
  /** This replica's id (in the entries it appends, and its lease). */
  replicaId: string;
  log: ReplicationLog;
  lease: LeaderLease;
  /** The replica's own copy of the queue's stored state and outbox, written in log order. */
  store: Store;
  logger: Logger;
  /** How long to wait to apply an entry this replica appended before answering UNAVAILABLE (default 10 s). */
  applyTimeoutMs?: number;
}

/** How long a replica waits to apply an entry it appended before it answers UNAVAILABLE. */
const APPLY_TIMEOUT_MS = 10_000;

/** Request records proposed in one event turn, appended as one entry. */
interface Batched {
  records: readonly QueueRecord[];
  resolve: (applied: Applied[]) => void;
  reject: (err: unknown) => void;
}

export class ReplicatedHistory implements QueueHistory {
  readonly replicated = true;
  /** Log position of the last entry applied. */
  private applied = 0;
  /** The current term: the position of the last claim applied (0 before any). */
  private term = 0;
  /** This replica's term while the latest claim is its own (0 otherwise). */
  private ownTerm = 0;
  /** Distinguishes this run's claims from an earlier run's of the same replica id. */
  private readonly incarnation = randomUUID();
  /** Appends of this replica waiting to be applied, by append id. */
  private readonly waiting = new Map<string, (applied: Applied[]) => void>();
  /** Positions someone waits to see applied. */
  private readonly seen: { seq: number; resolve: () => void }[] = [];
  private batch: Batched[] = [];
  private reader: LogReader | undefined;
  private stopped = false;

  constructor(
    private readonly applier: QueueApplier,
    private readonly options: ReplicatedHistoryOptions,
  ) {}

  get acting(): boolean {
    return this.ownTerm !== 0 && this.ownTerm === this.term && this.options.lease.leading;
  }

  /** Reads the log from its start and resolves once the entries stored before the call are applied. */
  async start(): Promise<void> {
    const { log, lease } = this.options;
    const caughtUp = await log.lastSeq();
    this.reader = await log.read(1, (seq, bytes, msgId) => this.onEntry(seq, bytes, msgId));
    await this.appliedThrough(caughtUp);
    lease.onChange((leading) => {
      if (leading) void this.claim();
      else this.ownTerm = 0;
    });
    lease.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.ownTerm = 0;
    await this.options.lease.stop();
    await this.reader?.stop();
    const err = unavailable(`queue "${this.options.queueId}" is stopping; retry with backoff`);
    for (const b of this.batch.splice(0)) b.reject(err);
  }

  propose<R extends QueueRecord>(records: readonly R[]): Promise<Applied<R['type']>[]> {
    if (this.stopped) return Promise.reject(unavailable(`queue "${this.options.queueId}" is stopping; retry with backoff`));
    if (records.some((r) => LEADER_RECORD_TYPES.has(r.type))) {
      if (!this.acting) return Promise.reject(unavailable(`this replica no longer leads queue "${this.options.queueId}"`));
      return this.append('lead', { kind: 'records', replicaId: this.options.replicaId, term: this.ownTerm, records }) as Promise<
        Applied<R['type']>[]
      >;
    }
    return new Promise((resolve, reject) => {
      this.batch.push({ records, resolve: resolve as (applied: Applied[]) => void, reject });
      if (this.batch.length === 1) setImmediate(() => this.flush());
    });
  }

  /** The request records of one event turn go out as one entry: one append for many requests. */
  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    if (batch.length === 0) return;
    const records = batch.flatMap((b) => b.records);
    this.append('req', { kind: 'records', replicaId: this.options.replicaId, term: 0, records }).then(
      (applied) => {
        let at = 0;
        for (const b of batch) {
          b.resolve(applied.slice(at, at + b.records.length));
          at += b.records.length;
        }
      },
      (err: unknown) => {
        for (const b of batch) b.reject(err);
      },
    );
  }

  /** Appends an entry and answers what it applied, once this replica has applied it. */
  private async append(kind: 'req' | 'lead', entry: LogEntry, msgId = randomUUID()): Promise<Applied[]> {
    const applied = new Promise<Applied[]>((resolve) => this.waiting.set(msgId, resolve));
    try {
      await this.options.log.append(kind, encodeLogEntry(entry), msgId);
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

  /** One log entry, in order: a claim moves the term; records apply unless fenced out by it. */
  private onEntry(seq: number, bytes: Uint8Array, msgId: string | undefined): void {
    const entry = decodeLogEntry(bytes);
    let applied: Applied[] = [];
    if (entry.kind === 'claim') {
      this.term = seq;
      const own = entry.replicaId === this.options.replicaId && entry.incarnation === this.incarnation;
      this.ownTerm = own && this.options.lease.leading ? seq : 0;
      if (own) this.options.logger.info({ queue: this.options.queueId, term: seq }, 'leading the queue');
    } else if (entry.term === 0 || entry.term === this.term) {
      applied = entry.records.map((record) => this.applier.apply(record));
      const changes = applied.flatMap((a) => a.changes);
      // The local copy is written in log order; its commits apply in call order.
      if (changes.length > 0) {
        const records = entry.records;
        void this.options.store.commit(changes).then(() => this.applier.committed(records));
      }
    } else {
      this.options.logger.debug(
        { queue: this.options.queueId, seq, term: entry.term, current: this.term },
        'entry of an earlier term skipped',
      );
    }
    this.applied = seq;
    const waiter = msgId === undefined ? undefined : this.waiting.get(msgId);
    if (waiter) {
      this.waiting.delete(msgId!);
      waiter(applied);
    }
    while (this.seen.length > 0 && this.seen[0]!.seq <= seq) this.seen.shift()!.resolve();
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
    const { log, lease, replicaId } = this.options;
    while (lease.leading && !this.stopped && this.ownTerm === 0) {
      try {
        const claimed = await log.claim(
          encodeLogEntry({ kind: 'claim', replicaId, incarnation: this.incarnation }),
          this.term,
          randomUUID(),
        );
        await this.appliedThrough(claimed ?? (await log.lastSeq()));
        if (claimed !== undefined) return;
      } catch (err) {
        this.options.logger.warn({ queue: this.options.queueId, err }, 'leadership claim not appended; retrying');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }
}
