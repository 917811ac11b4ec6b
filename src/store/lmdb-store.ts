// The embedded store: one lmdb environment in the data directory. lmdb-js batches every write issued in
// one event turn into a single transaction and resolves it after the disk flush, which is the group
// commit CreateTicket relies on: durability costs one flush per batch, not per ticket.
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { open, type Database, type RootDatabase } from 'lmdb';
import { OutcomeSchema, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { OutcomeQuery, ParkedDelivery, QueueSnapshot, Store, StoreChange, StoredBackfill, StoredTicket, TicketRef } from './store.js';
import { decodeResolution, decodeTicketRecord, encodeResolution, encodeTicketRecord } from './ticket-record.js';

// Keys are `${queueId}\u0000${id}`: queue ids never contain NUL, so a queue's records form one key range.
const SEP = '\u0000';
const key = (queueId: string, id: string) => `${queueId}${SEP}${id}`;
const rangeOf = (queueId: string) => ({ start: `${queueId}${SEP}`, end: `${queueId}\u0001` });
// Keys that sort by a number within a queue (outcome sequence, ticket position): fixed-width hex.
const orderedKey = (queueId: string, n: bigint | number) => key(queueId, n.toString(16).padStart(16, '0'));
const ticketKey = (ref: TicketRef) => orderedKey(ref.queueId, ref.position);
const positionOf = (ticketKey: string) => parseInt(ticketKey.slice(ticketKey.indexOf(SEP) + 1), 16);

interface DeliveryRecord {
  cursor: string;
  parked?: { sequence: string; attempts: number; lastError: string; parkedAtMs: number };
}

export interface LmdbStoreOptions {
  path: string;
  /** Called when a commit fails: the in-memory state no longer matches the disk, so the process must stop. */
  onFatal: (err: unknown) => void;
}

export class LmdbStore implements Store {
  readonly producerId: string;
  private readonly root: RootDatabase;
  /** queueId\0position -> ticket record (ticket-record.ts). */
  private readonly tickets: Database<Uint8Array, string>;
  /** queueId\0position -> resolution record, for tickets in a committed match. */
  private readonly resolutions: Database<Uint8Array, string>;
  private readonly backfills: Database<StoredBackfill, string>;
  private readonly outcomes: Database<Uint8Array, number>;
  private readonly meta: Database<unknown, string>;
  /** queueId\0sequence -> sequence: each queue's outcomes in order. */
  private readonly queueIndex: Database<number, string>;
  private readonly delivery: Database<DeliveryRecord, string>;
  private readonly consumers: Database<string, string>;
  private nextSequence: bigint;
  /** The highest sequence whose commit has completed (nextSequence runs ahead while a commit is in flight). */
  private committedSequence: bigint;
  private readonly outcomeListeners: ((queueIds: ReadonlySet<string>) => void)[] = [];

  constructor(private readonly options: LmdbStoreOptions) {
    mkdirSync(options.path, { recursive: true });
    // overlappingSync off: a commit's promise then resolves only after fdatasync, so an acknowledged write
    // is on disk, not only in the page cache (with it on, lmdb-js resolves at commit and syncs later).
    this.root = open({ path: options.path, maxDbs: 10, noSync: false, overlappingSync: false });
    this.tickets = this.root.openDB<Uint8Array, string>({ name: 'ticket_records', encoding: 'binary' });
    this.resolutions = this.root.openDB<Uint8Array, string>({ name: 'ticket_resolutions', encoding: 'binary' });
    // Builds before ticket records were keyed by position kept tickets in `tickets`: refuse to start
    // rather than serve without them.
    for (const _ of this.root.openDB<unknown, string>({ name: 'tickets' }).getKeys({ limit: 1 })) {
      void this.root.close();
      throw new Error(`${options.path} holds tickets in an earlier data layout (database "tickets") that this version does not read; drain it with the build that wrote it`);
    }
    this.backfills = this.root.openDB<StoredBackfill, string>({ name: 'backfills' });
    this.outcomes = this.root.openDB<Uint8Array, number>({ name: 'outcomes', encoding: 'binary' });
    this.meta = this.root.openDB<unknown, string>({ name: 'meta' });
    this.queueIndex = this.root.openDB<number, string>({ name: 'queue_outcomes' });
    this.delivery = this.root.openDB<DeliveryRecord, string>({ name: 'delivery' });
    this.consumers = this.root.openDB<string, string>({ name: 'consumers' });

    let producerId = this.meta.get('producer_id') as string | undefined;
    if (!producerId) {
      producerId = randomUUID();
      this.meta.putSync('producer_id', producerId);
    }
    this.producerId = producerId;
    // Kept in meta with every commit that records outcomes: the outbox itself may be emptied by retention.
    // (An outbox written before that was kept: continue after its last key.)
    const kept = BigInt((this.meta.get('next_sequence') as string | undefined) ?? '1');
    let afterLast = 1n;
    for (const k of this.outcomes.getKeys({ reverse: true, limit: 1 })) afterLast = BigInt(k) + 1n;
    this.nextSequence = kept > afterLast ? kept : afterLast;
    this.committedSequence = this.nextSequence - 1n;
  }

  commit(changes: readonly StoreChange[]): Promise<void> {
    // One ticket or request change (CreateTicket, CancelTicket): a plain write, which lmdb batches with the
    // others of this event turn and runs on its writer thread. A transaction callback would run on the main
    // thread. Order is kept: puts and transaction callbacks are applied in call order.
    const single = changes.length === 1 ? this.direct(changes[0]!) : undefined;
    if (single) {
      return single.then(
        () => undefined,
        (err: unknown) => {
          this.options.onFatal(err);
          throw err;
        },
      );
    }
    const done = this.root.transaction(() => {
      // Runs inside the batched write transaction, in call order: sequences are assigned in commit order.
      for (const change of changes) this.apply(change);
      return this.nextSequence - 1n;
    });
    const outcomeQueues = new Set(changes.flatMap((c) => (c.type === 'outcome.record' ? [c.outcome.queueId] : [])));
    return done.then(
      (through: bigint) => {
        if (through > this.committedSequence) this.committedSequence = through;
        if (outcomeQueues.size > 0) for (const listener of this.outcomeListeners) listener(outcomeQueues);
      },
      (err: unknown) => {
        this.options.onFatal(err);
        throw err;
      },
    );
  }

  private direct(change: StoreChange): Promise<unknown> | undefined {
    switch (change.type) {
      case 'ticket.put':
        if (change.ticket.state !== 'active') return undefined;
        return this.tickets.put(ticketKey(change.ticket), encodeTicketRecord(change.ticket.ticketId, change.ticket.ticket));
      case 'backfill.put':
        return this.backfills.put(key(change.backfill.queueId, change.backfill.backfillId), change.backfill);
      case 'backfill.delete':
        return this.backfills.remove(key(change.queueId, change.backfillId));
      default:
        return undefined;
    }
  }

  async whenDurable(): Promise<void> {
    await this.root.flushed;
  }

  private apply(change: StoreChange): void {
    switch (change.type) {
      case 'ticket.put': {
        const { ticket } = change;
        void this.tickets.put(ticketKey(ticket), encodeTicketRecord(ticket.ticketId, ticket.ticket));
        if (ticket.state === 'resolved') void this.resolutions.put(ticketKey(ticket), encodeResolution(ticket.matchId ?? '', ticket.resolvedAtMs ?? 0));
        else void this.resolutions.remove(ticketKey(ticket));
        return;
      }
      case 'ticket.resolve':
        void this.resolutions.put(ticketKey(change.ref), encodeResolution(change.matchId, change.resolvedAtMs));
        return;
      case 'ticket.reactivate':
        void this.resolutions.remove(ticketKey(change.ref));
        return;
      case 'ticket.delete':
        void this.tickets.remove(ticketKey(change.ref));
        void this.resolutions.remove(ticketKey(change.ref));
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
        void this.queueIndex.put(orderedKey(change.outcome.queueId, sequence), Number(sequence));
        void this.meta.put('next_sequence', this.nextSequence.toString());
        return;
      }
      case 'outcome.delete':
        void this.outcomes.remove(Number(change.sequence));
        void this.queueIndex.remove(orderedKey(change.queueId, change.sequence));
        return;
      case 'delivery.advance': {
        const record = this.delivery.get(change.queueId);
        void this.delivery.put(change.queueId, { ...record, cursor: change.sequence.toString() });
        return;
      }
      case 'delivery.park': {
        const cursor = this.delivery.get(change.queueId)?.cursor ?? '0';
        const parked = change.parked && { ...change.parked, sequence: change.parked.sequence.toString() };
        void this.delivery.put(change.queueId, parked ? { cursor, parked } : { cursor });
        return;
      }
      case 'consumer.advance':
        void this.consumers.put(change.consumer, change.sequence.toString());
        return;
    }
  }

  queueOutcomes(queueId: string, afterSequence: bigint, limit: number): Outcome[] {
    const out: Outcome[] = [];
    const { end } = rangeOf(queueId);
    for (const { value } of this.queueIndex.getRange({ start: orderedKey(queueId, afterSequence + 1n), end, limit })) {
      const bytes = this.outcomes.get(value);
      if (bytes) out.push(fromBinary(OutcomeSchema, bytes));
    }
    return out;
  }

  deliveryCursor(queueId: string): bigint {
    return BigInt(this.delivery.get(queueId)?.cursor ?? '0');
  }

  parkedDelivery(queueId: string): ParkedDelivery | undefined {
    const parked = this.delivery.get(queueId)?.parked;
    return parked && { ...parked, sequence: BigInt(parked.sequence) };
  }

  consumerPosition(consumer: string): bigint | undefined {
    const position = this.consumers.get(consumer);
    return position === undefined ? undefined : BigInt(position);
  }

  lastSequence(): bigint {
    return this.committedSequence;
  }

  onOutcomesCommitted(listener: (queueIds: ReadonlySet<string>) => void): void {
    this.outcomeListeners.push(listener);
  }

  loadQueue(queueId: string): QueueSnapshot {
    const resolutions = new Map<string, Uint8Array>();
    for (const { key: k, value } of this.resolutions.getRange(rangeOf(queueId))) resolutions.set(k, value);
    return {
      tickets: [...this.tickets.getRange(rangeOf(queueId)).map(({ key: k, value }) => this.storedTicket(queueId, positionOf(k), value, resolutions.get(k)))],
      backfills: [...this.backfills.getRange(rangeOf(queueId)).map(({ value }) => value)],
    };
  }

  readTicket(ref: TicketRef): StoredTicket | undefined {
    const record = this.tickets.get(ticketKey(ref));
    return record && this.storedTicket(ref.queueId, ref.position, record, this.resolutions.get(ticketKey(ref)));
  }

  private storedTicket(queueId: string, position: number, record: Uint8Array, resolution: Uint8Array | undefined): StoredTicket {
    const { ticketId, ticket } = decodeTicketRecord(record);
    if (!resolution) return { queueId, ticketId, position, ticket, state: 'active' };
    return { queueId, ticketId, position, ticket, state: 'resolved', ...decodeResolution(resolution) };
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
      if (query.queueFilter && !query.queueFilter(outcome.queueId)) continue;
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

