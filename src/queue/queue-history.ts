// Where a queue's records go: its history. The embedded history applies a record at once and commits its
// changes to the local store; a replicated history (src/replication/replicated-history.ts) appends it to the
// queue's replication log and applies it when the log delivers it, as every replica does. The queue runtime
// is the same over both: it starts the history, proposes records and is told what each applied.
import type { QueueSnapshot, Store } from '../store/store.js';
import type { QueueSnapshotData } from './queue-snapshot.js';
import type { Applied } from './queue-state.js';
import type { QueueRecord, RecordOf } from './records.js';

/** Whether a record creates a ticket (its bytes are kept in memory until the store answers for them). */
export const isCreate = (record: QueueRecord): record is RecordOf<'ticket.create'> => record.type === 'ticket.create';

/** What a history calls on its queue. */
export interface QueueApplier {
  /** Applies one record to the queue's state and pool, in history order. */
  apply<R extends QueueRecord>(record: R): Applied<R['type']>;
  /** The local store has committed the changes of these records. */
  committed(records: readonly QueueRecord[]): void;
  /**
   * The queue's state as data (QueueState.snapshotInSlices): taken after one record, and valid only if no
   * record is applied before it resolves.
   */
  snapshot(): Promise<QueueSnapshotData>;
  /**
   * Replaces the queue's state with a checkpoint's, before the first record is applied. The store must
   * already answer for its tickets (commitSnapshot done).
   */
  restore(data: QueueSnapshotData): void;
  /** Loads the queue as the local store holds it, before the first record is applied. */
  load(stored: QueueSnapshot): void;
}

export interface QueueHistory {
  /**
   * Whether this copy leads the queue now: it appends a leader's records (ticks, expiry, evictions) and
   * delivers outcomes. The only copy always leads.
   */
  readonly leading: boolean;
  /** Calls `listener` each time this copy starts to act for the queue (absent: it always acts). */
  onLeading?(listener: () => void): void;
  /** False while the history cannot take records (the replicated log's broker unreachable); absent: always can. */
  readonly reachable?: boolean;
  /** The replicated log's position of the last entry this copy applied; absent for the embedded history. */
  readonly appliedSeq?: number;
  /**
   * The replicated log's term this copy applies a leader's entries under (the position of the last claim it
   * applied); absent for the embedded history. Replicas that agree on the position but not on the term
   * disagree on whose matches count.
   */
  readonly appliedTerm?: number;
  /**
   * Brings the queue's state up to date and calls `caughtUp` once the copy may answer requests: the
   * embedded history within this call (it loads the store), a replicated one once it has applied its log
   * so far. A history that cannot catch up says why in the log and never calls it.
   */
  begin(caughtUp: () => void): void;
  /** Proposes records; answers what each applied once they are durable. */
  propose<R extends QueueRecord>(records: readonly R[]): Promise<Applied<R['type']>[]>;
  stop(): Promise<void>;
}

/** Makes a queue's history, given the queue to apply records to. */
export type HistoryFactory = (queueId: string, applier: QueueApplier) => QueueHistory;

/**
 * The single-process history on the embedded store: records are applied here, in order, and their changes
 * committed together; the store applies commits in call order, so a record is durable only after every
 * record before it. This process is the only copy, so it always leads.
 */
export class EmbeddedHistory implements QueueHistory {
  readonly leading = true;

  constructor(
    private readonly queueId: string,
    private readonly applier: QueueApplier,
    private readonly store: Store,
  ) {}

  begin(caughtUp: () => void): void {
    this.applier.load(this.store.loadQueue(this.queueId));
    caughtUp();
  }

  propose<R extends QueueRecord>(records: readonly R[]): Promise<Applied<R['type']>[]> {
    const applied = records.map((record) => this.applier.apply(record));
    const changes = applied.flatMap((a) => a.changes);
    // With nothing to write, answer once what the records saw is durable.
    const durable = changes.length > 0 ? this.store.commit(changes) : this.store.whenDurable();
    const settled = records.some(isCreate) ? durable.finally(() => this.applier.committed(records)) : durable;
    return settled.then(() => applied);
  }

  async stop(): Promise<void> {}
}
