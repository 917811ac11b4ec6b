// Ticks that update the layout the engine kept (docs/engine.md, "Incremental ticks"): the pool notes the rows
// it writes (inserts, and the rows swap-removes move into), and its runner hands them to the engine, whose tick
// then updates its last layout instead of laying the pool out whole. Each tick must give what a runner that has
// never seen the pool gives (it lays the pool out whole): the same matches, rule diagnostics and refusals,
// through arrivals, matches, cancels, hosts that come and go (whole latency columns rewritten) and filters
// that widen past 64 values. In-process: TicketPool and the native engine through TickRunner.
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { queueConfigSchema } from '../../src/config/queue-config.js';
import { TicketPool } from '../../src/engine/ticket-pool.js';
import { allMatches, engineParams, type TickResult, TickRunner } from '../../src/engine/tick-runner.js';
import { type PoolTicketSpec, poolTicketInput } from '../support/pool-tickets.js';

const NOW = 1_700_000_000_000;
const config = queueConfigSchema.parse({
  engine: { attribute_filters: [{ name: 'map', mode: 'overlap' }] },
  rulesets: [
    { id: 'duos', teams: 2, team_size: 2, max_skill_spread: 0.3, require_host: true, max_latency_ms: 80 },
    { id: 'duel', teams: 2, team_size: 1, max_skill_spread: 0.1 },
  ],
});

const newPool = () =>
  new TicketPool({ filters: config.engine.attribute_filters, rulesetIds: config.rulesets.map((r) => r.id), defaultLatencyMs: 150 });

/** A tick's matches by ticket id, with what explains the tickets left waiting. */
function seen(pool: TicketPool, result: TickResult) {
  return {
    matches: allMatches(result).map((m) => ({
      ruleset: m.rulesetIndex,
      tickets: Array.from(m.rows, (r) => pool.idAt(r)),
      teams: Array.from(m.teams),
      host: m.preferredHost === undefined ? undefined : result.keys.hosts[m.preferredHost],
    })),
    rejections: config.rulesets.map((_, r) => [result.rejections(r), result.candidates(r)]),
    refusals: Array.from(result.refusals, (code, r) => [pool.idAt(r), code]),
  };
}

const spec = fc.record({
  mmr: fc.double({ min: 0, max: 1, noNaN: true }),
  players: fc.integer({ min: 1, max: 2 }),
  // Now and then one of many maps: the filter widens past 64 values.
  maps: fc.array(
    fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 90 }) }),
    {
      maxLength: 2,
    },
  ),
  // Hosts come and go with the tickets that measured them.
  hosts: fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 10, max: 200 })), { maxLength: 3 }),
  waitMs: fc.integer({ min: 0, max: 20_000 }),
});

const step = fc.record({
  arrivals: fc.array(spec, { maxLength: 20 }),
  cancels: fc.array(fc.nat(), { maxLength: 6 }),
});

it('a tick that updates the kept layout gives what a tick laying the pool out whole gives', async () => {
  let updated = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(spec, { minLength: 150, maxLength: 300 }),
      fc.array(step, { minLength: 2, maxLength: 6 }),
      async (first, steps) => {
        const pool = newPool();
        const kept = new TickRunner(engineParams(config));
        let next = 0;
        const arrive = (t: PoolTicketSpec, nowMs: number) => {
          const id = `t${next++}`;
          pool.insert(id, pool.prepare(poolTicketInput(id, t), [], nowMs - t.waitMs));
        };
        for (const t of first) arrive(t, NOW);
        for (const [k, s] of [{ arrivals: [], cancels: [] }, ...steps].entries()) {
          const nowMs = NOW + 250 * k;
          if (k > 0) {
            for (const c of s.cancels) if (pool.count > 0) pool.remove(pool.idAt(c % pool.count));
            for (const t of s.arrivals) arrive(t, nowMs);
          }
          const ours = seen(pool, await kept.run(pool, nowMs, k));
          updated += kept.updatedLayout() ? 1 : 0;
          const whole = new TickRunner(engineParams(config));
          expect(ours, `tick ${k}`).toEqual(seen(pool, await whole.run(pool, nowMs, k)));
          expect(whole.updatedLayout()).toBe(false);
          for (const m of ours.matches) for (const id of m.tickets) pool.remove(id);
        }
      },
    ),
    { numRuns: 60 },
  );
  // Most ticks after the first of a run updated the kept layout (the others had a column rewritten, or more
  // than a quarter of the pool changed).
  expect(updated).toBeGreaterThan(60);
}, 60_000);

it('the engine updates its layout from the second tick on, and lays the pool out whole when whole columns change', async () => {
  const pool = newPool();
  const runner = new TickRunner(engineParams(config));
  const spec = (k: number, hosts: [number, number][]): PoolTicketSpec => ({
    mmr: (k % 97) / 97,
    players: 1,
    maps: [k % 3],
    hosts,
    waitMs: 0,
  });
  // Skills 0.02 apart, twice the duel's spread, in no ruleset but the duel: none of them matches.
  const apart = (k: number, hosts: [number, number][]): PoolTicketSpec => ({ ...spec(k, hosts), mmr: 0.02 * k });
  for (let k = 0; k < 400; k++) pool.insert(`a${k}`, pool.prepare(poolTicketInput(`a${k}`, apart(k, [[k % 4, 30]])), ['duel'], NOW));
  const tick = async (k: number) => {
    const result = await runner.run(pool, NOW + 250 * k, k);
    for (const m of allMatches(result)) for (const id of Array.from(m.rows, (r) => pool.idAt(r))) pool.remove(id);
    return { updated: runner.updatedLayout(), matched: result.count };
  };
  expect(await tick(0)).toEqual({ updated: false, matched: 0 });
  // A few arrivals and a cancel: updated.
  for (let k = 0; k < 10; k++) pool.insert(`b${k}`, pool.prepare(poolTicketInput(`b${k}`, spec(k, [[k % 4, 30]])), [], NOW + 250));
  pool.remove(pool.idAt(0));
  expect((await tick(1)).updated).toBe(true);
  // A ticket that measured a new host: its column is written for every row. It shares that host with no
  // one, and its only ruleset requires one, so it waits.
  pool.insert('c0', pool.prepare(poolTicketInput('c0', spec(5, [[9, 30]])), ['duos'], NOW + 500));
  expect((await tick(2)).updated).toBe(false);
  expect((await tick(3)).updated).toBe(true);
  // The last ticket that measured it leaves: the column is no host's any more.
  expect(pool.remove('c0')).toBe(true);
  expect((await tick(4)).updated).toBe(false);
  expect((await tick(5)).updated).toBe(true);
});
