// The rows a tick's expiry finds (TicketPool.arrivedBefore): those whose tickets arrived before a cutoff,
// exactly the rows a scan of the arrival column finds, although the pool reads the column only when its
// oldest arrival (as last read, or inserted since) is before the cutoff. Random inserts, removals and
// cutoffs, against a plain scan; in process.
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { TicketPool } from '../../src/engine/ticket-pool.js';

const op = fc.oneof(
  fc.record({ kind: fc.constant('insert' as const), arrivalMs: fc.integer({ min: 0, max: 1000 }) }),
  fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('expire' as const), cutoffMs: fc.integer({ min: 0, max: 1100 }), leave: fc.boolean() }),
);

it('finds the rows that arrived before the cutoff, as a scan of the arrival column does', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
      const pool = new TicketPool({ filters: [], rulesetIds: ['r'], defaultLatencyMs: 150 });
      let next = 0;
      for (const o of ops) {
        if (o.kind === 'insert') {
          const id = `t${next++}`;
          pool.insert(id, pool.prepare({ playerIds: [id], mmrMean: 0, latencies: new Map(), attributes: new Map() }, [], o.arrivalMs));
        } else if (o.kind === 'remove') {
          if (pool.count > 0) pool.remove(pool.idAt(o.pick % pool.count));
        } else {
          const scanned = Array.from({ length: pool.count }, (_, r) => r).filter((r) => pool.arrivalMs[r]! < o.cutoffMs);
          const found = pool.arrivedBefore(o.cutoffMs);
          expect(found).toEqual(scanned);
          // The expired tickets leave, or (their record failed) stay and are found again.
          if (o.leave) for (const id of found.map((r) => pool.idAt(r))) pool.remove(id);
        }
      }
    }),
    { numRuns: 300 },
  );
});
