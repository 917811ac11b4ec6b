// Issue 3's measurements: (1) tick time through the host's own path (EngineInput -> TicketPool.prepare/insert
// -> TickRunner.run, the native engine on a libuv thread) for pools of 10k, 100k and 1M tickets, with the
// column bytes per ticket; (2) CreateTicket latency at a fixed 3,000/s against the real service while a
// 1M-ticket pool ticks continuously, next to the same load on an empty pool.
//
//   node dist/bench/tick-load.js [--sizes 10000,100000,1000000] [--service-pool 1000000] [--duration-secs 20]
//                                [--client native|node]   (the load generator: bench/loadgen by default)
//                                [--load-inputs unmatchable|realistic]   (realistic: the load's tickets match
//                                each other, so every tick also commits matches and builds their outcomes)
//   BENCH_CPU_PROF (a directory: the service runs with --cpu-prof and writes its profiles there)
//   BENCH_SERVICE_NODE_ARGS (Node or V8 flags for the service alone, e.g. --max-semi-space-size=32)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { TicketPool } from '../src/engine/ticket-pool.js';
import { allMatches, engineParams, TickRunner } from '../src/engine/tick-runner.js';
import { TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { LmdbStore } from '../src/store/lmdb-store.js';
import type { StoreChange } from '../src/store/store.js';
import { assertBuildFresh } from './build-freshness.js';
import { serviceNodeArgs, spawnServer } from './child-process.js';
import { formatResult, realisticEngineInput, runLoad, type LoadResult } from './create-ticket-load.js';
import { runNativeLoad } from './native-load.js';
import { formatPauses, type ServicePauses, watchServicePauses } from './service-pauses.js';
import { GENERATED_QUEUE, generatePool, prng } from './pool-generator.js';

const CLI = resolve(import.meta.dirname, '../src/cli.js');

const QUEUE = GENERATED_QUEUE;

export interface TickTiming {
  tickets: number;
  matches: number;
  medianMs: number;
  minMs: number;
  maxMs: number;
  columnBytesPerTicket: number;
  hostBytesPerTicket: number;
  /** The engine's scratch memory after the ticks (its layouts, kept and working), per ticket. */
  engineBytesPerTicket: number;
}

/** Builds a pool through the host path and times ticks over it (the pool is not changed between ticks). */
export async function timeTicks(tickets: number, iterations: number): Promise<TickTiming> {
  const generated = generatePool({ tickets, engineInputs: true });
  const inputs = generated.engineInputs!;
  global.gc?.();
  const before = process.memoryUsage();
  const pool = new TicketPool(
    { filters: QUEUE.engine.attribute_filters, rulesetIds: ['5v5'], defaultLatencyMs: QUEUE.engine.default_latency_ms },
    tickets,
  );
  for (let i = 0; i < tickets; i++) pool.insert(`t${i}`, pool.prepare(inputs[i]!, [], generated.columns.arrivalMs[i]!));
  global.gc?.();
  const after = process.memoryUsage();
  const runner = new TickRunner(engineParams(QUEUE));
  const times: number[] = [];
  let matches = 0;
  await runner.run(pool, generated.nowMs, 1); // warm-up: scratch memory and output arrays
  for (let k = 0; k < iterations; k++) {
    const t0 = performance.now();
    matches = allMatches(await runner.run(pool, generated.nowMs, k + 2)).length; // read every match, as the service does
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  // `external` includes the array buffers: adding `arrayBuffers` too would count the columns twice.
  const hostBytes = after.heapUsed + after.external - (before.heapUsed + before.external);
  return {
    tickets,
    matches,
    medianMs: times[times.length >> 1]!,
    minMs: times[0]!,
    maxMs: times[times.length - 1]!,
    columnBytesPerTicket: pool.columnBytesPerTicket(),
    hostBytesPerTicket: hostBytes / tickets,
    engineBytesPerTicket: runner.engineBytes() / tickets,
  };
}

/** Seeds a data directory with `tickets` tickets that never match (every host 200..300 ms away). */
async function seed(dataDir: string, queueId: string, tickets: number): Promise<void> {
  const store = new LmdbStore({
    path: dataDir,
    onFatal: (err) => {
      throw err;
    },
  });
  const rand = prng(7);
  const now = Date.now();
  for (let done = 0; done < tickets; ) {
    const changes: StoreChange[] = [];
    for (const end = Math.min(tickets, done + 50_000); done < end; done++) {
      const id = crypto.randomUUID();
      const ticket = create(TicketSchema, { id, queueId, createdAt: timestampFromMs(now), engineInput: realisticEngineInput(rand, true) });
      changes.push({
        type: 'ticket.put',
        ticket: { queueId, ticketId: id, position: done + 1, ticket: toBinary(TicketSchema, ticket), state: 'active' },
      });
    }
    await store.commit(changes);
  }
  await store.close();
}

export interface ServiceUnderTick {
  poolTickets: number;
  load: LoadResult;
  ticksDuringLoad: { count: number; medianMs: number; maxMs: number; matches: number };
  /** From spawning the service to its `listening` line: process start plus reading the stored tickets. */
  startMs: number;
  /** From spawning the service to its `pool restored` line (the pool's rows built; ticking starts). */
  restoredMs: number;
  /** The service's event-loop pauses and GC during the load. */
  pauses: ServicePauses;
}

/**
 * Fixed-rate CreateTicket against a service whose pool holds `poolTickets` unmatchable tickets, ticking. The
 * load's own tickets are unmatchable too, or (`loadInputs` realistic) match one another: then each tick also
 * commits matches and builds their outcomes beside the large pool.
 */
export async function createTicketsWhileTicking(
  poolTickets: number,
  durationSecs: number,
  client: 'native' | 'node',
  rate = 3000,
  tickIntervalMs = 250,
  loadInputs: 'unmatchable' | 'realistic' = 'unmatchable',
): Promise<ServiceUnderTick> {
  const queueDir = mkdtempSync(join(tmpdir(), 'mm-tickbench-queues-'));
  const dataDir = mkdtempSync(join(tmpdir(), 'mm-tickbench-data-'));
  // eu.ranked-like queue (the load's inputs are built for it).
  writeFileSync(
    join(queueDir, 'eu.ranked.yaml'),
    `config:\n  tick_interval_ms: ${tickIntervalMs}\n  ticket_ttl_secs: 3600\n  engine:\n    attribute_filters:\n      - name: game_mode\n      - name: language\n        mode: containment\n  rulesets:\n    - id: 5v5\n      teams: 2\n      team_size: 5\n      require_host: true\n      max_latency_ms: 80\n`,
  );
  try {
    if (poolTickets > 0) await seed(dataDir, 'eu.ranked', poolTickets);
    const spawnedAt = performance.now();
    const service = await spawnServer(
      'service',
      [CLI, 'serve', '--config', queueDir, '--data', dataDir],
      { LOG_LEVEL: 'debug' },
      { listenTimeoutMs: 300_000, nodeArgs: serviceNodeArgs(`service-pool${poolTickets}`) },
    );
    const startMs = performance.now() - spawnedAt;
    // The load starts on a complete, ticking pool, not during the restart's rebuild of its rows.
    while (poolTickets > 0 && !service.lines.some((l) => l.msg === 'pool restored'))
      await new Promise((resolve) => setTimeout(resolve, 100));
    const restoredMs = performance.now() - spawnedAt;
    const tickLines = () => service.lines.filter((l) => l.msg === 'tick' && typeof l.ms === 'number');
    try {
      const before = tickLines().length;
      const watch = watchServicePauses(service.httpPort!);
      const generate = client === 'native' ? runNativeLoad : runLoad;
      const load = await generate({
        target: `127.0.0.1:${service.port}`,
        queueId: 'eu.ranked',
        mode: 'fixed',
        rate,
        durationSecs,
        inputs: loadInputs,
      });
      const pauses = await watch.stop();
      const duringLines = tickLines().slice(before);
      const during = duringLines.map((l) => l.ms as number).sort((a, b) => a - b);
      const matches = duringLines.reduce((sum, l) => sum + (typeof l.matches === 'number' ? l.matches : 0), 0);
      return {
        poolTickets,
        startMs,
        restoredMs,
        pauses,
        load,
        ticksDuringLoad: {
          count: during.length,
          medianMs: during[during.length >> 1] ?? 0,
          maxMs: during[during.length - 1] ?? 0,
          matches,
        },
      };
    } finally {
      await service.stop();
    }
  } finally {
    rmSync(queueDir, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  assertBuildFresh(resolve(import.meta.dirname, '../..')); // it spawns dist/src/cli.js: refuse to measure an old build
  const { values } = parseArgs({
    options: {
      sizes: { type: 'string', default: '10000,100000,1000000' },
      'service-pool': { type: 'string', default: '1000000' },
      'duration-secs': { type: 'string', default: '20' },
      client: { type: 'string', default: 'native' },
      'tick-interval-ms': { type: 'string', default: '250' },
      'load-inputs': { type: 'string', default: 'unmatchable' },
    },
  });
  const loadInputs = values['load-inputs'];
  if (loadInputs !== 'unmatchable' && loadInputs !== 'realistic') throw new Error('--load-inputs: unmatchable or realistic');
  console.log(`# Tick time through the host path (TicketPool + TickRunner, native engine), 2x5, parties 1..5, 3 filters, 8 hosts`);
  console.log('tickets    matches   median ms   min ms   max ms   column B/ticket   host B/ticket   engine B/ticket');
  for (const n of values.sizes.split(',').map(Number)) {
    const t = await timeTicks(n, n >= 1_000_000 ? 5 : n >= 100_000 ? 10 : 30);
    console.log(
      `${String(n).padStart(9)} ${String(t.matches).padStart(9)} ${t.medianMs.toFixed(1).padStart(11)} ${t.minMs.toFixed(1).padStart(8)} ${t.maxMs.toFixed(1).padStart(8)} ${String(t.columnBytesPerTicket).padStart(17)} ${t.hostBytesPerTicket.toFixed(0).padStart(15)} ${t.engineBytesPerTicket.toFixed(0).padStart(17)}`,
    );
  }
  const duration = Number(values['duration-secs']);
  const poolSize = Number(values['service-pool']);
  const client = values.client === 'node' ? 'node' : 'native';
  const tickIntervalMs = Number(values['tick-interval-ms']);
  console.log(
    `\n# CreateTicket at a fixed 3,000/s for ${duration} s: empty pool, then a ${poolSize}-ticket pool ticking every ${tickIntervalMs} ms, ${client} load generator, ${loadInputs} inputs`,
  );
  const p99s: number[] = [];
  for (const size of [0, poolSize]) {
    const r = await createTicketsWhileTicking(size, duration, client, 3000, tickIntervalMs, loadInputs);
    p99s.push(r.load.latencyMs.p99);
    console.log(formatResult(`pool ${size}`, r.load));
    console.log(formatPauses(r.pauses));
    console.log(
      `  ticks during the load: ${r.ticksDuringLoad.count}, median ${r.ticksDuringLoad.medianMs} ms, max ${r.ticksDuringLoad.maxMs} ms, ${r.ticksDuringLoad.matches} matches`,
    );
    console.log(
      `  service start to serving: ${(r.startMs / 1000).toFixed(1)} s; to its pool of ${r.poolTickets} restored: ${(r.restoredMs / 1000).toFixed(1)} s`,
    );
  }
  console.log(`CreateTicket p99 with the ${poolSize}-ticket pool / with an empty pool: ${(p99s[1]! / p99s[0]!).toFixed(2)}x`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
