// The Store contract (src/store/store.ts), run against every backend: the embedded lmdb store and the
// in-memory store must behave alike, so what the runtime tests prove on one holds on the other.
import { create, toBinary } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { RemovalReason } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { encodeOutcome } from '../../src/outcomes/outcome-encoding.js';
import { stampOf, ticketsRemoved } from '../../src/outcomes/outcome-factory.js';
import { LmdbStore } from '../../src/store/lmdb-store.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { ticketRunOf } from '../../src/queue/queue-snapshot.js';
import type { Store, StoreChange, TicketRef } from '../../src/store/store.js';
import { uuid } from '../support/fixtures.js';
import { removeDirs, tempDir } from '../support/service.js';

interface Backend {
  name: string;
  open(): Store;
}

const dirs: string[] = [];
const opened: Store[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
  removeDirs(...dirs.splice(0));
});

const backends: Backend[] = [
  {
    name: 'lmdb',
    open: () => {
      const dir = tempDir('store. contract');
      dirs.push(dir);
      return new LmdbStore({ path: dir, onFatal: () => undefined });
    },
  },
  { name: 'memory', open: () => new MemoryStore() },
];

const ticketBytes = (id: string) => toBinary(TicketSchema, create(TicketSchema, { id, queueId: 'q' }));
const put = (ref: TicketRef): StoreChange => ({
  type: 'ticket.put',
  ticket: { ...ref, ticket: ticketBytes(ref.ticketId), state: 'active' },
});
const removal = (queueId: string, ids: string[]): StoreChange => ({
  type: 'outcome.record',
  outcome: encodeOutcome(ticketsRemoved(queueId, ids, RemovalReason.CLEAR_COMMAND, 100, stampOf(uuid(), Date.now()))[0]!),
});

describe.each(backends)('Store contract: $name', (backend) => {
  const open = () => {
    const store = backend.open();
    opened.push(store);
    return store;
  };

  it('keeps a queue’s tickets in position order, with their state through resolve, reactivate and delete', async () => {
    const store = open();
    const refs = [3, 1, 2].map((position) => ({ queueId: 'q', ticketId: uuid(), position }));
    const puts = refs.map(put);
    const asPut = structuredClone(puts);
    await store.commit(puts);
    expect([...store.loadQueue('q').tickets].map((t) => t.position)).toEqual([1, 2, 3]);

    await store.commit([{ type: 'ticket.resolve', ref: refs[0]!, matchId: 'm-1', resolvedAtMs: 1234 }]);
    expect(store.readTicket(refs[0]!)).toMatchObject({
      ticketId: refs[0]!.ticketId,
      state: 'resolved',
      matchId: 'm-1',
      resolvedAtMs: 1234,
    });
    expect([...store.readTicket(refs[0]!)!.ticket]).toEqual([...ticketBytes(refs[0]!.ticketId)]);

    await store.commit([{ type: 'ticket.reactivate', ref: refs[0]! }]);
    expect(store.readTicket(refs[0]!)).toMatchObject({ state: 'active' });
    expect(store.readTicket(refs[0]!)!.matchId).toBeUndefined();

    await store.commit([{ type: 'ticket.delete', ref: refs[1]! }]);
    expect(store.readTicket(refs[1]!)).toBeUndefined();
    // The store may keep the records it was given, but changes none of them.
    expect(puts).toEqual(asPut);
    expect([...store.loadQueue('q').tickets].map((t) => t.ticketId)).toEqual([refs[2]!.ticketId, refs[0]!.ticketId]);
    expect(store.loadQueue('other').backfills).toEqual([]);
  });

  it('takes a run of active tickets at once, and changes each of them as if it had been put alone', async () => {
    const store = open();
    const listed = [2, 5, 9, 14].map((position) => ({ ticketId: uuid(), position, ticket: ticketBytes(`${position}`) }));
    const run = ticketRunOf(listed);
    const [a, b, c, d] = listed.map(({ ticketId, position }) => ({ queueId: 'q', ticketId, position }));
    await store.commit([{ type: 'tickets.put', queueId: 'q', run }, put({ queueId: 'q', ticketId: uuid(), position: 20 })]);
    expect(store.storedQueueIds()).toEqual(['q']);
    expect([...store.loadQueue('q').tickets].map((t) => [t.position, t.state])).toEqual([
      [2, 'active'],
      [5, 'active'],
      [9, 'active'],
      [14, 'active'],
      [20, 'active'],
    ]);
    expect(store.readTicket(b!)).toMatchObject({ queueId: 'q', ticketId: b!.ticketId, position: 5, state: 'active' });
    expect([...store.readTicket(b!)!.ticket]).toEqual([...listed[1]!.ticket]);
    expect(store.readTicket({ queueId: 'q', ticketId: 'none', position: 3 })).toBeUndefined();

    await store.commit([
      { type: 'ticket.resolve', ref: a!, matchId: 'm-1', resolvedAtMs: 7 },
      { type: 'ticket.delete', ref: c! },
      { type: 'ticket.resolve', ref: d!, matchId: 'm-2', resolvedAtMs: 8 },
    ]);
    await store.commit([{ type: 'ticket.reactivate', ref: d! }]);
    expect(store.readTicket(a!)).toMatchObject({ state: 'resolved', matchId: 'm-1', resolvedAtMs: 7 });
    expect([...store.readTicket(a!)!.ticket]).toEqual([...listed[0]!.ticket]);
    expect(store.readTicket(c!)).toBeUndefined();
    expect(store.readTicket(d!)).toMatchObject({ state: 'active' });
    expect([...store.loadQueue('q').tickets].map((t) => [t.position, t.state])).toEqual([
      [2, 'resolved'],
      [5, 'active'],
      [14, 'active'],
      [20, 'active'],
    ]);
    for (const ref of [a!, b!, d!]) await store.commit([{ type: 'ticket.delete', ref }]);
    await store.commit([{ type: 'ticket.delete', ref: { queueId: 'q', ticketId: '', position: 20 } }]);
    expect([...store.loadQueue('q').tickets]).toEqual([]);
    expect(store.storedQueueIds()).toEqual([]);
  });

  it('lends a ticket’s bytes as readTicket answers them, each its own length, a short one after a long one', async () => {
    const store = open();
    const long = { queueId: 'q', ticketId: uuid(), position: 1 };
    const short = { queueId: 'q', ticketId: uuid(), position: 2 };
    const longBytes = toBinary(
      TicketSchema,
      create(TicketSchema, { id: long.ticketId, queueId: 'q', metadata: new Uint8Array(3000).fill(7) }),
    );
    await store.commit([
      { type: 'ticket.put', ticket: { ...long, ticket: longBytes, state: 'active' } },
      put(short),
      { type: 'ticket.resolve', ref: short, matchId: 'm-1', resolvedAtMs: 5 },
    ]);
    expect([...store.lendTicketBytes(long)!]).toEqual([...longBytes]);
    // Read at once: the next read may reuse what the last one lent.
    expect([...store.lendTicketBytes(short)!]).toEqual([...ticketBytes(short.ticketId)]);
    expect([...store.lendTicketBytes(long)!]).toEqual([...store.readTicket(long)!.ticket]);
    expect(store.lendTicketBytes({ queueId: 'q', ticketId: uuid(), position: 3 })).toBeUndefined();
  });

  it('shows a commit only once it has settled, and applies commits in call order', async () => {
    const store = open();
    const ref = { queueId: 'q', ticketId: uuid(), position: 1 };
    const first = store.commit([put(ref)]);
    const second = store.commit([{ type: 'ticket.delete', ref }]);
    expect(store.readTicket(ref)).toBeUndefined();
    await first;
    await second;
    expect(store.readTicket(ref)).toBeUndefined();
    const again = store.commit([put({ ...ref, position: 2 })]);
    await store.whenDurable();
    expect(store.readTicket({ ...ref, position: 2 })).toBeDefined();
    await again;
  });

  it('stores backfill requests per queue and names the queues that hold anything', async () => {
    const store = open();
    const backfill = { queueId: 'b.q', backfillId: uuid(), request: new Uint8Array([1, 2, 3]) };
    await store.commit([{ type: 'backfill.put', backfill }, put({ queueId: 'a.q', ticketId: uuid(), position: 1 })]);
    expect(store.loadQueue('b.q').backfills.map((b) => ({ ...b, request: [...b.request] }))).toEqual([{ ...backfill, request: [1, 2, 3] }]);
    expect(store.storedQueueIds()).toEqual(['a.q', 'b.q']);
    await store.commit([{ type: 'backfill.delete', queueId: 'b.q', backfillId: backfill.backfillId }]);
    expect(store.loadQueue('b.q').backfills).toEqual([]);
    expect(store.storedQueueIds()).toEqual(['a.q']);
  });

  it('numbers outcomes gap-free in commit order, stamps the producer, and tells listeners after the commit', async () => {
    const store = open();
    const heard: string[][] = [];
    store.onOutcomesCommitted((queueIds) => heard.push([...queueIds].sort()));
    const pending = store.commit([removal('a', ['x']), removal('b', ['y']), removal('a', ['z'])]);
    expect(store.lastSequence()).toBe(0n);
    await pending;
    expect(store.lastSequence()).toBe(3n);
    expect(heard).toEqual([['a', 'b']]);

    const all = store.listOutcomes({});
    expect(all.map((o) => [o.producerSequence, o.queueId, o.producerId])).toEqual([
      [1n, 'a', store.producerId],
      [2n, 'b', store.producerId],
      [3n, 'a', store.producerId],
    ]);
    expect(store.listOutcomes({ afterSequence: 1n, queueFilter: (q) => q === 'a' }).map((o) => o.producerSequence)).toEqual([3n]);
    expect(store.listOutcomes({ limit: 2 })).toHaveLength(2);
    expect(store.queueOutcomes('a', 0n, 10).map((o) => o.producerSequence)).toEqual([1n, 3n]);
    expect(store.queueOutcomes('a', 1n, 10).map((o) => o.producerSequence)).toEqual([3n]);
    expect(store.queueOutcomes('a', 0n, 1).map((o) => o.producerSequence)).toEqual([1n]);

    await store.commit([{ type: 'outcome.delete', queueId: 'a', sequence: 1n }]);
    expect(store.queueOutcomes('a', 0n, 10).map((o) => o.producerSequence)).toEqual([3n]);
    expect(store.listOutcomes({}).map((o) => o.producerSequence)).toEqual([2n, 3n]);
    // Retention does not reuse sequences.
    await store.commit([removal('a', ['w'])]);
    expect(store.lastSequence()).toBe(4n);
  });

  it('tells each queue its own last recorded sequence, the delivery cursor once retention removed the rest', async () => {
    const store = open();
    expect(store.queueLastSequence('a')).toBe(0n);
    await store.commit([removal('a', ['x']), removal('b', ['y']), removal('a', ['z']), removal('b', ['w'])]);
    expect([store.queueLastSequence('a'), store.queueLastSequence('b'), store.queueLastSequence('c')]).toEqual([3n, 4n, 0n]);
    // Delivered through 3 and then removed by retention: a's last recorded is still 3.
    await store.commit([{ type: 'delivery.advance', queueId: 'a', sequence: 3n }]);
    await store.commit([
      { type: 'outcome.delete', queueId: 'a', sequence: 1n },
      { type: 'outcome.delete', queueId: 'a', sequence: 3n },
    ]);
    expect(store.queueLastSequence('a')).toBe(3n);
    await store.commit([removal('a', ['v'])]);
    expect(store.queueLastSequence('a')).toBe(5n);
  });

  it('keeps delivery cursors, parked deliveries and consumer positions', async () => {
    const store = open();
    expect(store.deliveryCursor('q')).toBe(0n);
    expect(store.consumerPosition('c')).toBeUndefined();
    const parked = { sequence: 5n, attempts: 3, lastError: 'HTTP 500', parkedAtMs: 99 };
    await store.commit([{ type: 'delivery.advance', queueId: 'q', sequence: 4n }]);
    await store.commit([{ type: 'delivery.park', queueId: 'q', parked }]);
    expect(store.deliveryCursor('q')).toBe(4n);
    expect(store.parkedDelivery('q')).toEqual(parked);
    await store.commit([{ type: 'delivery.advance', queueId: 'q', sequence: 5n }]);
    expect(store.parkedDelivery('q')).toEqual(parked);
    await store.commit([{ type: 'delivery.park', queueId: 'q', parked: undefined }]);
    expect(store.parkedDelivery('q')).toBeUndefined();
    expect(store.deliveryCursor('q')).toBe(5n);
    await store.commit([{ type: 'consumer.advance', consumer: 'c', sequence: 7n }]);
    expect(store.consumerPosition('c')).toBe(7n);
    expect(store.consumerOwner('c')).toBeUndefined();
  });

  it('keeps the first owner of a named consumer', async () => {
    const store = open();
    await store.commit([{ type: 'consumer.advance', consumer: 'c', sequence: 1n, owner: 'backend' }]);
    await store.commit([{ type: 'consumer.advance', consumer: 'c', sequence: 2n }]);
    await store.commit([{ type: 'consumer.advance', consumer: 'c', sequence: 3n, owner: 'stranger' }]);
    expect(store.consumerPosition('c')).toBe(3n);
    expect(store.consumerOwner('c')).toBe('backend');
    expect(store.consumerOwner('other')).toBeUndefined();
  });
});

describe('Store contract: lmdb across a reopen', () => {
  it('keeps tickets, outcomes, their numbering and the producer id', async () => {
    const dir = tempDir('store-reopen');
    dirs.push(dir);
    const first = new LmdbStore({ path: dir, onFatal: () => undefined });
    const ref = { queueId: 'q', ticketId: uuid(), position: 1 };
    await first.commit([put(ref), removal('q', [ref.ticketId])]);
    const producerId = first.producerId;
    await first.close();
    const second = new LmdbStore({ path: dir, onFatal: () => undefined });
    opened.push(second);
    expect(second.producerId).toBe(producerId);
    expect(second.readTicket(ref)?.ticketId).toBe(ref.ticketId);
    expect(second.lastSequence()).toBe(1n);
    await second.commit([removal('q', ['y'])]);
    expect(second.lastSequence()).toBe(2n);
  });
});
