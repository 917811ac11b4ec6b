// npm run bench: the CreateTicket benchmark, in one run and one phase after the other.
//
//   0. (optional) tinybench micro-benchmarks of the in-process CreateTicket path
//   1. closed loop, 64 in flight over 4 connections, against the bare grpc-js server (bench/bare-server.ts)
//      (and, as a control, the fixed rate of step 3 against the bare server: the floor this machine shows;
//      and against a bare server that answers each call BENCH_CONTROL_ANSWER_AFTER_MS later, from a timer:
//      the floor for a handler that waits about as long as the real one waits for its durable write; and,
//      with BENCH_CONTROL_HTTP2, Node's own http2 module serving CreateTicket without grpc-js, answering at
//      once and after the same wait: whether the cost of waiting comes from grpc-js or from Node's HTTP/2)
//   2. the same closed loop against the real service (dist/src/cli.js serve, temp data dir, the repo's
//      queues/) -> target: real throughput >= 80% of bare
//   3. fixed rate 3,000 CreateTicket/s against a fresh real service -> target: p99 < 10 ms
//
// Steps 1-3 run once per load generator (BENCH_CLIENT): the Node one (create-ticket-load.ts, in this
// process; it costs ~130-200 us of CPU per request on the server's 2 cores and stalls for tens of ms, so its
// p99 has a floor of ~20 ms even against the bare server) and the native one (bench/loadgen, Rust, a child
// process on one thread, built on first use by native-load.ts; its p99 is about the server). Phases are
// labelled with their client, e.g. "bare server, closed loop [native client]".
//
// Every server is a child process. Settings from the environment:
//   BENCH_DURATION_SECS (10)  measured seconds per phase     BENCH_WARMUP_SECS (2)  warm-up per phase
//   BENCH_CONCURRENCY (64)    BENCH_CONNECTIONS (4)          BENCH_RATE (3000)      BENCH_MAX_IN_FLIGHT (512)
//   BENCH_QUEUE (eu.ranked)   BENCH_MICRO (1; 0 skips it)    BENCH_JSON_OUT (file for the raw results)
//   BENCH_CONTROL (1; 0 skips the control phases: the fixed rate against the bare server)
//   BENCH_CONTROL_ANSWER_AFTER_MS (2; 0 skips that control phase)
//   BENCH_CONTROL_HTTP2 (1; 0 skips the two control phases against bare-server.js --http2-only)
//   BENCH_INPUTS (realistic: the service's ticks match about half the tickets; unmatchable: none ever match)
//   BENCH_CPU_PROF (a directory: the real service runs with --cpu-prof and writes its profiles there)
//   BENCH_SERVICE_NODE_ARGS (Node or V8 flags for the service alone, e.g. --max-semi-space-size=32)
//   BENCH_CLIENT (both: node, then native; node: only create-ticket-load.ts; native: only bench/loadgen)
// Exits non-zero only when something crashes; missed targets are printed as MISS.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildFingerprint, envNumber, machine, machineBusySecs, processCpuSecs, table } from './bench-report.js';
import { assertBuildFresh } from './build-freshness.js';
import { serviceNodeArgs, spawnServer, type Child } from './child-process.js';
import { formatResult, runLoad, type LoadHooks, type LoadOptions, type LoadResult } from './create-ticket-load.js';
import { runMicro, type MicroRow } from './micro.js';
import { ensureLoadgenBuilt, runNativeLoad } from './native-load.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CLI = join(ROOT, 'dist/src/cli.js');
const BARE = join(ROOT, 'dist/bench/bare-server.js');
const QUEUES = join(ROOT, 'queues');

type ClientKind = 'node' | 'native';

function envClients(): ClientKind[] {
  const raw = process.env.BENCH_CLIENT || 'both';
  if (raw === 'both') return ['node', 'native'];
  if (raw === 'node' || raw === 'native') return [raw];
  throw new Error(`BENCH_CLIENT must be node, native or both, got "${raw}"`);
}

const LOAD: Record<ClientKind, (partial: Partial<LoadOptions>, hooks: LoadHooks) => Promise<LoadResult>> = {
  node: runLoad,
  native: runNativeLoad,
};

const settings = {
  durationSecs: envNumber('BENCH_DURATION_SECS', 10),
  warmupSecs: envNumber('BENCH_WARMUP_SECS', 2),
  concurrency: envNumber('BENCH_CONCURRENCY', 64),
  connections: envNumber('BENCH_CONNECTIONS', 4),
  rate: envNumber('BENCH_RATE', 3000),
  maxInFlight: envNumber('BENCH_MAX_IN_FLIGHT', 512),
  queueId: process.env.BENCH_QUEUE || 'eu.ranked',
  inputs: process.env.BENCH_INPUTS === 'unmatchable' ? ('unmatchable' as const) : ('realistic' as const),
  micro: process.env.BENCH_MICRO !== '0',
  control: process.env.BENCH_CONTROL !== '0',
  controlAnswerAfterMs: envNumber('BENCH_CONTROL_ANSWER_AFTER_MS', 2),
  controlHttp2: process.env.BENCH_CONTROL_HTTP2 !== '0',
  jsonOut: process.env.BENCH_JSON_OUT || undefined,
  cpuProfDir: process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : undefined,
  clients: envClients(),
};

const TARGET_RATIO = 0.8;
const TARGET_P99_MS = 10;

/** Milliseconds the busiest block device spent doing I/O (io_ticks), by device; undefined off Linux. */
function diskIoTicks(): Map<string, number> | undefined {
  try {
    const out = new Map<string, number>();
    for (const line of readFileSync('/proc/diskstats', 'utf8').split('\n')) {
      const f = line.trim().split(/\s+/);
      const name = f[2];
      if (!name || /^(loop|ram|zram)/.test(name)) continue;
      out.set(name, Number(f[12]));
    }
    return out;
  } catch {
    return undefined;
  }
}

function diskBusy(start: Map<string, number> | undefined, end: Map<string, number> | undefined, secs: number): number | undefined {
  if (!start || !end) return undefined;
  let busiest = 0;
  for (const [name, ticks] of end) busiest = Math.max(busiest, ticks - (start.get(name) ?? ticks));
  return busiest / 1000 / secs;
}

interface Phase {
  name: string;
  /** The load generator: create-ticket-load.ts in this process, or bench/loadgen. */
  client: ClientKind;
  result: LoadResult;
  /** Server process CPU over the measured window, fraction of one core. */
  serverCpu: number | undefined;
  /** The server's main (JavaScript) thread alone: near 100% means the event loop is the bottleneck. */
  serverMainCpu: number | undefined;
  /** CPU used by everything else on the machine (not this process, not the server) over the window, in cores. */
  otherCpu: number | undefined;
  /** Fraction of the window the busiest disk was doing I/O (fsync latency depends on it). */
  diskBusy: number | undefined;
  note?: string;
}

async function loadPhase(client: ClientKind, phaseName: string, server: Child, options: Partial<LoadOptions>): Promise<Phase> {
  const name = `${phaseName} [${client} client]`;
  let cpuStart: number | undefined;
  let cpuEnd: number | undefined;
  let mainStart: number | undefined;
  let mainEnd: number | undefined;
  let busyStart: number | undefined;
  let busyEnd: number | undefined;
  let diskStart: Map<string, number> | undefined;
  let diskEnd: Map<string, number> | undefined;
  const pid = server.process.pid;
  const result = await LOAD[client](
    {
      target: `127.0.0.1:${server.port}`,
      queueId: settings.queueId,
      durationSecs: settings.durationSecs,
      warmupSecs: settings.warmupSecs,
      inputs: settings.inputs,
      ...options,
    },
    {
      onMeasureStart: () => {
        cpuStart = processCpuSecs(pid);
        mainStart = processCpuSecs(pid, true);
        busyStart = machineBusySecs();
        diskStart = diskIoTicks();
      },
      onMeasureEnd: () => {
        cpuEnd = processCpuSecs(pid);
        mainEnd = processCpuSecs(pid, true);
        busyEnd = machineBusySecs();
        diskEnd = diskIoTicks();
      },
    },
  );
  const secs = settings.durationSecs;
  const serverCpu = cpuStart !== undefined && cpuEnd !== undefined ? (cpuEnd - cpuStart) / secs : undefined;
  const otherCpu =
    busyStart !== undefined && busyEnd !== undefined && serverCpu !== undefined
      ? Math.max(0, (busyEnd - busyStart) / secs - serverCpu - result.clientCpu)
      : undefined;
  const serverMainCpu = mainStart !== undefined && mainEnd !== undefined ? (mainEnd - mainStart) / secs : undefined;
  const phase: Phase = { name, client, result, serverCpu, serverMainCpu, otherCpu, diskBusy: diskBusy(diskStart, diskEnd, secs) };
  console.log(formatResult(name, result));
  console.log(
    `  server cpu ${pct(serverCpu)} of a core (main thread ${pct(serverMainCpu)}; ${perReq(serverCpu, result.throughput)} us per ok request); other processes on the machine ${pct(otherCpu)} of a core; disk busy ${pct(phase.diskBusy)}`,
  );
  return phase;
}

async function withRealService<T>(label: string, body: (service: Child) => Promise<T>): Promise<T> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mm-bench-data-'));
  const nodeArgs = serviceNodeArgs(`service-${label}`);
  const service = await spawnServer(
    'real service',
    [CLI, 'serve', '--config', QUEUES, '--data', dataDir],
    { LOG_LEVEL: 'info' },
    { nodeArgs },
  );
  try {
    return await body(service);
  } finally {
    const code = await service.stop();
    const problems = service.lines.filter((l) => typeof l.level === 'number' && l.level >= 50);
    if (problems.length > 0) console.log(`  service logged ${problems.length} error line(s), first: ${JSON.stringify(problems[0])}`);
    if (code !== 0) console.log(`  service exited with code ${code}; stderr: ${service.stderr().slice(-2000)}`);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Report

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
const pct = (x: number | undefined) => (x === undefined ? 'n/a' : `${(x * 100).toFixed(0)}%`);
/** CPU microseconds per ok request, from a CPU fraction (of one core) and a rate. */
const perReq = (cpu: number | undefined, perSec: number) => (cpu === undefined || perSec <= 0 ? 'n/a' : ((cpu / perSec) * 1e6).toFixed(0));

interface ClientRun {
  client: ClientKind;
  bare: Phase;
  bareFixed: Phase | undefined;
  /** The fixed-rate control phases after the bare server's own: servers that wait, and plain Node http2. */
  controls: Phase[];
  real: Phase;
  fixed: Phase;
}

/** Steps 1-3 with one load generator. */
async function runClient(client: ClientKind): Promise<ClientRun> {
  const closed: Partial<LoadOptions> = { mode: 'closed', concurrency: settings.concurrency, connections: settings.connections };
  const fixed: Partial<LoadOptions> = {
    mode: 'fixed',
    rate: settings.rate,
    maxInFlight: settings.maxInFlight,
    connections: settings.connections,
  };

  // (a) bare vs real, closed loop. The bare server also gets the fixed rate, as a control: what p99 this
  // machine and this client can show at all, with a server that does nothing.
  const bare = await spawnServer('bare server', [BARE], {});
  let barePhase: Phase;
  let bareFixedPhase: Phase | undefined;
  try {
    barePhase = await loadPhase(client, 'bare server, closed loop', bare, closed);
    if (settings.control) {
      console.log();
      bareFixedPhase = await loadPhase(client, 'bare server, fixed rate (control)', bare, fixed);
    }
  } finally {
    await bare.stop();
  }
  const bareStats = bare.lines.find((l) => l.msg === 'stopped');
  if (bareStats) {
    const phaseCount = bareFixedPhase ? 2 : 1;
    barePhase.note = `bare server saw ${String(bareStats.connections)} TCP connection(s) over ${phaseCount} phase(s) of ${settings.connections} connection(s) each`;
    console.log(`  ${barePhase.note}`);
  }
  console.log();

  // The same fixed rate against a bare server whose answers wait on a timer: what waiting alone costs the
  // tail. Then plain Node http2 (no grpc-js), at once and waiting: where that cost comes from.
  const controls: Phase[] = [];
  const wait = settings.controlAnswerAfterMs;
  const controlServers: [string, string[]][] = [];
  if (settings.control && wait > 0) controlServers.push([`bare server answering after ${wait} ms`, ['--answer-after-ms', String(wait)]]);
  if (settings.control && settings.controlHttp2) {
    controlServers.push(['plain Node http2 server', ['--http2-only']]);
    if (wait > 0)
      controlServers.push([`plain Node http2 server answering after ${wait} ms`, ['--http2-only', '--answer-after-ms', String(wait)]]);
  }
  for (const [label, args] of controlServers) {
    const server = await spawnServer(label, [BARE, ...args], {});
    try {
      controls.push(await loadPhase(client, `${label}, fixed rate (control)`, server, fixed));
    } finally {
      await server.stop();
    }
    console.log();
  }

  const realPhase = await withRealService(`closed-${client}`, (s) => loadPhase(client, 'real service, closed loop', s, closed));
  console.log();

  // (b) fixed rate against a fresh real service
  const fixedPhase = await withRealService(`fixed-${client}`, (s) => loadPhase(client, 'real service, fixed rate', s, fixed));
  console.log();
  return { client, bare: barePhase, bareFixed: bareFixedPhase, controls, real: realPhase, fixed: fixedPhase };
}

async function main(): Promise<void> {
  assertBuildFresh(ROOT); // it spawns dist/src/cli.js: refuse to measure an old build
  const started = new Date();
  const info = machine();
  console.log(`CreateTicket benchmark, ${started.toISOString()}`);
  console.log(`machine: ${info.cpus} cpus (${info.model}), ${info.memory}, node ${info.node}, loadavg ${info.loadavg}`);
  const build = buildFingerprint(ROOT);
  console.log(`settings: ${JSON.stringify(settings)}`);
  console.log(`service build: dist/src sha256 ${build}\n`);

  let micro: MicroRow[] = [];
  if (settings.micro) {
    console.log('micro-benchmarks (tinybench, in process) ...');
    try {
      micro = await runMicro(QUEUES, settings.queueId);
      console.log(
        table(
          ['task', 'mean us', 'p50 us', 'p99 us', 'ops/s', 'samples'],
          micro.map((m) =>
            m.error === undefined
              ? [m.task, m.meanUs.toFixed(1), m.p50Us.toFixed(1), m.p99Us.toFixed(1), m.opsPerSec.toFixed(0), String(m.samples)]
              : [m.task, `failed: ${m.error}`, '', '', '', ''],
          ),
        ),
      );
    } catch (err) {
      // The micro-benchmarks reach into the service's internals; if those changed, say so and go on.
      console.log(`micro-benchmarks skipped: ${err instanceof Error ? err.message : String(err)}`);
    }
    console.log();
  }

  if (settings.clients.includes('native')) ensureLoadgenBuilt(); // before any server runs: cargo is heavy

  const runs: ClientRun[] = [];
  for (const client of settings.clients) runs.push(await runClient(client));

  // Summary
  const phases = runs.flatMap((r) => [r.bare, ...(r.bareFixed ? [r.bareFixed] : []), ...r.controls, r.real, r.fixed]);
  const errorText = (r: LoadResult) => {
    const e = Object.entries(r.errors);
    return e.length === 0 ? '0' : e.map(([k, v]) => `${k}=${v}`).join(' ');
  };
  console.log(
    `summary (${settings.durationSecs}s measured per phase after ${settings.warmupSecs}s warm-up; cpu in % of one core, ${info.cpus} cores in all; loadavg now ${machine().loadavg})`,
  );
  console.log(
    table(
      [
        'phase',
        'sent',
        'ok',
        'errors',
        'ok/s',
        'p50 ms',
        'p90 ms',
        'p99 ms',
        'max ms',
        'server cpu',
        'server main thread',
        'server us/req',
        'client cpu',
        'client us/req',
        'other cpu',
        'disk busy',
        'client stall max ms',
      ],
      phases.map((p) => {
        const r = p.result;
        const l = r.latencyMs;
        return [
          p.name,
          String(r.sent),
          String(r.ok),
          errorText(r),
          r.throughput.toFixed(0),
          ms(l.p50),
          ms(l.p90),
          ms(l.p99),
          ms(l.max),
          pct(p.serverCpu),
          pct(p.serverMainCpu),
          perReq(p.serverCpu, r.throughput),
          pct(r.clientCpu),
          perReq(r.clientCpu, r.throughput),
          pct(p.otherCpu),
          pct(p.diskBusy),
          ms(r.clientLoopDelayMs.max),
        ];
      }),
    ),
  );
  const ratios: Partial<Record<ClientKind, number>> = {};
  const targetRows = runs.flatMap(({ client, bare, real, fixed }) => {
    const ratio = real.result.throughput / bare.result.throughput;
    ratios[client] = ratio;
    const fixedP99 = fixed.result.latencyMs.p99;
    // The fixed-rate target only counts if the rate was actually offered and answered.
    const fixedClean = Object.keys(fixed.result.errors).length === 0 && fixed.result.unsent === 0;
    return [
      [
        `real >= ${TARGET_RATIO * 100}% of bare (closed loop, ${settings.concurrency} in flight / ${settings.connections} conns) [${client} client]`,
        `${real.result.throughput.toFixed(0)} / ${bare.result.throughput.toFixed(0)} ok/s = ${(ratio * 100).toFixed(1)}%`,
        ratio >= TARGET_RATIO ? 'PASS' : 'MISS',
      ],
      [
        `p99 < ${TARGET_P99_MS} ms at ${settings.rate} CreateTicket/s [${client} client]`,
        `p50 ${ms(fixed.result.latencyMs.p50)} ms, p99 ${ms(fixedP99)} ms` +
          (fixedClean ? '' : ` (errors ${errorText(fixed.result)}, unsent ${fixed.result.unsent})`),
        fixedP99 < TARGET_P99_MS && fixedClean ? 'PASS' : 'MISS',
      ],
    ];
  });
  // `ratio`: the first client's (node's when it ran), as in earlier results files; `ratios`: by client.
  const ratio = ratios[settings.clients[0]!];
  console.log();
  console.log(table(['target', 'measured', 'result'], targetRows));

  if (settings.jsonOut) {
    writeFileSync(
      settings.jsonOut,
      JSON.stringify({ started: started.toISOString(), machine: info, build, settings, micro, phases, ratio, ratios }, null, 2),
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
