// Outcome delivery at full load (issue 20, part 1): does each push sink keep up with the match rate?
//
// Each phase starts the service(s), drives CreateTicket closed loop at full speed for BENCH_DURATION_SECS on
// a queue that matches (eu.ranked's file, tick every 100 ms, so its ticks match about half the tickets),
// then stops the load and waits until every recorded outcome is delivered. It prints, side by side:
//   - the match rate (matches committed per second) and the outcomes recorded per second;
//   - the outcomes the sink acknowledged per second over the same window;
//   - the backlog (recorded, not yet delivered) at the end of the load, and how long it took to drain;
//   - the delivery lag, recorded to acknowledged, p50 and p99 over the window (histogram_quantile over the
//     service's matchmaker_outcome_delivery_lag_seconds buckets, interpolated within a bucket as Prometheus
//     does: read "p99 0.4" as "below the 0.5 s bucket's bound").
//
// Phases (BENCH_DELIVERY_PHASES): embedded-broker (one embedded service publishing to a three-node cluster,
// R3 outcome stream), embedded-webhook (a local receiver answering 204; BENCH_WEBHOOK_BATCH outcomes per
// request), replicated-broker (BENCH_DELIVERY_REPLICAS replicas on the cluster, R3 streams, load split).
//
// Settings: BENCH_DURATION_SECS (15) BENCH_WARMUP_SECS (3) BENCH_CONCURRENCY (64) BENCH_CONNECTIONS (4)
//           BENCH_WEBHOOK_BATCH (100) BENCH_DELIVERY_REPLICAS (3) BENCH_DRAIN_TIMEOUT_SECS (120)
import { readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { join, resolve } from 'node:path';
import { buildFingerprint, envNumber, machine, table } from './bench-report.js';
import { assertBuildFresh } from './build-freshness.js';
import { spawnServer, type Child } from './child-process.js';
import { freePort, startNatsCluster, type BenchNatsCluster } from './nats-cluster.js';
import { runNativeLoad } from './native-load.js';
import {
  CLI,
  errorLines,
  removeReplicaDirs,
  replicaSpecs,
  replicatedEnv,
  sleep,
  startReplica,
  untilRunning,
  writeQueueDir,
} from './replica-processes.js';

const ROOT = resolve(import.meta.dirname, '../..');

const settings = {
  phases: (process.env.BENCH_DELIVERY_PHASES || 'embedded-broker,embedded-webhook,replicated-broker').split(',').map((s) => s.trim()),
  durationSecs: envNumber('BENCH_DURATION_SECS', 15),
  warmupSecs: envNumber('BENCH_WARMUP_SECS', 3),
  concurrency: envNumber('BENCH_CONCURRENCY', 64),
  connections: envNumber('BENCH_CONNECTIONS', 4),
  webhookBatch: envNumber('BENCH_WEBHOOK_BATCH', 100),
  replicas: envNumber('BENCH_DELIVERY_REPLICAS', 3),
  drainTimeoutSecs: envNumber('BENCH_DRAIN_TIMEOUT_SECS', 120),
};

const LAG_METRIC = 'matchmaker_outcome_delivery_lag_seconds';

/** What one service says at one moment: its metrics' samples and its queue's delivery position. */
interface Reading {
  atMs: number;
  matches: number;
  /** Cumulative lag histogram: upper bound -> count. */
  lagBuckets: Map<number, number>;
  delivered: bigint;
  recorded: bigint;
}

interface DeliveryResult {
  phase: string;
  sink: string;
  createsPerSec: number;
  matchesPerSec: number;
  recordedPerSec: number;
  deliveredPerSec: number;
  backlogAtEnd: number;
  drainSecs: number;
  lagP50: number;
  lagP99: number;
  lagMaxBucket: number;
}

function sampleValue(text: string, name: string, queueId: string, extra = ''): number[] {
  const out: number[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) || !line.includes(`queue_id="${queueId}"`) || (extra && !line.includes(extra))) continue;
    out.push(Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return out;
}

async function read(httpPort: number, queueId: string): Promise<Reading> {
  const [metrics, deliveries] = await Promise.all([
    fetch(`http://127.0.0.1:${httpPort}/metrics`).then((r) => r.text()),
    fetch(`http://127.0.0.1:${httpPort}/admin/v1/deliveries`).then(
      (r) => r.json() as Promise<{ deliveries: { queueId: string; deliveredThrough: string; lastRecorded: string }[] }>,
    ),
  ]);
  const lagBuckets = new Map<number, number>();
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${LAG_METRIC}_bucket{`) || !line.includes(`queue_id="${queueId}"`)) continue;
    const le = /le="([^"]+)"/.exec(line)![1]!;
    lagBuckets.set(le === '+Inf' ? Infinity : Number(le), Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  const d = deliveries.deliveries.find((x) => x.queueId === queueId);
  return {
    atMs: Date.now(),
    matches: sampleValue(metrics, 'matchmaker_matches_total', queueId).reduce((a, b) => a + b, 0),
    lagBuckets,
    delivered: BigInt(d?.deliveredThrough ?? '0'),
    recorded: BigInt(d?.lastRecorded ?? '0'),
  };
}

/** Prometheus' histogram_quantile over the difference of two cumulative histograms. */
function quantile(q: number, start: Map<number, number>, end: Map<number, number>): number {
  const bounds = [...end.keys()].sort((a, b) => a - b);
  const counts = bounds.map((b) => (end.get(b) ?? 0) - (start.get(b) ?? 0));
  const total = counts[counts.length - 1] ?? 0;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  for (let i = 0; i < bounds.length; i++) {
    if (counts[i]! < rank) continue;
    const upper = bounds[i]!;
    const lower = i === 0 ? 0 : bounds[i - 1]!;
    if (upper === Infinity) return lower;
    const below = i === 0 ? 0 : counts[i - 1]!;
    return lower + ((upper - lower) * (rank - below)) / Math.max(1, counts[i]! - below);
  }
  return Number.NaN;
}

/** The highest bucket bound that received an outcome in the window. */
function maxBucket(start: Map<number, number>, end: Map<number, number>): number {
  const bounds = [...end.keys()].sort((a, b) => a - b);
  let previous = 0;
  let highest = 0;
  for (const b of bounds) {
    const count = (end.get(b) ?? 0) - (start.get(b) ?? 0);
    if (count > previous) highest = b;
    previous = count;
  }
  return highest;
}

function queueFile(queueId: string, outcomes: string): string {
  const file = readFileSync(join(ROOT, 'queues/eu.ranked.yaml'), 'utf8')
    .replace(/tick_interval_ms: \d+/, 'tick_interval_ms: 100')
    .replace(/ {2}outcomes:\n {4}sink: websocket\n/, `  outcomes:\n${outcomes}`);
  if (!file.includes(outcomes)) throw new Error('queues/eu.ranked.yaml: its outcomes block is not the expected `sink: websocket`');
  return writeQueueDir({ [queueId]: file });
}

/** Drives the services, reading the leader (`readFrom`) at the window's start and end, then waits for the drain. */
async function measure(phase: string, sink: string, services: Child[], ports: number[], queueId: string): Promise<DeliveryResult> {
  const readAll = async () => Promise.all(ports.map((p) => read(p, queueId)));
  // The leader's reading: the one whose delivery position moves (only it delivers) and counts the matches.
  const leaderOf = (rs: Reading[]) => rs.reduce((a, b) => (b.matches > a.matches || b.delivered > a.delivered ? b : a));
  let start: Reading[] = [];
  let end: Reading[] = [];
  const starts: Promise<void>[] = [];
  const ends: Promise<void>[] = [];
  const loads = await Promise.all(
    services.map((s, i) =>
      runNativeLoad(
        {
          target: `127.0.0.1:${s.port}`,
          queueId,
          mode: 'closed',
          concurrency: Math.max(1, Math.round(settings.concurrency / services.length)),
          connections: Math.max(1, Math.round(settings.connections / services.length)),
          durationSecs: settings.durationSecs,
          warmupSecs: settings.warmupSecs,
          inputs: 'realistic',
        },
        i === 0
          ? {
              onMeasureStart: () => void starts.push(readAll().then((r) => void (start = r))),
              onMeasureEnd: () => void ends.push(readAll().then((r) => void (end = r))),
            }
          : {},
      ),
    ),
  );
  await Promise.all([...starts, ...ends]);
  const s = leaderOf(start);
  const e = leaderOf(end);
  const secs = (e.atMs - s.atMs) / 1000;
  const drainFrom = Date.now();
  let drained = e;
  for (;;) {
    drained = leaderOf(await readAll());
    if (drained.delivered >= drained.recorded) break;
    if (Date.now() - drainFrom > settings.drainTimeoutSecs * 1000) break;
    await sleep(100);
  }
  const result: DeliveryResult = {
    phase,
    sink,
    createsPerSec: loads.reduce((a, l) => a + l.throughput, 0),
    matchesPerSec: (e.matches - s.matches) / secs,
    recordedPerSec: Number(e.recorded - s.recorded) / secs,
    deliveredPerSec: Number(e.delivered - s.delivered) / secs,
    backlogAtEnd: Number(e.recorded - e.delivered),
    drainSecs: drained.delivered >= drained.recorded ? (Date.now() - drainFrom) / 1000 : Number.NaN,
    lagP50: quantile(0.5, s.lagBuckets, drained.lagBuckets),
    lagP99: quantile(0.99, s.lagBuckets, drained.lagBuckets),
    lagMaxBucket: maxBucket(s.lagBuckets, drained.lagBuckets),
  };
  console.log(
    `${phase}: ${result.createsPerSec.toFixed(0)} creates/s, ${result.matchesPerSec.toFixed(0)} matches/s, ${result.recordedPerSec.toFixed(0)} outcomes recorded/s, ${result.deliveredPerSec.toFixed(0)} delivered/s; backlog ${result.backlogAtEnd}, drained in ${result.drainSecs.toFixed(1)} s; lag p50 ${result.lagP50.toFixed(3)} s, p99 ${result.lagP99.toFixed(3)} s (highest bucket ${result.lagMaxBucket} s)`,
  );
  for (const svc of services) {
    const problems = errorLines(svc);
    if (problems.length > 0) console.log(`  ${svc.name} logged ${problems.length} error line(s), first: ${JSON.stringify(problems[0])}`);
  }
  return result;
}

async function embeddedPhase(cluster: BenchNatsCluster, sink: 'broker' | 'webhook'): Promise<DeliveryResult> {
  const queueId = `bench.delivery.${sink}`;
  let receiver: http.Server | undefined;
  let outcomes = '    sink: broker\n';
  if (sink === 'webhook') {
    const port = await freePort();
    receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((r) => receiver!.listen(port, '127.0.0.1', r));
    outcomes = `    sink: webhook\n    webhook:\n      url: http://127.0.0.1:${port}/outcomes\n      secret: bench-secret\n      max_batch_size: ${settings.webhookBatch}\n`;
  }
  const queueDir = queueFile(queueId, outcomes);
  const [spec] = await replicaSpecs('embedded', 1, queueDir, {});
  const service = await spawnServer(`embedded service (${sink})`, [CLI, 'serve', '--config', queueDir, '--data', spec!.dataDir], {
    LOG_LEVEL: 'info',
    BROKER_URL: cluster.urls,
    BROKER_STREAM_REPLICAS: '3',
    GRPC_PORT: String(spec!.grpcPort),
    HTTP_PORT: String(spec!.httpPort),
  });
  try {
    const label = sink === 'webhook' ? `embedded, webhook (max_batch_size ${settings.webhookBatch})` : 'embedded, broker (R3 stream)';
    return await measure(label, sink, [service], [spec!.httpPort], queueId);
  } finally {
    await service.stop();
    removeReplicaDirs([spec!]);
    rmSync(queueDir, { recursive: true, force: true });
    receiver?.close();
  }
}

async function replicatedPhase(cluster: BenchNatsCluster): Promise<DeliveryResult> {
  const queueId = 'bench.delivery.replicated';
  const queueDir = queueFile(queueId, '    sink: broker\n');
  const specs = await replicaSpecs('dl', settings.replicas, queueDir, replicatedEnv(cluster.urls, 6000, 'BENCH_COORD_DELIVERY'));
  const services: Child[] = [];
  try {
    for (const s of specs) services.push(await startReplica(s));
    for (const s of specs) await untilRunning(s.httpPort, queueId);
    return await measure(
      `replicated, ${settings.replicas} replicas, broker (R3)`,
      'broker',
      services,
      specs.map((s) => s.httpPort),
      queueId,
    );
  } finally {
    await Promise.all(services.map((s) => s.stop()));
    removeReplicaDirs(specs);
    rmSync(queueDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  assertBuildFresh(ROOT);
  const cluster = await startNatsCluster(3);
  const results: DeliveryResult[] = [];
  try {
    for (const phase of settings.phases) {
      if (phase === 'embedded-broker') results.push(await embeddedPhase(cluster, 'broker'));
      else if (phase === 'embedded-webhook') results.push(await embeddedPhase(cluster, 'webhook'));
      else if (phase === 'replicated-broker') results.push(await replicatedPhase(cluster));
      else throw new Error(`BENCH_DELIVERY_PHASES: unknown phase "${phase}"`);
    }
  } finally {
    await cluster.dispose();
  }
  const f = (x: number, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
  const m = machine();
  console.log(
    `\n## Outcome delivery at full load\n\n${m.cpus} cpus (${m.model}), ${m.memory}, node ${m.node}, loadavg ${m.loadavg}; build ${buildFingerprint(ROOT)}\n`,
  );
  console.log(
    `Closed loop, ${settings.concurrency} in flight over ${settings.connections} connections, ${settings.durationSecs} s measured after ${settings.warmupSecs} s; lag from the service's histogram.\n`,
  );
  console.log(
    table(
      [
        'phase',
        'creates/s',
        'matches/s',
        'recorded/s',
        'delivered/s',
        'backlog at end',
        'drain s',
        'lag p50 s',
        'lag p99 s',
        'highest lag bucket s',
      ],
      results.map((r) => [
        r.phase,
        f(r.createsPerSec),
        f(r.matchesPerSec),
        f(r.recordedPerSec),
        f(r.deliveredPerSec),
        String(r.backlogAtEnd),
        f(r.drainSecs, 1),
        f(r.lagP50, 3),
        f(r.lagP99, 3),
        String(r.lagMaxBucket),
      ]),
    ),
  );
}

await main();
