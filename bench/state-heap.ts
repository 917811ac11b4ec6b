// What a queue holds per waiting and per resolved ticket, on the JS heap and outside it, and how long a full
// collection of the process takes while it holds them: the part of every major GC's pause that grows with
// the pool (issue 21, part 4). In process, through the classes the service uses: the pool's rows
// (TicketPool.prepare/insert), the state's active tickets (id -> position) and its resolved tickets.
//
//   node --expose-gc dist/bench/state-heap.js [--tickets 1000000] [--resolved 1000000] [--collections 7]
import { parseArgs } from 'node:util';
import { TicketPool } from '../src/engine/ticket-pool.js';
import { QueueState } from '../src/queue/queue-state.js';
import { GENERATED_QUEUE, generatePool, prng } from './pool-generator.js';

/** A canonical lowercase v4 UUID from the generator, as the API hands ids to the queue. */
function uuidFrom(rand: () => number): string {
  const hex = Array.from({ length: 32 }, () => Math.floor(rand() * 16).toString(16)).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20)}`;
}

function gcMs(collections: number): number[] {
  const gc = global.gc;
  if (!gc) throw new Error('run with node --expose-gc');
  return Array.from({ length: collections }, () => {
    const t0 = performance.now();
    gc();
    return performance.now() - t0;
  });
}

/** Memory after full collections, once the freed array buffers' memory is given back (that lags behind the GC). */
async function settled(): Promise<NodeJS.MemoryUsage> {
  gcMs(2);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  gcMs(1);
  return process.memoryUsage();
}

/** Memory outside the JS heap: `external` includes the array buffers (`arrayBuffers` is a part of it). */
function outside(m: NodeJS.MemoryUsage): number {
  return m.external;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tickets: { type: 'string', default: '1000000' },
      resolved: { type: 'string', default: '1000000' },
      collections: { type: 'string', default: '7' },
    },
  });
  const [tickets, resolvedCount, collections] = [Number(values.tickets), Number(values.resolved), Number(values.collections)];
  const rand = prng(7);
  const empty = gcMs(collections).sort((a, b) => a - b);
  // The generated inputs are held through the pooled tickets' measurement, so they cancel out, then let go of.
  // The ids are made as the API makes them, one string per ticket, and only the pool and the state keep them.
  let generated: ReturnType<typeof generatePool> | undefined = generatePool({ tickets, engineInputs: true });
  const base = await settled();
  const pool = new TicketPool(
    { filters: GENERATED_QUEUE.engine.attribute_filters, rulesetIds: ['5v5'], defaultLatencyMs: GENERATED_QUEUE.engine.default_latency_ms },
    tickets,
  );
  const state = new QueueState('q', () => new Uint8Array(0));
  for (let i = 0; i < tickets; i++) {
    const id = uuidFrom(rand);
    pool.insert(id, pool.prepare(generated.engineInputs![i]!, [], generated.columns.arrivalMs[i]!));
    state.active.set(id, i + 1);
  }
  const pooled = await settled();
  // Read after the measurement, so that the inputs are still live during it.
  if (generated.engineInputs!.length !== tickets) throw new Error('the generator made fewer inputs than tickets');
  generated = undefined;
  const released = await settled();
  let matchId = '';
  for (let i = 0; i < resolvedCount; i++) {
    if (i % 10 === 0) matchId = uuidFrom(rand);
    state.resolved.set(uuidFrom(rand), { position: tickets + i + 1, matchId, resolvedAtMs: 1.7e12 + i });
  }
  const all = await settled();
  const held = gcMs(collections).sort((a, b) => a - b);

  const per = (bytes: number, n: number) => (n > 0 ? (bytes / n).toFixed(0) : '-');
  const median = (xs: number[]) => xs[xs.length >> 1]!.toFixed(1);
  console.log(`# ${tickets} pooled tickets (rows and state) and ${resolvedCount} resolved, UUID ids; ${collections} full collections each`);
  console.log('              JS heap B/ticket   outside B/ticket');
  console.log(
    `pooled      ${per(pooled.heapUsed - base.heapUsed, tickets).padStart(18)} ${per(outside(pooled) - outside(base), tickets).padStart(18)}`,
  );
  console.log(
    `resolved    ${per(all.heapUsed - released.heapUsed, resolvedCount).padStart(18)} ${per(outside(all) - outside(released), resolvedCount).padStart(18)}`,
  );
  console.log(`full gc: median ${median(empty)} ms holding nothing, ${median(held)} ms holding the pool and the resolved tickets`);
  if (pool.count + state.active.size + state.resolved.size < 0) console.log('unreachable: keeps the pool and state live');
}

await main();
