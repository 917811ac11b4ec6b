// The memory store's ticket records (src/store/ticket-records.ts): runs put at once (a restore) and records
// put one at a time behave together exactly as one map of records would, whatever is changed after.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ticketRunOf } from '../../src/queue/queue-snapshot.js';
import type { StoredTicket } from '../../src/store/store.js';
import { TicketRecords } from '../../src/store/ticket-records.js';

const QUEUE = 'q';
const record = (position: number, state: StoredTicket['state'] = 'active'): StoredTicket => ({
  queueId: QUEUE,
  ticketId: `t${position}`,
  position,
  ticket: new Uint8Array([position & 255]),
  state,
});

type Op =
  | { kind: 'set'; position: number; resolved: boolean }
  | { kind: 'delete'; position: number }
  | { kind: 'run'; positions: number[] };

const position = fc.integer({ min: 1, max: 60 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), position, resolved: fc.boolean() }),
  fc.record({ kind: fc.constant('delete' as const), position }),
  fc.record({ kind: fc.constant('run' as const), positions: fc.uniqueArray(position, { maxLength: 20 }) }),
);

describe('TicketRecords', () => {
  it('answers as one map of records would, through runs, puts and deletes', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 60 }), (ops) => {
        const records = new TicketRecords(QUEUE);
        const model = new Map<number, StoredTicket>();
        for (const op of ops) {
          if (op.kind === 'set') {
            const r = record(op.position, op.resolved ? 'resolved' : 'active');
            records.set(r);
            model.set(op.position, r);
          } else if (op.kind === 'delete') {
            records.delete(op.position);
            model.delete(op.position);
          } else {
            // A run holds only tickets the store does not hold yet (a restore into an empty queue).
            const fresh = op.positions.filter((p) => !model.has(p)).sort((a, b) => a - b);
            records.putRun(ticketRunOf(fresh.map((p) => ({ ticketId: `t${p}`, position: p, ticket: new Uint8Array([p & 255]) }))));
            for (const p of fresh) model.set(p, record(p));
          }
          expect(records.size).toBe(model.size);
        }
        for (let p = 0; p <= 61; p++) {
          expect(records.get(p)).toEqual(model.get(p));
          expect(records.ticketBytes(p)).toEqual(model.get(p)?.ticket);
        }
        const listed = [...records.values()].sort((a, b) => a.position - b.position);
        expect(listed).toEqual([...model.values()].sort((a, b) => a.position - b.position));
      }),
      { numRuns: 500 },
    );
  });
});
