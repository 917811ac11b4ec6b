// A Store held in memory, for fast in-process tests of the queue runtime and the core, and for benchmarks
// that measure everything but the disk. It keeps the embedded store's contract (store.ts): commits apply
// atomically, in call order, and become visible (readTicket, outcomes, listeners) when their promise
// settles, not before, just as lmdb answers only for committed records. Nothing survives the process.
// In the replicated mode it is a replica's local copy of one queue, outbox included (a busy queue's
// outcomes): reads start by binary search and retention deletes are amortized O(1) (sequence-index.ts).
import { randomUUID } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import { OutcomeSchema, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { type EncodedOutcome, withProducer } from './outcome-record.js';
import { SequenceIndex } from './sequence-index.js';
import { TicketRecords } from './ticket-records.js';
import type {
  OutboxSnapshot,
  OutboxStore,
  OutcomeQuery,
  ParkedDelivery,
  QueueSnapshot,
  StoreChange,
  StoredBackfill,
  StoredTicket,
  StoredTicketState,
  TicketRef,
} from './store.js';

interface QueueRecords {
  /** position -> ticket (with its resolution, if any). */
  tickets: TicketRecords;
  backfills: Map<string, StoredBackfill>;
  /** This queue's outcome sequences, ascending. */
  outcomes: SequenceIndex;
}

export interface MemoryStoreOptions {
  producerId?: string;
  /** Called when a commit fails (only an injected failure can: see failCommits). */
  onFatal?: (err: unknown) => void;
  /**
   * Each commit settles this long after it was issued (and after every earlier one), as a slow disk would:
   * for tests of what the runtime does while its writes are in flight.
   */
  commitDelayMs?: number;
}

export class MemoryStore implements OutboxStore {
  private producer: string;
  private readonly queues = new Map<string, QueueRecords>();
  /**
   * Recorded outcomes by sequence: their bytes with the producer fields, or, until first read, the outcome
   * as committed. A replica's copy drops most of its outcomes unread once the leader has delivered them, so
   * it never pays for their bytes (outcomes/outcome-encoding.ts).
   */
  private readonly outcomes = new Map<bigint, Uint8Array | EncodedOutcome>();
  /** Every queue's outcome sequences, ascending (commits apply in sequence order). */
  private readonly outcomeOrder = new SequenceIndex();
  private readonly cursors = new Map<string, { cursor: bigint; parked?: ParkedDelivery }>();
  private readonly consumers = new Map<string, bigint>();
  private readonly consumerOwners = new Map<string, string>();
  private readonly outcomeListeners: ((queueIds: ReadonlySet<string>) => void)[] = [];
  private nextSequence = 1n;
  private committedSequence = 0n;
  /** The last commit issued: every later one settles after it. */
  private tail: Promise<void> = Promise.resolve();
  private failure: Error | undefined;

  constructor(private readonly options: MemoryStoreOptions = {}) {
    this.producer = options.producerId ?? randomUUID();
  }

  get producerId(): string {
    return this.producer;
  }

  /**
   * Names the producer of the outcomes this store numbers from now on. Only before it has numbered any:
   * a replicated queue's copy learns its producer id from the queue's stream once that is made sure of.
   */
  adoptProducerId(producerId: string): void {
    if (this.nextSequence !== 1n) throw new Error('a store that has numbered outcomes keeps its producer id');
    this.producer = producerId;
  }

  /** From now on every commit fails with `err` (a full disk, say); undefined heals the store. */
  failCommits(err: Error | undefined): void {
    this.failure = err;
  }

  /** Fails while commits fail (failCommits), as the embedded store's probe does while the disk is full. */
  async probeWrite(): Promise<void> {
    if (this.failure) throw this.failure;
  }

  commit(changes: readonly StoreChange[]): Promise<void> {
    // Sequences are taken in call order, as the embedded store takes them when the writes are issued.
    const sequences = changes.map((c) => (c.type === 'outcome.record' ? this.nextSequence++ : 0n));
    const failure = this.failure;
    const delayMs = this.options.commitDelayMs ?? 0;
    const issued = delayMs > 0 ? Promise.all([this.tail, new Promise((resolve) => setTimeout(resolve, delayMs))]) : this.tail;
    const done = issued.then(() => {
      if (failure) {
        this.options.onFatal?.(failure);
        throw failure;
      }
      const outcomeQueues = new Set<string>();
      for (const [i, change] of changes.entries()) {
        this.apply(change, sequences[i]!, outcomeQueues);
        if (sequences[i]! > this.committedSequence) this.committedSequence = sequences[i]!;
      }
      if (outcomeQueues.size > 0) for (const listener of this.outcomeListeners) listener(outcomeQueues);
    });
    this.tail = done.catch(() => undefined);
    return done;
  }

  whenDurable(): Promise<void> {
    return this.tail;
  }

  private queue(queueId: string): QueueRecords {
    let records = this.queues.get(queueId);
    if (!records)
      this.queues.set(queueId, (records = { tickets: new TicketRecords(queueId), backfills: new Map(), outcomes: new SequenceIndex() }));
    return records;
  }

  private apply(change: StoreChange, sequence: bigint, outcomeQueues: Set<string>): void {
    switch (change.type) {
      // A put record is kept as it is (a restore puts a million: a copy each was most of its time here), so
      // a change makes a new record rather than change one a caller may still hold.
      case 'ticket.put':
        this.queue(change.ticket.queueId).tickets.set(change.ticket);
        return;
      case 'tickets.put':
        this.queue(change.queueId).tickets.putRun(change.run);
        return;
      case 'ticket.resolve': {
        const tickets = this.queue(change.ref.queueId).tickets;
        const ticket = tickets.get(change.ref.position);
        if (ticket) tickets.set(ticketRecord(ticket, 'resolved', change.matchId, change.resolvedAtMs));
        return;
      }
      case 'ticket.reactivate': {
        const tickets = this.queue(change.ref.queueId).tickets;
        const ticket = tickets.get(change.ref.position);
        if (ticket) tickets.set(ticketRecord(ticket, 'active'));
        return;
      }
      case 'ticket.delete':
        this.queue(change.ref.queueId).tickets.delete(change.ref.position);
        return;
      case 'backfill.put':
        this.queue(change.backfill.queueId).backfills.set(change.backfill.backfillId, change.backfill);
        return;
      case 'backfill.delete':
        this.queue(change.queueId).backfills.delete(change.backfillId);
        return;
      case 'outcome.record': {
        const { queueId } = change.outcome;
        this.outcomes.set(sequence, change.outcome);
        this.outcomeOrder.push(sequence);
        this.queue(queueId).outcomes.push(sequence);
        outcomeQueues.add(queueId);
        return;
      }
      case 'outcome.delete': {
        this.queue(change.queueId).outcomes.delete(change.sequence);
        if (this.outcomes.delete(change.sequence)) this.outcomeOrder.delete(change.sequence);
        return;
      }
      case 'delivery.advance': {
        const record = this.cursors.get(change.queueId);
        this.cursors.set(change.queueId, { ...record, cursor: change.sequence });
        return;
      }
      case 'delivery.park': {
        const cursor = this.cursors.get(change.queueId)?.cursor ?? 0n;
        this.cursors.set(change.queueId, change.parked ? { cursor, parked: { ...change.parked } } : { cursor });
        return;
      }
      case 'consumer.advance':
        this.consumers.set(change.consumer, change.sequence);
        if (change.owner !== undefined && !this.consumerOwners.has(change.consumer)) this.consumerOwners.set(change.consumer, change.owner);
        return;
    }
  }

  /** The recorded bytes of outcome `sequence`, made on the first read. */
  private recorded(sequence: bigint): Uint8Array | undefined {
    const held = this.outcomes.get(sequence);
    if (held === undefined || held instanceof Uint8Array) return held;
    const bytes = withProducer(held.bytes, this.producerId, sequence);
    this.outcomes.set(sequence, bytes);
    return bytes;
  }

  loadQueue(queueId: string): QueueSnapshot {
    const records = this.queues.get(queueId);
    if (!records) return { tickets: [], backfills: [] };
    const tickets: StoredTicketState[] = [...records.tickets.values()]
      .sort((a, b) => a.position - b.position)
      .map(({ ticket: _bytes, ...state }) => state);
    return { tickets, backfills: [...records.backfills.values()] };
  }

  /** The record as held: apply replaces records, never alters one (a copy was a microsecond a read). */
  readTicket(ref: TicketRef): Readonly<StoredTicket> | undefined {
    return this.queues.get(ref.queueId)?.tickets.get(ref.position);
  }

  lendTicketBytes(ref: TicketRef): Uint8Array | undefined {
    return this.queues.get(ref.queueId)?.tickets.ticketBytes(ref.position);
  }

  storedQueueIds(): string[] {
    return [...this.queues]
      .filter(([, r]) => r.tickets.size > 0 || r.backfills.size > 0)
      .map(([id]) => id)
      .sort();
  }

  listOutcomes(query: OutcomeQuery): Outcome[] {
    const after = query.afterSequence ?? 0n;
    const limit = query.limit ?? 1000;
    const out: Outcome[] = [];
    for (const sequence of this.outcomeOrder.after(after)) {
      const outcome = fromBinary(OutcomeSchema, this.recorded(sequence)!);
      if (query.queueFilter && !query.queueFilter(outcome.queueId)) continue;
      out.push(outcome);
      if (out.length >= limit) break;
    }
    return out;
  }

  queueOutcomes(queueId: string, afterSequence: bigint, limit: number): Outcome[] {
    const out: Outcome[] = [];
    const sequences = this.queues.get(queueId)?.outcomes;
    if (!sequences || limit <= 0) return out;
    for (const s of sequences.after(afterSequence)) {
      // Deleted under another queue's id (as lmdb does, the delete names the outcome by sequence).
      const bytes = this.recorded(s);
      if (!bytes) continue;
      out.push(fromBinary(OutcomeSchema, bytes));
      if (out.length >= limit) break;
    }
    return out;
  }

  outboxSnapshot(queueId: string): OutboxSnapshot {
    const deliveryCursor = this.deliveryCursor(queueId);
    const outcomes: OutboxSnapshot['outcomes'] = [];
    for (const sequence of this.queues.get(queueId)?.outcomes.after(deliveryCursor) ?? []) {
      const bytes = this.recorded(sequence);
      if (bytes) outcomes.push({ sequence, bytes });
    }
    return {
      nextSequence: this.nextSequence,
      deliveryCursor,
      parked: this.parkedDelivery(queueId),
      // A replica's local store holds one queue: its named consumers are that queue's.
      consumers: Array.from(this.consumers, ([consumer, sequence]) => {
        const owner = this.consumerOwners.get(consumer);
        return owner === undefined ? { consumer, sequence } : { consumer, sequence, owner };
      }),
      outcomes,
    };
  }

  restoreOutbox(queueId: string, outbox: OutboxSnapshot): void {
    // Numbering continues from the outbox's: a store that already numbered outcomes cannot take it over.
    if (this.nextSequence !== 1n) throw new Error(`the store has recorded outcomes already; cannot restore the outbox of ${queueId}`);
    const records = this.queue(queueId);
    for (const { sequence, bytes } of outbox.outcomes) {
      this.outcomes.set(sequence, bytes);
      this.outcomeOrder.push(sequence);
      records.outcomes.push(sequence);
    }
    this.nextSequence = outbox.nextSequence;
    this.committedSequence = outbox.nextSequence - 1n;
    this.cursors.set(
      queueId,
      outbox.parked ? { cursor: outbox.deliveryCursor, parked: { ...outbox.parked } } : { cursor: outbox.deliveryCursor },
    );
    for (const { consumer, sequence, owner } of outbox.consumers) {
      this.consumers.set(consumer, sequence);
      if (owner !== undefined) this.consumerOwners.set(consumer, owner);
    }
  }

  deliveryCursor(queueId: string): bigint {
    return this.cursors.get(queueId)?.cursor ?? 0n;
  }

  parkedDelivery(queueId: string): ParkedDelivery | undefined {
    const parked = this.cursors.get(queueId)?.parked;
    return parked && { ...parked };
  }

  consumerPosition(consumer: string): bigint | undefined {
    return this.consumers.get(consumer);
  }

  consumerOwner(consumer: string): string | undefined {
    return this.consumerOwners.get(consumer);
  }

  lastSequence(): bigint {
    return this.committedSequence;
  }

  queueLastSequence(queueId: string): bigint {
    const held = this.queues.get(queueId)?.outcomes.last() ?? 0n;
    const cursor = this.deliveryCursor(queueId);
    return held > cursor ? held : cursor;
  }

  onOutcomesCommitted(listener: (queueIds: ReadonlySet<string>) => void): void {
    this.outcomeListeners.push(listener);
  }

  async close(): Promise<void> {
    await this.tail;
  }
}

/**
 * A ticket's record in `state` (a resolved one with its match), as a new literal: spreading a record into
 * a new one cost a microsecond or two each (QueueState.create says the same of the queue's side).
 */
function ticketRecord(
  { queueId, ticketId, position, ticket }: StoredTicket,
  state: StoredTicket['state'],
  matchId?: string,
  resolvedAtMs?: number,
): StoredTicket {
  return state === 'resolved'
    ? { queueId, ticketId, position, ticket, state, matchId, resolvedAtMs }
    : { queueId, ticketId, position, ticket, state };
}
