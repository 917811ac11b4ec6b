// ENGINE_THREADS: the engines of a process share one pool of threads, set once, and a tick spread over
// them writes exactly what a tick on one thread writes. Each setting runs in a process of its own (the
// built modules), since only a process's first call counts.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { DEFAULT_ENGINE_THREADS_MAX, defaultEngineThreads } from '../../src/config/service-config.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
// More tickets than the engine spreads from (MIN_LIVE in crates/engine/src/tick/speculate.rs).
const TICKETS = 250_000;

/** Sets the threads (twice: `threads`, then 5) and answers the counts in force and a digest of every
 *  output array of a tick over the bench generator's pool. */
const script = (threads: number) => `
  import { createHash } from 'node:crypto';
  import { TickEngine, useEngineThreads } from './dist/src/engine/native.js';
  import { generatePool, generatedQueueParams, matchArrays } from './dist/bench/pool-generator.js';
  const first = useEngineThreads(${threads});
  const again = useEngineThreads(5);
  const { columns, nowMs } = generatePool({ tickets: ${TICKETS}, seed: 5 });
  const out = matchArrays(${TICKETS}, columns.filterCount);
  const count = await new TickEngine(generatedQueueParams()).run(columns, out, nowMs, 9);
  const hash = createHash('sha256');
  for (const array of Object.values(out)) hash.update(new Uint8Array(array.buffer));
  console.log(JSON.stringify({ first, again, count, digest: hash.digest('hex') }));
`;

async function tick(threads: number) {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script(threads)], {
    cwd: root,
  });
  return JSON.parse(stdout) as { first: number; again: number; count: number; digest: string };
}

it('a tick on three threads writes what a tick on one writes, and only the first setting counts', async () => {
  const [alone, spread] = await Promise.all([tick(1), tick(3)]);
  expect(alone.count).toBeGreaterThan(TICKETS / 10);
  expect({ first: alone.first, again: alone.again }).toEqual({ first: 1, again: 1 });
  expect(spread).toEqual({ ...alone, first: 3, again: 3 });
}, 60_000);

it('by default a tick spreads over the cores less one, and over at most eight', () => {
  expect([1, 2, 3, 4, 9, 16, 64].map(defaultEngineThreads)).toEqual([1, 1, 2, 3, 8, 8, 8]);
  expect(defaultEngineThreads(16)).toBe(DEFAULT_ENGINE_THREADS_MAX);
});
