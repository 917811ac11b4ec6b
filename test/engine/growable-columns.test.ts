// Columns that grow in place (src/engine/growable-column.ts): a pool whose layout reserves rows (the service
// reserves a queue's max_pool_tickets) grows its columns within the reservation without replacing them, and
// past it by a copy; either way it holds and ticks exactly what a pool of plain columns holds and ticks. The
// native engine reads the columns over resizable buffers. In process: TicketPool and TickRunner.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { queueConfigSchema } from '../../src/config/queue-config.js';
import { growableColumn, grownColumn } from '../../src/engine/growable-column.js';
import { TicketPool } from '../../src/engine/ticket-pool.js';
import { allMatches, engineParams, TickRunner } from '../../src/engine/tick-runner.js';
import { poolTicketInput } from '../support/pool-tickets.js';

const NOW = 1_700_000_000_000;
const config = queueConfigSchema.parse({
  engine: { attribute_filters: [{ name: 'map', mode: 'overlap' }] },
  rulesets: [{ id: 'duos', teams: 2, team_size: 2, max_skill_spread: 0.2, max_latency_ms: 90 }],
});

describe('a growable column', () => {
  it('grows in place within its reservation, keeping what it holds', () => {
    const column = growableColumn(Float64Array, 4, 64);
    column.set([1, 2, 3, 4]);
    const grown = grownColumn(column, Float64Array, 40);
    expect(grown).toBe(column);
    expect(grown.length).toBe(40);
    expect(Array.from(grown.subarray(0, 6))).toEqual([1, 2, 3, 4, 0, 0]);
  });

  it('is copied past its reservation into one that reserves twice as much, and without one is a plain array', () => {
    const column = growableColumn(Uint16Array, 2, 8);
    column.set([7, 9]);
    const copied = grownColumn(column, Uint16Array, 10);
    expect(copied).not.toBe(column);
    expect(Array.from(copied.subarray(0, 3))).toEqual([7, 9, 0]);
    expect((copied.buffer as ArrayBuffer).maxByteLength).toBe(2 * 10 * Uint16Array.BYTES_PER_ELEMENT);
    expect(grownColumn(copied, Uint16Array, 20)).toBe(copied);

    const plain = growableColumn(BigUint64Array, 3, 0);
    expect((plain.buffer as ArrayBuffer).resizable).toBe(false);
    plain[2] = 5n;
    const next = grownColumn(plain, BigUint64Array, 6);
    expect((next.buffer as ArrayBuffer).resizable).toBe(false);
    expect(Array.from(next)).toEqual([0n, 0n, 5n, 0n, 0n, 0n]);
  });
});

const spec = fc.record({
  players: fc.constant(1),
  mmr: fc.double({ min: 0, max: 1, noNaN: true }),
  // Now and then one of many maps: the filter widens past 64 values (its columns laid out anew).
  maps: fc.array(
    fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 90 }) }),
    {
      maxLength: 2,
    },
  ),
  hosts: fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 10, max: 200 })), { maxLength: 3 }),
  waitMs: fc.integer({ min: 0, max: 20_000 }),
});

it('a pool with reserved rows holds and ticks what a pool of plain columns does, through growth in place and past the reservation', async () => {
  await fc.assert(
    // A few hundred specs, used in turn for 2,500 to 3,000 tickets: the pool grows from 1,024 rows twice.
    fc.asyncProperty(
      fc.array(spec, { minLength: 100, maxLength: 300 }),
      fc.integer({ min: 2500, max: 3000 }),
      fc.integer({ min: 1100, max: 2600 }),
      async (specs, tickets, reservedRows) => {
        const layout = { filters: config.engine.attribute_filters, rulesetIds: ['duos'], defaultLatencyMs: 150 };
        const plain = new TicketPool(layout);
        const reserved = new TicketPool({ ...layout, reservedRows });
        const arrival = reserved.arrivalMs;
        let inPlace = true;
        for (let k = 0; k < tickets; k++) {
          const t = specs[k % specs.length]!;
          for (const pool of [plain, reserved]) pool.insert(`t${k}`, pool.prepare(poolTicketInput(`t${k}`, t), [], NOW - t.waitMs));
          // Within the reservation the columns are the arrays they were.
          if (reserved.count <= reservedRows) inPlace &&= reserved.arrivalMs === arrival;
          // A cancel now and then moves the last row into the gap.
          if (k % 7 === 6) for (const pool of [plain, reserved]) pool.remove(`t${k - 3}`);
        }
        expect(inPlace).toBe(true);
        expect(reserved.count).toBe(plain.count);
        expect([reserved.filterCount, reserved.hostCount]).toEqual([plain.filterCount, plain.hostCount]);
        const widths = {
          partySize: 1,
          mmrMean: 1,
          arrivalMs: 1,
          rulesetMask: 1,
          attrValues: plain.filterCount,
          attrAccepts: plain.filterCount,
          latencyMs: plain.hostCount,
        };
        for (const [column, width] of Object.entries(widths) as [keyof typeof widths, number][]) {
          const rows = (pool: TicketPool) => [...(pool[column].subarray(0, plain.count * width) as Iterable<number | bigint>)];
          expect(rows(reserved), column).toEqual(rows(plain));
        }
        const ids = (pool: TicketPool) => Array.from({ length: pool.count }, (_, r) => pool.idAt(r));
        expect(ids(reserved)).toEqual(ids(plain));
        const tick = async (pool: TicketPool) =>
          allMatches(await new TickRunner(engineParams(config)).run(pool, NOW, 1)).map((m) => Array.from(m.rows, (r) => pool.idAt(r)));
        const matches = await tick(reserved);
        expect(matches.length).toBeGreaterThan(0);
        expect(matches).toEqual(await tick(plain));
      },
    ),
    { numRuns: 12, endOnFailure: true },
  );
}, 60_000);
