// A queue's resolved tickets (src/queue/resolved-tickets.ts) live off the JS heap, in resolution order: they
// must answer as a Map in insertion order would, through the log's growth and the taking back of its front,
// since the expiry of resolved tickets and the queue's snapshots read that order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ResolvedTicket, ResolvedTickets } from '../../src/queue/resolved-tickets.js';

type Op = { kind: 'set'; key: string; record: ResolvedTicket } | { kind: 'delete'; key: string } | { kind: 'deleteOldest'; n: number };

const uuidArb = fc
  .integer({ min: 0, max: 95 })
  .map((i) => `${i.toString(16).padStart(8, '0')}-0000-4000-8000-${(i * 7919).toString(16).padStart(12, '0')}`);
const keyArb = fc.oneof({ weight: 9, arbitrary: uuidArb }, { weight: 1, arbitrary: fc.constantFrom('a', 'B', '') });
const recordArb = fc.record({
  position: fc.integer({ min: 1, max: 2 ** 40 }),
  matchId: fc.oneof(fc.uuid(), fc.constantFrom('m-1', '')),
  resolvedAtMs: fc.integer({ min: 0, max: 2 ** 42 }),
});
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('set' as const), key: keyArb, record: recordArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: keyArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('deleteOldest' as const), n: fc.integer({ min: 1, max: 20 }) }) },
);

describe('the resolved tickets of a queue', () => {
  it('answers as a Map in insertion order, through growth and the front taken back', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 400 }), (ops) => {
        const resolved = new ResolvedTickets();
        const model = new Map<string, ResolvedTicket>();
        for (const op of ops) {
          if (op.kind === 'set') {
            resolved.set(op.key, op.record);
            model.set(op.key, { ...op.record });
          } else if (op.kind === 'delete') {
            expect(resolved.delete(op.key)).toBe(model.delete(op.key));
          } else {
            // As expiry does: the oldest first, read by a scan that stops.
            const oldest: string[] = [];
            resolved.scan((_, ticketId) => {
              oldest.push(ticketId);
              return oldest.length < op.n;
            });
            expect(oldest).toEqual([...model.keys()].slice(0, op.n));
            for (const key of oldest) {
              resolved.delete(key);
              model.delete(key);
            }
          }
          expect(resolved.size).toBe(model.size);
        }
        for (const [key, record] of model) {
          expect(resolved.has(key)).toBe(true);
          expect(resolved.get(key)).toEqual(record);
        }
        expect([...resolved]).toEqual([...model]);
      }),
      { numRuns: 300 },
    );
  });

  it('puts new records in the room the oldest left, moving none', () => {
    const resolved = new ResolvedTickets();
    const id = (i: number) => (i % 3 === 0 ? `ticket-${i}` : `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`);
    const record = (i: number) => ({ position: i + 1, matchId: i % 2 === 0 ? `match-${i}` : crypto.randomUUID(), resolvedAtMs: i });
    const model = new Map<string, ResolvedTicket>();
    for (let i = 0; i < 16; i++) model.set(id(i), record(i));
    for (const [key, value] of model) resolved.set(key, value);
    for (let i = 0; i < 10; i++) {
      resolved.delete(id(i));
      model.delete(id(i));
    }
    for (let i = 16; i < 26; i++) {
      const r = record(i);
      model.set(id(i), r);
      resolved.set(id(i), r);
    }
    expect(resolved.logLength()).toBe(16); // the first ten's room taken back, not grown
    expect([...resolved]).toEqual([...model]);
  });

  it('grows a log that wrapped past its last slot with every record in order, wherever its front was', () => {
    const id = (i: number) => (i % 4 === 0 ? `ticket-${i}` : `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`);
    const record = (i: number) => ({ position: i + 1, matchId: i % 3 === 0 ? `match-${i}` : crypto.randomUUID(), resolvedAtMs: i });
    for (let front = 1; front < 16; front++) {
      const resolved = new ResolvedTickets();
      const model = new Map<string, ResolvedTicket>();
      const add = (i: number) => {
        const r = record(i);
        model.set(id(i), r);
        resolved.set(id(i), { ...r });
      };
      for (let i = 0; i < 16; i++) add(i);
      for (let i = 0; i < front; i++) {
        resolved.delete(id(i));
        model.delete(id(i));
      }
      // `front` new records fill the slots the oldest left; one more grows the log.
      for (let i = 16; i < 17 + front; i++) add(i);
      expect(resolved.logLength()).toBe(32);
      expect([...resolved]).toEqual([...model]);
      for (let i = 17 + front; i < 60; i++) add(i);
      expect([...resolved], `front at ${front}`).toEqual([...model]);
    }
  });

  it('keeps its log within twice the records it holds while they come and go in order', () => {
    const resolved = new ResolvedTickets();
    const id = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
    for (let i = 0; i < 100_000; i++) {
      resolved.set(id(i), { position: i + 1, matchId: crypto.randomUUID(), resolvedAtMs: i });
      if (i >= 1000) resolved.delete(id(i - 1000));
    }
    expect(resolved.size).toBe(1000);
    expect(resolved.logLength()).toBeLessThanOrEqual(2048);
    expect(resolved.get(id(99_999))?.position).toBe(100_000);
  });

  it('past 65,536 records grows its log in place, every record still there in order', () => {
    const resolved = new ResolvedTickets();
    const id = (i: number) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
    const matchId = (i: number) => `00000000-0000-4000-9000-${(i >> 2).toString(16).padStart(12, '0')}`;
    const columnsOf = () => (resolved as unknown as { positions: Float64Array }).positions;
    let grownInPlace = 0;
    for (let i = 0; i < 300_000; i++) {
      const [length, positions] = [resolved.logLength(), columnsOf()];
      resolved.set(id(i), { position: i + 1, matchId: matchId(i), resolvedAtMs: 1000 + i });
      // A growth from 131,072 records on keeps the log's columns.
      if (resolved.logLength() > length && length >= 131_072) grownInPlace += columnsOf() === positions ? 1 : 0;
      // Now and then one from the middle leaves.
      if (i % 5 === 4) resolved.delete(id(i - 2));
    }
    expect(resolved.logLength()).toBe(524_288);
    expect(grownInPlace).toBe(2);
    const seen: number[] = [];
    resolved.forEach((record, ticketId) => {
      const i = record.position - 1;
      expect([ticketId, record.matchId, record.resolvedAtMs]).toEqual([id(i), matchId(i), 1000 + i]);
      seen.push(i);
    });
    expect(seen).toEqual(Array.from({ length: 300_000 }, (_, i) => i).filter((i) => i % 5 !== 2));
  });
});
