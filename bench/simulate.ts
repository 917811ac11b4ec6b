// Matchmaking simulator: runs the real native engine in-process (TicketPool + TickRunner) on a simulated
// clock against a synthetic player population, side by side with a naive first-come-first-served baseline
// fed the same arrivals, and writes an HTML report with charts. Model, flags and a sample run:
// bench/SIMULATOR.md.
//
//   node dist/bench/simulate.js [--rate 50] [--duration-secs 900] [--tick-ms 1000] [--seed 1]
//                               [--queue queues/eu.ranked.yaml] [--require-host] [--json]
//                               [--report-dir simulation-report] [--sweep max_skill_spread=1,1.5,2,3,4]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { formatPath, queueConfigSchema, queueFileSchema, type QueueConfig } from '../src/config/queue-config.js';
import { engineVersion } from '../src/engine/native.js';
import { runCharts, sweepChart } from './simulator/charts.js';
import { type ReportSection, writeReport } from './simulator/html-report.js';
import { MEAN_PARTY_SIZE, MODEL, Population } from './simulator/population.js';
import { formatComparison, formatSegments, formatSweep } from './simulator/report.js';
import { runSystems } from './simulator/run.js';
import { parseSweep, type Sweep, SWEEP_KEYS, withSetting } from './simulator/sweep.js';
import { BaselineSystem, EngineSystem } from './simulator/systems.js';

const USAGE = `Usage: node dist/bench/simulate.js [options]

  --rate N            players arriving per second (Poisson, in parties)   [50]
  --duration-secs N   simulated seconds of arrivals and ticks              [900]
  --tick-ms N         simulated ms between ticks        [queue tick_interval_ms: 1000]
  --seed N            seeds the population and the engine's tie-breaks     [1]
  --queue FILE        a queue file (queues/*.yaml format) instead of the built-in 5v5 queue
  --require-host      set require_host: true on every ruleset (latency then steers the search)
  --json              print the results as JSON on stdout (the tables go to stderr)
  --report-dir DIR    where the HTML report (index.html) and its SVG charts go  [simulation-report]
  --sweep KEY=V1,V2,...  also run the engine once per value of KEY on the same arrivals and chart
                      wait against quality; KEY: ${SWEEP_KEYS.join(', ')}
  --help              this text`;

/** The built-in queue; every key it leaves out takes its default from queueConfigSchema. */
const DEFAULT_QUEUE = {
  tick_interval_ms: 1000,
  ticket_ttl_secs: 600,
  engine: {
    mmr_normalization_ref: 0.1,
    default_latency_ms: 150,
    attribute_filters: [{ name: 'game_mode', mode: 'overlap' }],
  },
  rulesets: [
    {
      id: '5v5',
      teams: 2,
      team_size: 5,
      max_latency_ms: 80,
      relaxation: [
        { after_wait_secs: 30, max_skill_spread: 3.0, max_latency_ms: 100 },
        { after_wait_secs: 90, max_skill_spread: 5.0, max_latency_ms: 140 },
      ],
    },
  ],
};

function fail(message: string): never {
  process.stderr.write(`${message}\n\n${USAGE}\n`);
  process.exit(2);
}

function numberFlag(raw: string | undefined, name: string, fallback: number, check: (n: number) => boolean, what: string): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || !check(n)) fail(`--${name} must be ${what}, got "${raw}"`);
  return n;
}

function loadQueue(path: string | undefined): QueueConfig {
  if (path === undefined) return queueConfigSchema.parse(DEFAULT_QUEUE);
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    fail(`${path}: ${(err as Error).message}`);
  }
  const parsed = queueFileSchema.safeParse(doc);
  if (!parsed.success) {
    fail(`${path}: ${parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`).join('; ')}`);
  }
  return parsed.data.config;
}

function describeQueue(config: QueueConfig): string[] {
  const e = config.engine;
  const filters = e.attribute_filters.map((f) => `${f.name} (${f.mode})`).join(', ') || 'none';
  const lines = [
    `engine: mmr_normalization_ref ${e.mmr_normalization_ref}, party_synergy_bonus ${e.party_synergy_bonus}, default_latency_ms ${e.default_latency_ms}, filters: ${filters}; ticket_ttl_secs ${config.ticket_ttl_secs}`,
  ];
  for (const r of config.rulesets) {
    const relax = r.relaxation.map((s) => `${s.after_wait_secs} s -> spread ${s.max_skill_spread}, ${s.max_latency_ms} ms`).join('; ');
    lines.push(
      `ruleset ${r.id}: ${r.teams}x${r.team_size}, max_skill_spread ${r.max_skill_spread}, max_team_imbalance ${r.max_team_imbalance}, ` +
        `max_latency_ms ${r.max_latency_ms}, require_host ${r.require_host}${relax ? `, relaxation: ${relax}` : ''}`,
    );
  }
  return lines;
}

/** The command line's flags; a bad one ends the process with its message. */
function parseFlags() {
  try {
    return parseArgs({
      options: {
        rate: { type: 'string' },
        'duration-secs': { type: 'string' },
        'tick-ms': { type: 'string' },
        seed: { type: 'string' },
        queue: { type: 'string' },
        'require-host': { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        'report-dir': { type: 'string', default: 'simulation-report' },
        sweep: { type: 'string' },
        help: { type: 'boolean', default: false },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    return fail((err as Error).message);
  }
}

async function main(): Promise<void> {
  const args = parseFlags();
  if (args.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }

  let config = loadQueue(args.queue);
  if (args['require-host']) config = { ...config, rulesets: config.rulesets.map((r) => ({ ...r, require_host: true })) };
  const rate = numberFlag(args.rate, 'rate', 50, (n) => n > 0, 'a positive number');
  const durationSecs = numberFlag(args['duration-secs'], 'duration-secs', 900, (n) => n > 0, 'a positive number');
  const tickMs = numberFlag(
    args['tick-ms'],
    'tick-ms',
    config.tick_interval_ms,
    (n) => Number.isInteger(n) && n >= 1,
    'a positive integer',
  );
  const seed = numberFlag(args.seed, 'seed', 1, (n) => Number.isInteger(n) && n >= 0 && n <= 0xffff_ffff, 'an integer in 0..2^32-1');

  let sweep: Sweep | undefined;
  let sweepConfigs: QueueConfig[] = [];
  try {
    sweep = args.sweep === undefined ? undefined : parseSweep(args.sweep);
    sweepConfigs = sweep ? sweep.values.map((v) => withSetting(config, sweep!.key, v)) : [];
  } catch (err) {
    fail((err as Error).message);
  }

  const startMs = Date.UTC(2025, 0, 1);
  const population = new Population(config, rate, seed, startMs);
  const engine = new EngineSystem(config, seed);
  const baseline = new BaselineSystem(config);
  // The sweep's engines tick in the same loop: one arrival sequence for every system.
  const sweepEngines = sweepConfigs.map((c) => new EngineSystem(c, seed));
  const totals = await runSystems(population, [engine, baseline, ...sweepEngines], {
    startMs,
    endMs: startMs + durationSecs * 1000,
    tickMs,
  });
  const { ticks, arrivedPlayers, arrivedTickets, wallSecs } = totals;
  const engineSummary = engine.metrics.summary(engine.waiting());
  const baselineSummary = baseline.metrics.summary(baseline.waiting());
  const sweepPoints = sweepEngines.map((e, i) => ({
    value: sweep!.values[i]!,
    config: sweepConfigs[i]!,
    summary: e.metrics.summary(e.waiting()),
  }));

  const header = [
    `Matchmaking simulation (engine ${engineVersion()}): ${rate} players/s for ${durationSecs} simulated s, tick ${tickMs} ms, seed ${seed}`,
    `queue: ${args.queue ?? 'built-in default'}${args['require-host'] ? ' (require_host forced on)' : ''}`,
    ...describeQueue(config).map((l) => `  ${l}`),
    `arrivals: ${arrivedPlayers.toLocaleString('en-US')} players in ${arrivedTickets.toLocaleString('en-US')} tickets; ` +
      `${ticks} ticks of ${2 + sweepEngines.length} systems in ${wallSecs.toFixed(1)} s wall clock`,
    ...population.unmodelledFilters.map((f) => `note: attribute filter "${f}" is not modelled; every ticket leaves it unspecified`),
  ].join('\n');
  const comparison = formatComparison(engineSummary, baselineSummary, arrivedPlayers);
  const segments = formatSegments(engineSummary, baselineSummary);
  const sweepTable = sweep ? formatSweep(sweep.key, sweepPoints, baselineSummary, arrivedPlayers) : undefined;
  const text = [
    header,
    '',
    comparison,
    '',
    "Per segment (shares of the segment's arrived players; waits of its matched players):",
    segments,
    '',
    ...(sweep ? [`Sweep of ${sweep.key} (engine once per value, same arrivals; relaxation scaled alike):`, sweepTable!, ''] : []),
  ].join('\n');

  const charts = runCharts({
    config,
    tickMs,
    engine: { samples: engine.metrics.samples(), summary: engineSummary },
    baseline: { samples: baseline.metrics.samples(), summary: baselineSummary },
  });
  const sections: ReportSection[] = [
    { heading: 'Run', text: header },
    {
      heading: 'Engine beside the first-come baseline (same arrivals)',
      text: comparison,
      charts: charts.filter((c) => c.name !== 'segments'),
    },
    { heading: 'Per segment', text: segments, charts: charts.filter((c) => c.name === 'segments') },
    ...(sweep
      ? [{ heading: `Sweep of ${sweep.key}`, text: sweepTable, charts: [sweepChart(sweep.key, sweepPoints, baselineSummary)] }]
      : []),
  ];
  const reportPath = await writeReport(args['report-dir'], 'Matchmaking simulation', sections);
  const reportLine = `report: ${reportPath}\n`;

  if (args.json) {
    process.stderr.write(text);
    const result = {
      settings: { rate, durationSecs, tickMs, seed, queue: args.queue ?? null, requireHostForced: args['require-host'] },
      engineVersion: engineVersion(),
      config,
      model: { ...MODEL, meanPartySize: MEAN_PARTY_SIZE },
      arrivals: { players: arrivedPlayers, tickets: arrivedTickets },
      ticks,
      wallSecs,
      engine: engineSummary,
      baseline: baselineSummary,
      sweep: sweep
        ? { key: sweep.key, points: sweepPoints.map((p) => ({ value: p.value, rulesets: p.config.rulesets, summary: p.summary })) }
        : null,
      report: reportPath,
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    process.stderr.write(reportLine);
  } else {
    process.stdout.write(text + reportLine);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
