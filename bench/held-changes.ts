// What putting in the changes a tick held costs the event loop (issue 21, part 4: no pause over 20 ms from
// the tick's host side). While the engine reads a pool's columns on its thread, CreateTickets' rows wait, and
// go in once its results are read (src/queue/pool-columns.ts). A 1M-ticket pool ticks here while rows
// arrive at a fixed rate (3,000/s, as tick-load sends), then the held rows go in: at once (as before this
// change: one loop) and through PoolColumns.withEngine (in time slices), in turn on the same pool. Printed per
// tick: the engine's time, the rows held, and the longest the event loop was held while they went in: the
// longest gap between turns of a chain of setImmediate callbacks started as the engine's run ends.
//
//   node --expose-gc dist/bench/held-changes.js [--tickets 1000000] [--rate 3000] [--rounds 2]
import { parseArgs } from 'node:util';
import { engineParams, TickRunner } from '../src/engine/tick-runner.js';
import type { PoolRow } from '../src/engine/ticket-pool.js';
import { createLogger } from '../src/log.js';
import { PoolColumns } from '../src/queue/pool-columns.js';
import { GENERATED_QUEUE, generatePool } from './pool-generator.js';

const { values } = parseArgs({
  options: {
    tickets: { type: 'string', default: '1000000' },
    rate: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '2' },
  },
});
const [tickets, rate, rounds] = [Number(values.tickets), Number(values.rate), Number(values.rounds)];
// 10,000 generated tickets used in turn keep the bench's own heap small, as the service's is.
const generated = generatePool({ tickets: 10_000, engineInputs: true });
const inputs = generated.engineInputs!;
const columns = new PoolColumns(
  {
    filters: GENERATED_QUEUE.engine.attribute_filters,
    rulesetIds: ['5v5'],
    defaultLatencyMs: GENERATED_QUEUE.engine.default_latency_ms,
    reservedRows: 2 * tickets,
  },
  createLogger('silent'),
  'bench.held',
);
const pool = columns.pool;
let made = 0;
const row = (): PoolRow => {
  const i = made++ % inputs.length;
  // Arrivals an hour back for the seeded pool: its tickets are old, so their bounds are wide and most match.
  return pool.prepare(inputs[i]!, [], generated.nowMs - 3_600_000 + (made % 1000));
};
for (let i = 0; i < tickets; i++) pool.insert(crypto.randomUUID(), row());
const runner = new TickRunner(engineParams(GENERATED_QUEUE));
// A first tick matches most of the seeded pool; the ticks measured run over what stays.
await runner.run(pool, generated.nowMs, 1);

/** Measures the longest gap between turns of the event loop from now until `stop`. */
function watchTurns(): { stop(): Promise<number> } {
  let last = performance.now();
  let longest = 0;
  let watching = true;
  const turn = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (watching) setImmediate(turn);
  };
  setImmediate(turn);
  return {
    async stop() {
      // A turn after the last change, so that a stretch that ran to the end is counted.
      await new Promise((resolve) => setImmediate(resolve));
      watching = false;
      return longest;
    },
  };
}

/** One tick with rows arriving at `rate` meanwhile; `apply` puts them in; answers the loop's longest delay then. */
async function tick(seed: number, apply: (held: (() => void)[], run: () => Promise<unknown>) => Promise<void>) {
  const held: (() => void)[] = [];
  const arrivals = setInterval(() => {
    for (let k = 0; k < rate / 1000; k++) {
      const r = row();
      held.push(() => pool.insert(crypto.randomUUID(), r));
    }
  }, 1);
  const started = performance.now();
  let engineMs = 0;
  let watch: { stop(): Promise<number> } | undefined;
  await apply(held, async () => {
    await runner.run(pool, generated.nowMs, seed);
    engineMs = performance.now() - started;
    clearInterval(arrivals);
    watch = watchTurns();
  });
  const longestMs = await watch!.stop();
  return { engineMs, held: held.length, longestMs };
}

console.log(`# a ${pool.count}-ticket pool ticking while rows arrive at ${rate}/s; the rows held during each tick go in after it`);
console.log('round  way          engine ms   rows held   longest event-loop delay while they went in, ms');
for (let round = 1; round <= rounds; round++) {
  const ways = {
    // As before: the held changes in one loop, once the engine's run is over.
    'at once': async (held: (() => void)[], run: () => Promise<unknown>) => {
      await run();
      for (const change of held) change();
    },
    // Through PoolColumns: in time slices.
    'in slices': async (held: (() => void)[], run: () => Promise<unknown>) => {
      await columns.withEngine(
        async () => {
          await run();
          // What arrived during the run was held by the columns too.
          for (const change of held) columns.withPool(change);
        },
        () => undefined,
      );
    },
  };
  for (const [way, apply] of Object.entries(ways)) {
    global.gc?.();
    const t = await tick(round * 10 + way.length, apply);
    console.log(
      `${String(round).padStart(5)}  ${way.padEnd(10)} ${t.engineMs.toFixed(0).padStart(11)} ${String(t.held).padStart(11)} ${t.longestMs.toFixed(1).padStart(12)}`,
    );
  }
}
