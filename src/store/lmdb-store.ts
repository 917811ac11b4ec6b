// The embedded store: one lmdb environment in the data directory. lmdb-js batches every write issued in
// one event turn into a single transaction and resolves it after the disk flush, which is the group
// commit CreateTicket relies on: durability costs one flush per batch, not per ticket.
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { open, type Database, type RootDatabase } from 'lmdb';
import { OutcomeSchema, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { OutcomeQuery, QueueSnapshot, Store, StoreChange, StoredBackfill, StoredTicket } from './store.js';

// Keys are `${queueId}\u0000${id}`: queue ids never contain NUL, so a queue's records form one key range.
const SEP = '\u0000';
const key = (queueId: string, id: string) => `${queueId}${SEP}${id}`;
const rangeOf = (queueId: string) => ({ start: `${queueId}${SEP}`, end: `${queueId}\u0001` });

export interface LmdbStoreOptions {
  path: string;
  /** Called when a commit fails: the in-memory state no longer matches the disk, so the process must stop. */
  onFatal: (err: unknown) => void;
}

export class LmdbStore implements Store {
  readonly producerId: string;
  private readonly root: RootDatabase;
  private readonly tickets: Database<StoredTicket, string>;
  private readonly backfills: Database<StoredBackfill, string>;
  private readonly outcomes: Database<Uint8Array, number>;
  private readonly meta: Database<unknown, string>;
  private nextSequence: bigint;

  constructor(private readonly options: LmdbStoreOptions) {
    mkdirSync(options.path, { recursive: true });
    this.root = open({ path: options.path, maxDbs: 8, noSync: false });
    this.tickets = this.root.openDB<StoredTicket, string>({ name: 'tickets' });
    this.backfills = this.root.openDB<StoredBackfill, string>({ name: 'backfills' });
    this.outcomes = this.root.openDB<Uint8Array, number>({ name: 'outcomes', encoding: 'binary' });
    this.meta = this.root.openDB<unknown, string>({ name: 'meta' });

    let producerId = this.meta.get('producer_id') as string | undefined;
    if (!producerId) {
      producerId = randomUUID();
      this.meta.putSync('producer_id', producerId);
    }
    this.producerId = producerId;
    // The outcomes db is keyed by producer_sequence, so its last key is the last sequence ever committed.
    let last = 0n;
    for (const k of this.outcomes.getKeys({ reverse: true, limit: 1 })) last = BigInt(k);
    this.nextSequence = last + 1n;
  }

  commit(changes: readonly StoreChange[]): Promise<void> {
    const done = this.root.transaction(() => {
      // Runs inside the batched write transaction, in call order: sequences are assigned in commit order.
      for (const change of changes) this.apply(change);
    });
    return done.then(
      () => undefined,
      (err: unknown) => {
        this.options.onFatal(err);
        throw err;
      },
    );
  }

  async whenDurable(): Promise<void> {
    await this.root.flushed;
  }

  private apply(change: StoreChange): void {
    switch (change.type) {
      case 'ticket.put':
        void this.tickets.put(key(change.ticket.queueId, change.ticket.ticketId), change.ticket);
        return;
      case 'ticket.delete':
        void this.tickets.remove(key(change.queueId, change.ticketId));
        return;
      case 'backfill.put':
        void this.backfills.put(key(change.backfill.queueId, change.backfill.backfillId), change.backfill);
        return;
      case 'backfill.delete':
        void this.backfills.remove(key(change.queueId, change.backfillId));
        return;
      case 'outcome.record': {
        const sequence = this.nextSequence++;
        change.outcome.producerId = this.producerId;
        change.outcome.producerSequence = sequence;
        void this.outcomes.put(Number(sequence), toBinary(OutcomeSchema, change.outcome));
        return;
      }
    }
  }

  loadQueue(queueId: string): QueueSnapshot {
    return {
      tickets: [...this.tickets.getRange(rangeOf(queueId)).map(({ value }) => value)],
      backfills: [...this.backfills.getRange(rangeOf(queueId)).map(({ value }) => value)],
    };
  }

  storedQueueIds(): string[] {
    const ids = new Set<string>();
    for (const db of [this.tickets, this.backfills] as Database<unknown, string>[]) {
      // Skip-scan: one key per queue, then jump past that queue's range.
      let start = '';
      for (;;) {
        const first = [...db.getKeys({ start, limit: 1 })][0];
        if (first === undefined) break;
        const queueId = first.slice(0, first.indexOf(SEP));
        ids.add(queueId);
        start = rangeOf(queueId).end;
      }
    }
    return [...ids].sort();
  }

  listOutcomes(query: OutcomeQuery): Outcome[] {
    const out: Outcome[] = [];
    const limit = query.limit ?? 1000;
    const start = Number((query.afterSequence ?? 0n) + 1n);
    for (const { value } of this.outcomes.getRange({ start })) {
      const outcome = fromBinary(OutcomeSchema, value);
      if (query.queueId !== undefined && outcome.queueId !== query.queueId) continue;
      out.push(outcome);
      if (out.length >= limit) break;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.root.flushed;
    await this.root.close();
  }
}

