// What a replicated leader's checkpoint holds its event loop for (src/queue/queue-snapshot.ts): the state of
// a queue of N active tickets taken at once (QueueState.snapshot, as every checkpoint was until the ninth
// session) beside the same state taken in slices (snapshotInSlices: ids and positions at once, the bytes in
// time slices). Side by side in one process, alternating, each repeated; the longest pause of the event loop
// is read from a timer that runs all along.
//
//   node dist/bench/checkpoint-capture.js [--tickets 1000000] [--rounds 3]
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { QueueState } from '../src/queue/queue-state.js';

const { values } = parseArgs({ options: { tickets: { type: 'string', default: '1000000' }, rounds: { type: 'string', default: '3' } } });
const n = Number(values.tickets);
const rounds = Number(values.rounds);

const bytes = new Map<string, Uint8Array>();
const state = new QueueState('bench', (id) => bytes.get(id)!);
for (let i = 0; i < n; i++) {
  const id = randomUUID();
  bytes.set(id, new Uint8Array(150));
  state.active.set(id, i + 1);
}

/** Runs `take` while a timer measures the longest gap between its firings (the longest pause). */
async function measured(take: () => Promise<unknown> | unknown): Promise<{ totalMs: number; longestPauseMs: number }> {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  await new Promise((resolve) => setTimeout(resolve, 20));
  last = performance.now();
  const started = performance.now();
  await take();
  const totalMs = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 5));
  clearInterval(timer);
  return { totalMs, longestPauseMs: longest };
}

const rows: string[] = [];
for (let r = 1; r <= rounds; r++) {
  const atOnce = await measured(() => state.snapshot());
  const sliced = await measured(() => state.snapshotInSlices());
  rows.push(
    `| ${r} | ${atOnce.totalMs.toFixed(0)} | ${atOnce.longestPauseMs.toFixed(0)} | ${sliced.totalMs.toFixed(0)} | ${sliced.longestPauseMs.toFixed(0)} | ${(atOnce.longestPauseMs / sliced.longestPauseMs).toFixed(1)}× |`,
  );
}
console.log(`checkpoint capture of ${n} active tickets (150-byte tickets), ms`);
console.log('| round | at once: total | at once: longest pause | in slices: total | in slices: longest pause | pause ratio |');
console.log('| ----- | -------------- | ---------------------- | ---------------- | ------------------------ | ----------- |');
for (const row of rows) console.log(row);
