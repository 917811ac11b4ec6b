// Changes to a pool's columns made while the engine reads them (src/queue/pool-columns.ts) wait, and go in
// once its results are read: in the order they were made, those made meanwhile after them, before the
// engine's run is over, and in time slices that let other work run between them, so that a tick that held
// thousands of CreateTickets' rows does not hold the event loop while it puts them in. A ticket that leaves lets go
// of its strings at once, though, so the tables follow the records' order.
import { expect, it } from 'vitest';
import type { ParsedEngineInput } from '../../src/engine/engine-input.js';
import { MAX_FILTER_VALUES } from '../../src/engine/ticket-pool.js';
import { createLogger } from '../../src/log.js';
import { PoolColumns } from '../../src/queue/pool-columns.js';
import { WORK_SLICE_MS } from '../../src/queue/time-slices.js';

const layout = { filters: [], rulesetIds: ['r'], defaultLatencyMs: 150 };

/** An engine input with one player and one map. */
const mapInput = (map: string): ParsedEngineInput => ({
  playerIds: [`p-${map}`],
  mmrMean: 0.5,
  latencies: new Map(),
  attributes: new Map([['map', { values: [map], accepts: [] }]]),
});

/** Columns with one overlap filter, `map`, and `tickets` tickets (t0, t1, ...) in the pool, each with a map of its own. */
function mapColumns(tickets: number) {
  const columns = new PoolColumns({ ...layout, filters: [{ name: 'map', mode: 'overlap' }] }, createLogger('silent'), 'q');
  const pool = columns.pool;
  for (let i = 0; i < tickets; i++) pool.insert(`t${i}`, pool.prepare(mapInput(`map-${i}`), [], 0));
  return { columns, pool };
}

/** An engine run over the columns that lasts until `release` is called. */
function heldEngineRun(columns: PoolColumns): { running: Promise<undefined>; release: () => void } {
  let release!: () => void;
  const running = columns.withEngine(
    () => new Promise<void>((resolve) => (release = resolve)),
    () => undefined,
  );
  return { running, release: () => release() };
}

/** Holds the thread for `ms`, as a change of a large pool would. */
function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

it('applies the changes held during an engine run in order, in slices, before the run is over', async () => {
  const columns = new PoolColumns(layout, createLogger('silent'), 'q');
  const applied: number[] = [];
  let releaseEngine!: () => void;
  const engine = new Promise<void>((resolve) => {
    releaseEngine = resolve;
  });
  // Each held change takes a fifth of a slice: forty of them take about eight slices.
  const change = (n: number) => () => {
    busy(WORK_SLICE_MS / 5);
    applied.push(n);
    // One made while the held ones go in: it queues behind them.
    if (n === 10) columns.withPool(() => applied.push(100));
  };
  let turnsBetween = 0;
  const running = columns.withEngine(
    () => engine,
    () => {
      // Other work of the event loop: counts the turns it gets while the held changes go in.
      const count = () => {
        if (applied.length === 0 || applied.length >= 41) return;
        turnsBetween++;
        setImmediate(count);
      };
      setImmediate(count);
      return 'result';
    },
  );
  for (let n = 0; n < 40; n++) columns.withPool(change(n));
  expect(applied).toEqual([]);
  releaseEngine();
  expect(await running).toBe('result');
  expect(applied).toEqual([...Array.from({ length: 40 }, (_, n) => n), 100]);
  expect(turnsBetween).toBeGreaterThan(2);
  // Once the run is over a change goes in at once.
  columns.withPool(() => applied.push(200));
  expect(applied.at(-1)).toBe(200);
});

it("lets go of a leaving ticket's strings at once, its row after the engine run: the room it freed is there for the next ticket", async () => {
  // One map a ticket, 256 maps: the map table is full.
  const { columns, pool } = mapColumns(MAX_FILTER_VALUES);
  expect(() => pool.prepare(mapInput('new-map'), [], 0)).toThrow(/256 distinct values/);
  const { running, release: releaseEngine } = heldEngineRun(columns);
  // As a follower applies a cancel and then another replica's create while a tick reads the columns: the
  // create's row is made when its record applies, and finds the cancelled ticket's map gone.
  columns.remove(['t0']);
  const row = pool.prepare(mapInput('new-map'), [], 0);
  columns.insert(pool, 'new', row, () => true);
  expect([pool.has('t0'), pool.has('new')]).toEqual([true, false]);
  // The table is full again: the new ticket holds the room.
  expect(() => pool.prepare(mapInput('another-map'), [], 0)).toThrow(/256 distinct values/);
  releaseEngine();
  await running;
  expect([pool.has('t0'), pool.has('new')]).toEqual([false, true]);
  expect(() => pool.prepare(mapInput('another-map'), [], 0)).toThrow(/256 distinct values/);
  // The row's removal after the run let go of nothing more: once the new ticket leaves too, one map is free.
  columns.remove(['new']);
  const another = pool.prepare(mapInput('another-map'), [], 0);
  expect(() => pool.prepare(mapInput('a-third-map'), [], 0)).toThrow(/256 distinct values/);
  pool.release(another);
});

it('lets go of the strings of a row still waiting to go in when its ticket leaves', async () => {
  const { columns, pool } = mapColumns(MAX_FILTER_VALUES - 1);
  const { running, release: releaseEngine } = heldEngineRun(columns);
  // A ticket created and cancelled through this replica while a tick reads the columns: its row waits to go
  // in, and the cancel lets go of its map at once, so another replica's ticket applied next finds the room.
  let active = true;
  columns.insert(pool, 'own', pool.prepare(mapInput('own-map'), [], 0), () => active);
  active = false;
  columns.remove(['own']);
  columns.insert(pool, 'next', pool.prepare(mapInput('next-map'), [], 0), () => true);
  expect(() => pool.prepare(mapInput('another-map'), [], 0)).toThrow(/256 distinct values/);
  releaseEngine();
  await running;
  expect([pool.has('own'), pool.has('next')]).toEqual([false, true]);
  expect(() => pool.prepare(mapInput('another-map'), [], 0)).toThrow(/256 distinct values/);
});
