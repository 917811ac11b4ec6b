// The replicated mode's benchmarks (issue 13), in one run:
//
//   1. throughput: CreateTicket closed loop against the embedded mode (one service, lmdb), then against the
//      replicated mode with 1, 2 and 3 replicas on one three-node nats-server cluster (R3 streams). With N
//      replicas all N are driven at once, the load split evenly (BENCH_CONCURRENCY / N in flight on each,
//      one load generator per replica), and their ok/s summed. The queue is eu.ranked's file (realistic
//      inputs: its ticks match about half the tickets, so the leader's records are in the log too) with the
//      websocket sink (needs no consumer). Each replicated figure is reported as a ratio to the embedded one.
//   2. failover (bench/failover.ts): three replicas, a queue matching continuously; kill -9 of its leader,
//      time to the first match made after the kill stored in the outcome stream; BENCH_FAILOVER_KILLS times
//      for each lease in BENCH_FAILOVER_LEASES_MS.
//   1b. queues (BENCH_PHASES=queues): BENCH_QUEUE_COUNT queues (12) of the same file on 1 and 3 replicas
//      (BENCH_QUEUES_REPLICA_COUNTS); each load generator sends to every queue in turn, and the leadership of
//      the queues spreads over the replicas (ceil(queues / replicas) each) before the load starts.
//   1c. apply (BENCH_PHASES=apply): three replicas, the load sent only to one that does not lead: the CPU per
//      acknowledged request of the replica taking them, of the leader, and of the replica that only follows.
//   3. catch-up from a checkpoint (bench/catch-up.ts): a replica started against a queue whose checkpoint
//      holds N active tickets (BENCH_CATCHUP_TICKETS: 100k and 1M, and 0 for the start-up alone), timed
//      from its process start to the queue running.
//
// Everything runs on this machine: the three nats-server processes, the services and the load generators
// share its cores, which the report says next to the numbers (with each group's CPU use).
//
// Settings from the environment:
//   BENCH_PHASES (throughput,failover,catchup; also queues, apply)    BENCH_DURATION_SECS (10)  BENCH_WARMUP_SECS (3)
//   BENCH_CONCURRENCY (64, in all)        BENCH_CONNECTIONS (4, in all; at least 1 per replica)
//   BENCH_REPLICA_COUNTS (1,2,3)          BENCH_CLIENT (native: bench/loadgen; node: create-ticket-load.ts)
//   BENCH_FAILOVER_KILLS (20)             BENCH_FAILOVER_LEASES_MS (6000,2000)
//   BENCH_ROUNDS (2: the throughput phases, embedded then 1..3 replicas, run this many times in turn)
//   BENCH_FAILOVER_RATE (20 tickets/s)    BENCH_FAILOVER_TICK_MS (100)    BENCH_JSON_OUT (file for raw results)
//   BENCH_CATCHUP_TICKETS (0,100000,1000000)
//   BENCH_CPU_PROF (a directory: every replica runs with --cpu-prof and writes its profile there)
//   BENCH_SERVICE_NODE_ARGS (Node or V8 flags for the service alone, e.g. --max-semi-space-size=32)
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { buildFingerprint, envNumber, machine, machineBusySecs, processCpuSecs, table } from './bench-report.js';
import { assertBuildFresh } from './build-freshness.js';
import { runCatchUp, type CatchUpResult } from './catch-up.js';
import { spawnServer, type Child } from './child-process.js';
import { runLoad, type LoadHooks, type LoadOptions, type LoadResult } from './create-ticket-load.js';
import { runFailover, type FailoverResult } from './failover.js';
import { startNatsCluster, type BenchNatsCluster } from './nats-cluster.js';
import { ensureLoadgenBuilt, runNativeLoad } from './native-load.js';
import {
  CLI,
  errorLines,
  pollFor,
  queueSummary,
  removeReplicaDirs,
  replicaSpecs,
  replicatedEnv,
  startReplica,
  untilRunning,
  writeQueueDir,
} from './replica-processes.js';

const ROOT = resolve(import.meta.dirname, '../..');

function envList(name: string, fallback: string): string[] {
  return (process.env[name] || fallback)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

const settings = {
  phases: envList('BENCH_PHASES', 'throughput,failover,catchup'),
  durationSecs: envNumber('BENCH_DURATION_SECS', 10),
  warmupSecs: envNumber('BENCH_WARMUP_SECS', 3),
  concurrency: envNumber('BENCH_CONCURRENCY', 64),
  connections: envNumber('BENCH_CONNECTIONS', 4),
  rounds: Math.max(1, envNumber('BENCH_ROUNDS', 2)),
  replicaCounts: envList('BENCH_REPLICA_COUNTS', '1,2,3').map(Number),
  client: process.env.BENCH_CLIENT === 'node' ? ('node' as const) : ('native' as const),
  failoverKills: envNumber('BENCH_FAILOVER_KILLS', 20),
  failoverLeasesMs: envList('BENCH_FAILOVER_LEASES_MS', '6000,2000').map(Number),
  failoverRate: envNumber('BENCH_FAILOVER_RATE', 20),
  failoverTickMs: envNumber('BENCH_FAILOVER_TICK_MS', 100),
  catchUpTickets: envList('BENCH_CATCHUP_TICKETS', '0,100000,1000000').map(Number),
  queueCount: envNumber('BENCH_QUEUE_COUNT', 12),
  queuesReplicaCounts: envList('BENCH_QUEUES_REPLICA_COUNTS', '1,3').map(Number),
  jsonOut: process.env.BENCH_JSON_OUT || undefined,
};

const LOAD: Record<'node' | 'native', (partial: Partial<LoadOptions>, hooks: LoadHooks) => Promise<LoadResult>> = {
  node: runLoad,
  native: runNativeLoad,
};

/** The throughput phases' lease: the default. */
const THROUGHPUT_LEASE_MS = 6000;

// ---------------------------------------------------------------------------------------------------------
// Throughput

interface ThroughputPhase {
  name: string;
  round: number;
  replicas: number;
  /** One result per load generator (one per replica). */
  loads: LoadResult[];
  okPerSec: number;
  errors: Record<string, number>;
  /** CPU over the measured window, in cores: the services, the nats-servers, the load generators, all. */
  cpu: { services?: number; nats?: number; clients: number; machine?: number; perService?: (number | undefined)[] };
}

/** Drives every service at once, the load split evenly; samples CPU over the first generator's window. */
async function drive(
  name: string,
  round: number,
  services: Child[],
  queueId: string,
  natsPids: number[],
  queueIds?: readonly string[],
  /** The services the load goes to (default: all of them). */
  driven: Child[] = services,
): Promise<ThroughputPhase> {
  const n = driven.length;
  const sum = (xs: (number | undefined)[]) => (xs.some((x) => x === undefined) ? undefined : xs.reduce<number>((a, b) => a + b!, 0));
  const sample = () => ({
    services: sum(services.map((s) => processCpuSecs(s.process.pid))),
    perService: services.map((s) => processCpuSecs(s.process.pid)),
    nats: natsPids.length === 0 ? 0 : sum(natsPids.map((p) => processCpuSecs(p))),
    machine: machineBusySecs(),
  });
  let start: ReturnType<typeof sample> | undefined;
  let end: ReturnType<typeof sample> | undefined;
  const loads = await Promise.all(
    driven.map((s, i) =>
      LOAD[settings.client](
        {
          target: `127.0.0.1:${s.port}`,
          queueId,
          ...(queueIds ? { queueIds } : {}),
          mode: 'closed',
          concurrency: Math.max(1, Math.round(settings.concurrency / n)),
          connections: Math.max(1, Math.round(settings.connections / n)),
          durationSecs: settings.durationSecs,
          warmupSecs: settings.warmupSecs,
          inputs: 'realistic',
        },
        i === 0 ? { onMeasureStart: () => (start = sample()), onMeasureEnd: () => (end = sample()) } : {},
      ),
    ),
  );
  const secs = settings.durationSecs;
  const per = (f: (x: ReturnType<typeof sample>) => number | undefined) => {
    const a = start && f(start);
    const b = end && f(end);
    return a === undefined || b === undefined ? undefined : (b - a) / secs;
  };
  const errors: Record<string, number> = {};
  for (const l of loads) for (const [k, v] of Object.entries(l.errors)) errors[k] = (errors[k] ?? 0) + v;
  const phase: ThroughputPhase = {
    name,
    round,
    replicas: n,
    loads,
    okPerSec: loads.reduce((a, l) => a + l.throughput, 0),
    errors,
    cpu: {
      services: per((x) => x.services),
      nats: per((x) => x.nats),
      clients: loads.reduce((a, l) => a + l.clientCpu, 0),
      machine: per((x) => x.machine),
      perService: services.map((_, i) => per((x) => x.perService[i])),
    },
  };
  console.log(
    `${name}, round ${round}: ${phase.okPerSec.toFixed(0)} ok/s, p50 ${range(loads, 'p50')} ms, p99 ${range(loads, 'p99')} ms, errors ${errorText(errors)}; cpu (cores): services ${cores(phase.cpu.services)}, nats ${cores(phase.cpu.nats)}, load generators ${cores(phase.cpu.clients)}, machine ${cores(phase.cpu.machine)}`,
  );
  return phase;
}

/** The eu.ranked queue file under another id (sink websocket). */
function throughputQueueFiles(queueId: string): string {
  return writeQueueDir({ [queueId]: readFileSync(join(ROOT, 'queues/eu.ranked.yaml'), 'utf8') });
}

async function embeddedPhase(round: number): Promise<ThroughputPhase> {
  const queueId = `bench.embedded${round}`;
  const queueDir = throughputQueueFiles(queueId);
  const [spec] = await replicaSpecs('embedded', 1, queueDir, {});
  const service = await spawnServer('embedded service', [CLI, 'serve', '--config', queueDir, '--data', spec!.dataDir], {
    LOG_LEVEL: 'info',
  });
  try {
    return await drive('embedded (lmdb)', round, [service], queueId, []);
  } finally {
    await stopAll([service]);
    removeReplicaDirs([spec!]);
    rmSync(queueDir, { recursive: true, force: true });
  }
}

async function replicatedPhase(cluster: BenchNatsCluster, replicas: number, round: number): Promise<ThroughputPhase> {
  const queueId = `bench.round${round}.r${replicas}`;
  const queueDir = throughputQueueFiles(queueId);
  const env = replicatedEnv(cluster.urls, THROUGHPUT_LEASE_MS, 'BENCH_COORD_THROUGHPUT');
  const specs = await replicaSpecs(`tp${round}-${replicas}`, replicas, queueDir, env);
  const services: Child[] = [];
  try {
    for (const s of specs) services.push(await startReplica(s));
    for (const s of specs) await untilRunning(s.httpPort, queueId);
    return await drive(`replicated, ${replicas} replica${replicas === 1 ? '' : 's'} (R3)`, round, services, queueId, cluster.pids());
  } finally {
    await stopAll(services);
    removeReplicaDirs(specs);
    rmSync(queueDir, { recursive: true, force: true });
    await deleteQueueStreams(cluster, queueId);
  }
}

/** BENCH_QUEUE_COUNT queues on `replicas` replicas, their leadership spread, all driven at once. */
async function queuesPhase(cluster: BenchNatsCluster, replicas: number, round: number): Promise<ThroughputPhase> {
  const queueIds = Array.from({ length: settings.queueCount }, (_, i) => `bench.q${round}.r${replicas}.n${i}`);
  const file = readFileSync(join(ROOT, 'queues/eu.ranked.yaml'), 'utf8');
  const queueDir = writeQueueDir(Object.fromEntries(queueIds.map((q) => [q, file])));
  const env = replicatedEnv(cluster.urls, THROUGHPUT_LEASE_MS, `BENCH_COORD_QUEUES_${round}_${replicas}`);
  const specs = await replicaSpecs(`mq${round}-${replicas}`, replicas, queueDir, env);
  const services: Child[] = [];
  try {
    for (const s of specs) services.push(await startReplica(s));
    for (const s of specs) for (const q of queueIds) await untilRunning(s.httpPort, q);
    const share = Math.ceil(queueIds.length / replicas);
    const spread = await pollFor(
      'leadership spread over the replicas',
      async () => {
        const counts = await Promise.all(specs.map((s) => leadingCount(s.httpPort)));
        const total = counts.reduce((a, b) => a + b, 0);
        return total === queueIds.length && counts.every((c) => c <= share) ? counts : undefined;
      },
      120_000,
      250,
    );
    console.log(`  ${queueIds.length} queues on ${replicas} replica(s): leading ${spread.join(' / ')}`);
    const label = `replicated, ${queueIds.length} queues on ${replicas} replica${replicas === 1 ? '' : 's'} (R3)`;
    return await drive(label, round, services, queueIds[0]!, cluster.pids(), queueIds);
  } finally {
    await stopAll(services);
    removeReplicaDirs(specs);
    rmSync(queueDir, { recursive: true, force: true });
    for (const q of queueIds) await deleteQueueStreams(cluster, q);
  }
}

/**
 * What applying the log costs a replica that takes no requests: three replicas, the load sent only to one
 * that does not lead the queue. Per acknowledged request: the CPU of the replica taking the requests (request
 * path and its own apply), of the leader (apply and ticks) and of the replica that only follows (apply).
 */
async function applyPhase(cluster: BenchNatsCluster, round: number): Promise<ThroughputPhase> {
  const queueId = `bench.apply${round}`;
  const queueDir = throughputQueueFiles(queueId);
  const env = replicatedEnv(cluster.urls, THROUGHPUT_LEASE_MS, 'BENCH_COORD_APPLY');
  const specs = await replicaSpecs(`ap${round}`, 3, queueDir, env);
  const services: Child[] = [];
  try {
    for (const s of specs) services.push(await startReplica(s));
    for (const s of specs) await untilRunning(s.httpPort, queueId);
    const leader = await pollFor(
      'a leader',
      async () => {
        const summaries = await Promise.all(specs.map((s) => queueSummary(s.httpPort, queueId)));
        const i = summaries.findIndex((q) => q?.leading);
        return i >= 0 ? i : undefined;
      },
      30_000,
    );
    const [taker, follower] = [0, 1, 2].filter((i) => i !== leader) as [number, number];
    const phase = await drive(
      'replicated, 3 replicas, requests to one follower (R3)',
      round,
      services,
      queueId,
      cluster.pids(),
      undefined,
      [services[taker]!],
    );
    const us = (i: number) => {
      const cores = phase.cpu.perService?.[i];
      return cores === undefined || phase.okPerSec === 0 ? 'n/a' : ((cores / phase.okPerSec) * 1e6).toFixed(0);
    };
    console.log(
      `  cpu per acknowledged request (us): replica taking the requests ${us(taker)}, leader ${us(leader)}, replica only following ${us(follower)}`,
    );
    return phase;
  } finally {
    await stopAll(services);
    removeReplicaDirs(specs);
    rmSync(queueDir, { recursive: true, force: true });
    await deleteQueueStreams(cluster, queueId);
  }
}

/** How many queues the process at `httpPort` leads now (0 when it does not answer). */
async function leadingCount(httpPort: number): Promise<number> {
  try {
    const res = await fetch(`http://127.0.0.1:${httpPort}/admin/v1/queues`, { signal: AbortSignal.timeout(1_000) });
    const body = (await res.json()) as { queues: { leading: boolean }[] };
    return body.queues.filter((q) => q.leading).length;
  } catch {
    return 0;
  }
}

async function stopAll(services: Child[]): Promise<void> {
  await Promise.all(services.map((s) => s.stop()));
  for (const s of services) {
    const problems = errorLines(s);
    if (problems.length > 0) console.log(`  ${s.name} logged ${problems.length} error line(s), first: ${JSON.stringify(problems[0])}`);
  }
}

/** Deletes the phase's replication stream, so the next phase's cluster holds no leftover log. */
async function deleteQueueStreams(cluster: BenchNatsCluster, queueId: string): Promise<void> {
  const nc = await cluster.client();
  try {
    const jsm = await jetstreamManager(nc);
    for await (const info of jsm.streams.list()) {
      if (!(info.config.subjects ?? []).some((s) => s.endsWith(`.${queueId}`))) continue;
      console.log(`  ${info.config.name}: ${info.state.messages} log entries, ${(info.state.bytes / 2 ** 20).toFixed(1)} MiB`);
      await jsm.streams.delete(info.config.name);
    }
  } finally {
    await nc.close();
  }
}

// ---------------------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------------------
// Report

const cores = (x: number | undefined) => (x === undefined ? 'n/a' : x.toFixed(2));
const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const errorText = (e: Record<string, number>) => {
  const entries = Object.entries(e);
  return entries.length === 0 ? '0' : entries.map(([k, v]) => `${k}=${v}`).join(' ');
};
/** A percentile of each generator's latencies: one value, or the range over the replicas. */
function range(loads: LoadResult[], p: 'p50' | 'p99'): string {
  const xs = loads.map((l) => l.latencyMs[p]);
  const lo = Math.min(...xs);
  const hi = Math.max(...xs);
  return lo === hi || xs.length === 1 ? ms(lo) : `${ms(lo)}–${ms(hi)}`;
}
/** Nearest-rank percentile. */
function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

const ratioText = (p: ThroughputPhase, embedded: ThroughputPhase | undefined) =>
  embedded && embedded.okPerSec > 0 ? `${((p.okPerSec / embedded.okPerSec) * 100).toFixed(1)}%` : 'n/a';

/** Busy CPU of the machine not spent by this phase's services, nats-servers and load generators (other
 *  sessions on a shared machine, and this process). */
function otherCpu(p: ThroughputPhase): number | undefined {
  const { services, nats, clients, machine } = p.cpu;
  if (services === undefined || nats === undefined || machine === undefined) return undefined;
  return Math.max(0, machine - services - nats - clients);
}

function throughputTable(phases: ThroughputPhase[]): string {
  const embeddedOf = (round: number) => phases.find((p) => p.round === round && p.name.startsWith('embedded'));
  return table(
    [
      'round',
      'mode',
      'ok/s',
      'vs embedded',
      'p50 ms',
      'p99 ms',
      'errors',
      'cpu: services',
      'nats-servers',
      'load generators',
      'other processes',
    ],
    phases.map((p) => [
      String(p.round),
      p.name,
      p.okPerSec.toFixed(0),
      ratioText(p, embeddedOf(p.round)),
      range(p.loads, 'p50'),
      range(p.loads, 'p99'),
      errorText(p.errors),
      cores(p.cpu.services),
      cores(p.cpu.nats),
      cores(p.cpu.clients),
      cores(otherCpu(p)),
    ]),
  );
}

/** Each round's replicated throughput against one replica's, for one queue and for many. */
function scalingLines(phases: ThroughputPhase[]): string[] {
  const lines: string[] = [];
  for (const many of [false, true]) {
    const kind = phases.filter((p) => p.name.startsWith('replicated') && p.name.includes(' queues on ') === many);
    for (const p of kind) {
      const one = kind.find((o) => o.round === p.round && o.replicas === 1);
      if (!one || p.replicas === 1 || one.okPerSec === 0) continue;
      lines.push(`round ${p.round}: ${p.name}: ${(p.okPerSec / one.okPerSec).toFixed(2)}x one replica's ${one.okPerSec.toFixed(0)} ok/s`);
    }
  }
  return lines;
}

function failoverTable(results: FailoverResult[]): string {
  return table(
    [
      'LEADER_LEASE_MS',
      'kills',
      'kill -> match stored: p50 ms',
      'p99 ms',
      'max ms',
      'kill -> match made: p50 ms',
      'p99 ms',
      'max ms',
      'made p99 / lease',
      'no match within 10 leases',
      'rejoin p50 ms',
      'trickle created / retried / failed',
    ],
    results.map((r) => {
      const stored = r.samples.map((s) => s.toDeliveredMs);
      const made = r.samples.map((s) => s.toMadeMs);
      return [
        String(r.leaseMs),
        String(r.samples.length + r.missed),
        ms(percentile(stored, 0.5)),
        ms(percentile(stored, 0.99)),
        ms(Math.max(...stored)),
        ms(percentile(made, 0.5)),
        ms(percentile(made, 0.99)),
        ms(Math.max(...made)),
        (percentile(made, 0.99) / r.leaseMs).toFixed(2),
        String(r.missed),
        ms(
          percentile(
            r.samples.map((s) => s.rejoinMs),
            0.5,
          ),
        ),
        `${r.trickle.created} / ${r.trickle.retried} / ${r.trickle.failed}`,
      ];
    }),
  );
}

function catchUpTable(results: CatchUpResult[]): string {
  const at = (x: number | undefined) => (x === undefined ? 'n/a' : String(Math.round(x)));
  return table(
    [
      'active tickets',
      'checkpoint MB',
      'stored MB',
      'listening',
      'restored',
      'running',
      'rows built',
      'bench: build + encode ms',
      'bench: save ms',
      'error lines',
    ],
    results.map((r) => [
      String(r.tickets),
      (r.checkpointBytes / 1e6).toFixed(1),
      (r.storedBytes / 1e6).toFixed(1),
      at(r.listeningMs),
      at(r.restoredMs),
      at(r.runningMs),
      at(r.rowsMs),
      at(r.prepareMs),
      at(r.saveMs),
      String(r.errorLines),
    ]),
  );
}

async function main(): Promise<void> {
  assertBuildFresh(ROOT);
  const started = new Date();
  const info = machine();
  console.log(`replicated-mode benchmark, ${started.toISOString()}`);
  console.log(`machine: ${info.cpus} cpus (${info.model}), ${info.memory}, node ${info.node}, loadavg ${info.loadavg}`);
  console.log(
    `note: the three nats-server processes, every service and the load generators share these ${info.cpus} cores: the figures are of this whole, not of a deployment with a machine per process`,
  );
  const build = buildFingerprint(ROOT);
  console.log(`settings: ${JSON.stringify(settings)}`);
  console.log(`service build: dist/src sha256 ${build}\n`);
  if ((settings.phases.includes('throughput') || settings.phases.includes('queues')) && settings.client === 'native') ensureLoadgenBuilt();

  const cluster = await startNatsCluster(3);
  const throughput: ThroughputPhase[] = [];
  const failover: FailoverResult[] = [];
  const catchUp: CatchUpResult[] = [];
  try {
    if (settings.phases.includes('throughput')) {
      for (let round = 1; round <= settings.rounds; round++) {
        throughput.push(await embeddedPhase(round));
        for (const n of settings.replicaCounts) throughput.push(await replicatedPhase(cluster, n, round));
        console.log();
      }
    }
    if (settings.phases.includes('apply')) {
      for (let round = 1; round <= settings.rounds; round++) throughput.push(await applyPhase(cluster, round));
      console.log();
    }
    if (settings.phases.includes('queues')) {
      if (settings.client !== 'native') throw new Error('the queues phase needs the native load generator (BENCH_CLIENT=native)');
      for (let round = 1; round <= settings.rounds; round++) {
        for (const n of settings.queuesReplicaCounts) throughput.push(await queuesPhase(cluster, n, round));
        console.log();
      }
    }
    if (settings.phases.includes('failover')) {
      for (const leaseMs of settings.failoverLeasesMs) {
        console.log(`failover, LEADER_LEASE_MS=${leaseMs}, ${settings.failoverKills} kills ...`);
        failover.push(
          await runFailover(
            cluster,
            { leaseMs, kills: settings.failoverKills, rate: settings.failoverRate, tickMs: settings.failoverTickMs },
            (line) => console.log(line),
          ),
        );
      }
      console.log();
    }
    if (settings.phases.includes('catchup')) {
      for (const n of settings.catchUpTickets) {
        console.log(`catch-up from a checkpoint of ${n} tickets (+1 of the seeder) ...`);
        const r = await runCatchUp(cluster, n);
        console.log(
          `  ${r.tickets} tickets, checkpoint ${(r.checkpointBytes / 1e6).toFixed(1)} MB (${(r.storedBytes / 1e6).toFixed(1)} MB stored): running ${r.runningMs} ms after the process start (listening ${r.listeningMs ?? 'n/a'} ms, restored ${r.restoredMs ?? 'n/a'} ms)`,
        );
        catchUp.push(r);
      }
      console.log();
    }
  } finally {
    await cluster.dispose();
  }

  console.log(`summary (loadavg now ${machine().loadavg}; cpu in cores of ${info.cpus})`);
  if (throughput.length > 0) {
    console.log(
      `\nthroughput: closed loop, ${settings.concurrency} in flight in all over ${settings.connections} connection(s), ${settings.durationSecs}s measured after ${settings.warmupSecs}s, ${settings.client} load generator (one per replica); p50/p99 per generator, a range when several`,
    );
    console.log(throughputTable(throughput));
    for (const line of scalingLines(throughput)) console.log(line);
  }
  if (failover.length > 0) {
    console.log(
      `\nfailover: 3 replicas, 1v1 queue ticking every ${settings.failoverTickMs} ms, ${settings.failoverRate} tickets/s; kill -9 of the leader -> first match.created made after the kill, stored in ${'SVC_MATCH_OUTCOMES'}`,
    );
    console.log(failoverTable(failover));
  }
  if (catchUp.length > 0) {
    console.log(
      '\ncatch-up: one replica started against a queue whose newest checkpoint holds N active tickets (nothing after it in the log); ms after its process start',
    );
    console.log(catchUpTable(catchUp));
  }

  if (settings.jsonOut) {
    writeFileSync(
      settings.jsonOut,
      JSON.stringify({ started: started.toISOString(), machine: info, build, settings, throughput, failover, catchUp }, null, 2),
    );
    console.log(`\nraw results written to ${settings.jsonOut}`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error('benchmark crashed:', err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  },
);
