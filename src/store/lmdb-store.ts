// The embedded store: one lmdb environment in the data directory. lmdb-js batches every write issued in
// one event turn into a single transaction and resolves it after the disk flush, which is the group
// commit CreateTicket relies on: durability costs one flush per batch, not per ticket.
import { randomUUID } from 'node:crypto';
import { statfsSync } from 'node:fs';
import { fromBinary } from '@bufbuild/protobuf';
import { open, type Database, type RootDatabase } from 'lmdb';
import { OutcomeSchema, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { DataDirLock } from './data-dir-lock.js';
import { codeOf, DataDirError, describeError, usableDirectory } from './data-dir.js';
import { withProducer } from './outcome-record.js';
import type { OutcomeQuery, ParkedDelivery, QueueSnapshot, Store, StoreChange, StoredBackfill, StoredTicket, TicketRef } from './store.js';
import { decodeResolution, decodeTicketRecord, encodeResolution, encodeTicketRecord, ticketOfRecord } from './ticket-record.js';

/** Free space (for unprivileged users) the start-up probe asks for before the service reports ready. */
export const MIN_FREE_BYTES = 4 * 1024 * 1024;

const sleep = (ms: number) => new Promise<undefined>((resolve) => setTimeout(resolve, ms));

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
  /** This process's hold on the data directory, for the store's life. */
  private readonly lock: DataDirLock;
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
  /** Named stream consumer -> the bearer token name that owns it (written once). */
  private readonly consumerOwners: Database<string, string>;
  private nextSequence: bigint;
  /** The highest sequence whose commit has completed (nextSequence runs ahead while a commit is in flight). */
  private committedSequence: bigint;
  private readonly outcomeListeners: ((queueIds: ReadonlySet<string>) => void)[] = [];

  constructor(private readonly options: LmdbStoreOptions) {
    const { path } = options;
    usableDirectory(path);
    // Before lmdb opens anything: a second process must not touch the environment at all.
    this.lock = DataDirLock.acquire(path);
    try {
      // overlappingSync off: a commit's promise then resolves only after fdatasync, so an acknowledged write
      // is on disk, not only in the page cache (with it on, lmdb-js resolves at commit and syncs later).
      // noSubdir off: lmdb-js otherwise takes a path with a dot in its last part (`./mm.data`) for a file name.
      this.root = open({ path, noSubdir: false, maxDbs: 10, noSync: false, overlappingSync: false });
    } catch (err) {
      this.lock.release();
      throw new DataDirError(path, `its store cannot be opened: ${describeError(err)}`, { code: codeOf(err) }, { cause: err });
    }
    try {
      this.tickets = this.root.openDB<Uint8Array, string>({ name: 'ticket_records', encoding: 'binary' });
      this.resolutions = this.root.openDB<Uint8Array, string>({ name: 'ticket_resolutions', encoding: 'binary' });
      // Builds before ticket records were keyed by position kept tickets in `tickets`: refuse to start
      // rather than serve without them.
      for (const _ of this.root.openDB<unknown, string>({ name: 'tickets' }).getKeys({ limit: 1 })) {
        throw new DataDirError(
          path,
          'it holds tickets in an earlier data layout (database "tickets") that this version does not read; drain it with the build that wrote it',
          { code: 'ELAYOUT' },
        );
      }
      this.backfills = this.root.openDB<StoredBackfill, string>({ name: 'backfills' });
      this.outcomes = this.root.openDB<Uint8Array, number>({ name: 'outcomes', encoding: 'binary' });
      this.meta = this.root.openDB<unknown, string>({ name: 'meta' });
      this.queueIndex = this.root.openDB<number, string>({ name: 'queue_outcomes' });
      this.delivery = this.root.openDB<DeliveryRecord, string>({ name: 'delivery' });
      this.consumers = this.root.openDB<string, string>({ name: 'consumers' });
      this.consumerOwners = this.root.openDB<string, string>({ name: 'consumer_owners' });

      let producerId = this.meta.get('producer_id') as string | undefined;
      if (!producerId) {
        producerId = randomUUID();
        this.meta.putSync('producer_id', producerId);
      }
      this.producerId = producerId;
    } catch (err) {
      void this.root.close().finally(() => this.lock.release());
      if (err instanceof DataDirError) throw err;
      throw new DataDirError(path, `its store cannot be opened: ${describeError(err)}`, { code: codeOf(err) }, { cause: err });
    }
    // Kept in meta with every commit that records outcomes: the outbox itself may be emptied by retention.
    // (An outbox written before that was kept: continue after its last key.)
    const kept = BigInt((this.meta.get('next_sequence') as string | undefined) ?? '1');
    let afterLast = 1n;
    for (const k of this.outcomes.getKeys({ reverse: true, limit: 1 })) afterLast = BigInt(k) + 1n;
    this.nextSequence = kept > afterLast ? kept : afterLast;
    this.committedSequence = this.nextSequence - 1n;
  }

  commit(changes: readonly StoreChange[]): Promise<void> {
    // Delivery changes keep their other fields (read, then written): a transaction callback, so the read
    // sees every earlier write.
    if (changes.some((c) => c.type === 'delivery.advance' || c.type === 'delivery.park')) {
      return this.settle(
        this.root.transaction(() => {
          for (const c of changes) this.write(c);
        }),
        undefined,
        0n,
      );
    }
    // Everything else is written now, as plain writes: lmdb-js commits every write issued in one event turn
    // in one transaction (its eventTurnBatching), so the list stays atomic, and its cost is paid here, in
    // the caller's time slice. (A transaction callback runs later on the main thread, back to back with
    // every other queued callback: after a tick, several of 2-7 ms each held the event loop at once.)
    const writes = changes.map((c) => this.write(c));
    let outcomeQueues: Set<string> | undefined;
    for (const c of changes) if (c.type === 'outcome.record') (outcomeQueues ??= new Set()).add(c.outcome.queueId);
    // Sequences are taken in call order, and writes apply in call order: the outbox is in commit order.
    if (outcomeQueues) writes.push(this.meta.put('next_sequence', this.nextSequence.toString()));
    return this.settle(Promise.all(writes), outcomeQueues, this.nextSequence - 1n);
  }

  /** A commit's end: records how far outcomes are committed and tells the listeners; a failure is fatal. */
  private settle(done: Promise<unknown>, outcomeQueues: ReadonlySet<string> | undefined, through: bigint): Promise<void> {
    return done.then(
      () => {
        if (through > this.committedSequence) this.committedSequence = through;
        if (outcomeQueues) for (const listener of this.outcomeListeners) listener(outcomeQueues);
      },
      async (err: unknown) => {
        const cause = await commitFailureCause(err);
        this.options.onFatal(cause);
        throw cause;
      },
    );
  }

  async probeWrite(): Promise<void> {
    // A small write can succeed on a full disk (lmdb reuses pages its earlier commits freed), and the next
    // batch of tickets then fails: ask for room to grow as well.
    const { bavail, bsize } = statfsSync(this.options.path);
    if (bavail * bsize < MIN_FREE_BYTES) {
      throw Object.assign(
        new Error(`${bavail * bsize} bytes free on its file system, under the ${MIN_FREE_BYTES} the store needs to take writes`),
        { code: 'ENOSPC' },
      );
    }
    // A synchronous transaction (committed and fsynced before it returns): its failure throws here. A
    // failed asynchronous write would also reject a promise lmdb-js keeps to itself, unhandled, which ends
    // the process.
    this.meta.putSync('write_probe', Date.now());
  }

  async whenDurable(): Promise<void> {
    await this.root.flushed;
  }

  /** Issues one change's writes; resolves when they are committed (inside a transaction: at once). */
  private write(change: StoreChange): Promise<unknown> {
    switch (change.type) {
      case 'ticket.put': {
        const { ticket } = change;
        const written = this.tickets.put(ticketKey(ticket), encodeTicketRecord(ticket.ticketId, ticket.ticket));
        if (ticket.state === 'active') return written;
        return both(written, this.resolutions.put(ticketKey(ticket), encodeResolution(ticket.matchId ?? '', ticket.resolvedAtMs ?? 0)));
      }
      case 'tickets.put': {
        const { queueId, run } = change;
        const written: Promise<unknown>[] = [];
        for (let i = 0; i < run.length; i++) {
          const ticket = { queueId, ticketId: run.ticketId(i), position: run.position(i) };
          written.push(this.tickets.put(ticketKey(ticket), encodeTicketRecord(ticket.ticketId, run.ticket(i))));
        }
        return Promise.all(written);
      }
      case 'ticket.resolve':
        return this.resolutions.put(ticketKey(change.ref), encodeResolution(change.matchId, change.resolvedAtMs));
      case 'ticket.reactivate':
        return this.resolutions.remove(ticketKey(change.ref));
      case 'ticket.delete':
        return both(this.tickets.remove(ticketKey(change.ref)), this.resolutions.remove(ticketKey(change.ref)));
      case 'backfill.put':
        return this.backfills.put(key(change.backfill.queueId, change.backfill.backfillId), change.backfill);
      case 'backfill.delete':
        return this.backfills.remove(key(change.queueId, change.backfillId));
      case 'outcome.record': {
        const sequence = this.nextSequence++;
        return both(
          this.outcomes.put(Number(sequence), withProducer(change.outcome.bytes, this.producerId, sequence)),
          this.queueIndex.put(orderedKey(change.outcome.queueId, sequence), Number(sequence)),
        );
      }
      case 'outcome.delete':
        return both(this.outcomes.remove(Number(change.sequence)), this.queueIndex.remove(orderedKey(change.queueId, change.sequence)));
      case 'delivery.advance': {
        const record = this.delivery.get(change.queueId);
        return this.delivery.put(change.queueId, { ...record, cursor: change.sequence.toString() });
      }
      case 'delivery.park': {
        const cursor = this.delivery.get(change.queueId)?.cursor ?? '0';
        const parked = change.parked && { ...change.parked, sequence: change.parked.sequence.toString() };
        return this.delivery.put(change.queueId, parked ? { cursor, parked } : { cursor });
      }
      case 'consumer.advance': {
        const put = this.consumers.put(change.consumer, change.sequence.toString());
        if (change.owner === undefined || this.consumerOwners.get(change.consumer) !== undefined) return put;
        return both(put, this.consumerOwners.put(change.consumer, change.owner));
      }
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

  queueLastSequence(queueId: string): bigint {
    const { start, end } = rangeOf(queueId);
    let last = this.deliveryCursor(queueId);
    for (const { value } of this.queueIndex.getRange({ start: end, end: start, reverse: true, limit: 1 })) {
      if (BigInt(value) > last) last = BigInt(value);
    }
    return last;
  }

  parkedDelivery(queueId: string): ParkedDelivery | undefined {
    const parked = this.delivery.get(queueId)?.parked;
    return parked && { ...parked, sequence: BigInt(parked.sequence) };
  }

  consumerPosition(consumer: string): bigint | undefined {
    const position = this.consumers.get(consumer);
    return position === undefined ? undefined : BigInt(position);
  }

  consumerOwner(consumer: string): string | undefined {
    return this.consumerOwners.get(consumer);
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
      tickets: this.tickets.getRange(rangeOf(queueId)).map(({ key: k, value }) => {
        const { ticket: _bytes, ...state } = this.storedTicket(queueId, positionOf(k), value, resolutions.get(k));
        return state;
      }),
      backfills: [...this.backfills.getRange(rangeOf(queueId)).map(({ value }) => value)],
    };
  }

  readTicket(ref: TicketRef): StoredTicket | undefined {
    const record = this.tickets.get(ticketKey(ref));
    return record && this.storedTicket(ref.queueId, ref.position, record, this.resolutions.get(ticketKey(ref)));
  }

  lendTicketBytes(ref: TicketRef): Uint8Array | undefined {
    // lmdb's reusable read buffer: its `length` says the record's size, its array is the buffer's.
    const record = this.tickets.getBinaryFast(ticketKey(ref));
    return record && ticketOfRecord(record, record.length);
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
    this.lock.release();
  }
}

/**
 * Two writes of one change as one promise. A failed commit rejects every write's promise, and one that
 * nobody observes ends the process (an unhandled rejection) before the failure is reported as fatal.
 */
function both(first: Promise<unknown>, second: Promise<unknown>): Promise<unknown> {
  return Promise.all([first, second]);
}

/** Whether `err` is lmdb-js's "Commit failed" (a transaction that did not reach the disk). */
export function isCommitFailure(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { commitError?: unknown }).commitError instanceof Promise;
}

/**
 * What made a commit fail. lmdb-js rejects with "Commit failed (see commitError for details)"; the cause
 * (ENOSPC, EIO, with the page it could not write) comes in commitError, a promise it rejects right after
 * (not waited for long: a failure must not hang on it).
 */
export async function commitFailureCause(err: unknown): Promise<unknown> {
  if (!isCommitFailure(err)) return err;
  const commitError = (err as { commitError: Promise<unknown> }).commitError;
  return (await Promise.race([commitError.catch((e: unknown) => e), sleep(100)])) ?? err;
}
