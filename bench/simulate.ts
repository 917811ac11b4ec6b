// Matchmaking simulator: runs the real native engine in-process (TicketPool + TickRunner) on a simulated
// clock against a synthetic player population, side by side with two first-come-first-served baselines
// (naive, and latency-aware) fed the same arrivals, and writes an HTML report with charts. Scenarios, model,
// flags and sample runs: bench/SIMULATOR.md.
//
//   node dist/bench/simulate.js [--scenario default|issue19] [--rate 50 | --tickets-per-sec 40]
//                               [--duration-secs 900] [--drain] [--tick-ms 1000] [--seed 1]
//                               [--queue queues/eu.ranked.yaml] [--set rulesets[0].max_skill_spread=3]
//                               [--require-host | --no-require-host] [--json] [--report-dir simulation-report]
//                               [--sweep max_skill_spread=1,1.5,2,3,4 | --sweep rulesets[0].<path>=v1,v2]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { formatPath, queueConfigSchema, queueFileSchema, type QueueConfig } from '../src/config/queue-config.js';
import { engineVersion } from '../src/engine/native.js';
import { BASELINE, LA_BASELINE, runCharts, sweepChart } from './simulator/charts.js';
import { type ReportSection, writeReport } from './simulator/html-report.js';
import { meanPartySize, MODEL, Population } from './simulator/population.js';
import { type Column, formatComparison, formatRatios, formatSegments, formatSweep, ratios } from './simulator/report.js';
import { runSystems } from './simulator/run.js';
import { SCENARIOS, scenarioPath } from './simulator/scenarios.js';
import {
  type ConfigPath,
  parseAssignment,
  parseSweep,
  type SettingValue,
  setPath,
  type Sweep,
  SWEEP_KEYS,
  withSetting,
} from './simulator/sweep.js';
import { BaselineSystem, EngineSystem, LatencyAwareFcfs } from './simulator/systems.js';

const USAGE = `Usage: node dist/bench/simulate.js [options]

  --scenario NAME     the workload: ${Object.keys(SCENARIOS).join(', ')}  [default]
${Object.values(SCENARIOS)
  .map((sc) => `                        ${sc.name}: ${sc.description}`)
  .join('\n')}
  --rate N            players arriving per second (Poisson, in parties)   [default scenario: 50]
  --tickets-per-sec N tickets (parties) arriving per second, instead of --rate  [issue19: 40]
  --duration-secs N   simulated seconds of arrivals (and ticks)            [default scenario: 900; issue19: 60]
  --drain, --no-drain after arrivals stop, keep ticking until every ticket is matched or expired
                      [issue19: on; default scenario: off]
  --tick-ms N         simulated ms between ticks        [queue tick_interval_ms]
  --seed N            seeds the population and the engine's tie-breaks     [1]
  --queue FILE        a queue file (queues/*.yaml format) instead of the scenario's queue
  --set PATH=VALUE    set a path in the queue's config before validation, e.g. rulesets[0].max_skill_spread=3
                      (repeatable; rulesets[*].x sets every ruleset)
  --require-host      set require_host: true on every ruleset (latency then steers the search)
  --no-require-host   set require_host: false on every ruleset
  --json              print the results as JSON on stdout (the tables go to stderr)
  --report-dir DIR    where the HTML report (index.html) and its SVG charts go  [simulation-report]
  --sweep KEY=V1,V2,...  also run the engine once per value of KEY on the same arrivals and chart
                      wait against quality; KEY: ${SWEEP_KEYS.join(', ')} (relaxation scaled alike),
                      or any path into the queue's config, e.g. rulesets[0].max_team_imbalance
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

/** The queue's raw config (before validation), and how to validate it as its file's `config`. */
function loadRawQueue(path: string | undefined): { raw: unknown; validate: (raw: unknown) => QueueConfig } {
  if (path === undefined) {
    return {
      raw: DEFAULT_QUEUE,
      validate: (raw) => {
        const parsed = queueConfigSchema.safeParse(raw);
        if (!parsed.success) throw new Error(parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`).join('; '));
        return parsed.data;
      },
    };
  }
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    fail(`${path}: ${(err as Error).message}`);
  }
  const isObject = doc !== null && typeof doc === 'object' && !Array.isArray(doc);
  return {
    raw: isObject ? (doc as { config?: unknown }).config : undefined,
    validate: (raw) => {
      const parsed = queueFileSchema.safeParse(isObject ? { ...(doc as object), config: raw } : doc);
      if (!parsed.success) {
        throw new Error(`${path}: ${parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`).join('; ')}`);
      }
      return parsed.data.config;
    },
  };
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
        scenario: { type: 'string', default: 'default' },
        rate: { type: 'string' },
        'tickets-per-sec': { type: 'string' },
        'duration-secs': { type: 'string' },
        drain: { type: 'boolean' },
        'no-drain': { type: 'boolean' },
        'tick-ms': { type: 'string' },
        seed: { type: 'string' },
        queue: { type: 'string' },
        set: { type: 'string', multiple: true, default: [] },
        'require-host': { type: 'boolean', default: false },
        'no-require-host': { type: 'boolean', default: false },
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
  const scenario = SCENARIOS[args.scenario];
  if (!scenario || !Object.hasOwn(SCENARIOS, args.scenario))
    fail(`--scenario must be one of ${Object.keys(SCENARIOS).join(', ')}, got "${args.scenario}"`);
  const model = scenario.model;
  if (args['require-host'] && args['no-require-host']) fail('--require-host and --no-require-host contradict each other');
  if (args.drain && args['no-drain']) fail('--drain and --no-drain contradict each other');
  if (args.rate !== undefined && args['tickets-per-sec'] !== undefined) fail('give --rate (players/s) or --tickets-per-sec, not both');

  // The queue: the scenario's (or --queue), with --set applied to the raw YAML, validated, require_host forced.
  const queuePath = args.queue ?? (scenario.queueFile === undefined ? undefined : scenarioPath(scenario.queueFile));
  const queue = loadRawQueue(queuePath);
  let raw = queue.raw;
  const sets: { key: string; value: SettingValue }[] = [];
  const forced = args['require-host'] ? true : args['no-require-host'] ? false : undefined;
  const force = (c: QueueConfig): QueueConfig =>
    forced === undefined ? c : { ...c, rulesets: c.rulesets.map((r) => ({ ...r, require_host: forced })) };
  const build = (rawConfig: unknown, what: string): QueueConfig => {
    try {
      return force(queue.validate(rawConfig));
    } catch (err) {
      return fail(`${what}: ${(err as Error).message}`);
    }
  };
  for (const assignment of args.set) {
    try {
      const { key, path, value } = parseAssignment(assignment);
      raw = setPath(raw, path, value);
      sets.push({ key, value });
    } catch (err) {
      fail((err as Error).message);
    }
  }
  const config = build(raw, queuePath ?? 'built-in queue');

  const ticketsPerSec =
    args['tickets-per-sec'] !== undefined
      ? numberFlag(args['tickets-per-sec'], 'tickets-per-sec', 0, (n) => n > 0, 'a positive number')
      : args.rate !== undefined
        ? numberFlag(args.rate, 'rate', 0, (n) => n > 0, 'a positive number') / meanPartySize(model)
        : 'ticketsPerSec' in scenario.arrivals
          ? scenario.arrivals.ticketsPerSec
          : scenario.arrivals.playersPerSec / meanPartySize(model);
  const rateText =
    args['tickets-per-sec'] !== undefined || (args.rate === undefined && 'ticketsPerSec' in scenario.arrivals)
      ? `${ticketsPerSec} tickets/s`
      : `${args.rate ?? (scenario.arrivals as { playersPerSec: number }).playersPerSec} players/s`;
  const durationSecs = numberFlag(args['duration-secs'], 'duration-secs', scenario.durationSecs, (n) => n > 0, 'a positive number');
  const drain = args.drain ? true : args['no-drain'] ? false : scenario.drain;
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
  } catch (err) {
    fail((err as Error).message);
  }
  if (sweep?.kind === 'bound') {
    const s = sweep;
    try {
      sweepConfigs = s.values.map((v) => withSetting(config, s.key, v));
    } catch (err) {
      fail((err as Error).message);
    }
  } else if (sweep?.kind === 'path') {
    const path: ConfigPath = sweep.path;
    const key = sweep.key;
    sweepConfigs = sweep.values.map((v) => {
      let swept: unknown;
      try {
        swept = setPath(raw, path, v);
      } catch (err) {
        return fail(`--sweep ${key}=${v}: ${(err as Error).message}`);
      }
      return build(swept, `--sweep ${key}=${v}`);
    });
  }

  const startMs = Date.UTC(2025, 0, 1);
  const endMs = startMs + durationSecs * 1000;
  const population = new Population(config, model, ticketsPerSec, seed, startMs);
  const engine = new EngineSystem(config, model, seed);
  const baseline = new BaselineSystem(config, model);
  const latencyAware = new LatencyAwareFcfs(config, model);
  // The sweep's engines tick in the same loop: one arrival sequence for every system.
  const sweepEngines = sweepConfigs.map((c) => new EngineSystem(c, model, seed));
  const maxTtlSecs = Math.max(config.ticket_ttl_secs, ...sweepConfigs.map((c) => c.ticket_ttl_secs));
  const totals = await runSystems(population, [engine, baseline, latencyAware, ...sweepEngines], {
    startMs,
    endMs,
    tickMs,
    ...(drain ? { drainUntilMs: endMs + maxTtlSecs * 1000 } : {}),
  });
  const { ticks, drainTicks, arrivedPlayers, arrivedTickets, wallSecs } = totals;
  const engineSummary = engine.metrics.summary(engine.waiting());
  const baselineSummary = baseline.metrics.summary(baseline.waiting());
  const latencyAwareSummary = latencyAware.metrics.summary(latencyAware.waiting());
  const columns: Column[] = [
    { label: 'engine', summary: engineSummary },
    { label: 'naive FCFS', summary: baselineSummary },
    { label: 'latency-aware FCFS', summary: latencyAwareSummary },
  ];
  const sweepPoints = sweepEngines.map((e, i) => ({
    value: sweep!.values[i]!,
    config: sweepConfigs[i]!,
    summary: e.metrics.summary(e.waiting()),
  }));

  const queueLabel = args.queue ?? (scenario.queueFile === undefined ? 'built-in default' : `bench/scenarios/${scenario.queueFile}`);
  const header = [
    `Matchmaking simulation (engine ${engineVersion()}), scenario ${scenario.name}: ${rateText} for ${durationSecs} simulated s` +
      `${drain ? ', then drained' : ''}, tick ${tickMs} ms, seed ${seed}`,
    `queue: ${queueLabel}${forced === undefined ? '' : ` (require_host forced ${forced ? 'on' : 'off'})`}` +
      `${sets.length ? `; set ${sets.map((x) => `${x.key}=${x.value}`).join(', ')}` : ''}`,
    ...describeQueue(config).map((l) => `  ${l}`),
    `population: ${model.regions.map((r) => `${r.key} ${Math.round(r.share * 100)}%`).join(', ')}; hosts ${model.hosts.map((h) => h.key).join(', ')}`,
    `arrivals: ${arrivedPlayers.toLocaleString('en-US')} players in ${arrivedTickets.toLocaleString('en-US')} tickets; ` +
      `${ticks} ticks${drainTicks ? ` (${drainTicks} after arrivals stopped)` : ''} of ${3 + sweepEngines.length} systems in ${wallSecs.toFixed(1)} s wall clock`,
    ...population.unmodelledFilters.map((f) => `note: attribute filter "${f}" is not modelled; every ticket leaves it unspecified`),
  ].join('\n');
  const comparison = formatComparison(columns, arrivedPlayers);
  const ratioTable = formatRatios(columns);
  const segments = formatSegments(columns);
  const sweepTable = sweep ? formatSweep(sweep.key, sweepPoints, columns.slice(1), arrivedPlayers) : undefined;
  const sweepTitle = sweep
    ? `Sweep of ${sweep.key} (engine once per value, same arrivals${sweep.kind === 'bound' ? '; relaxation scaled alike' : ''}; baselines once, on the queue as given):`
    : '';
  const text = [
    header,
    '',
    comparison,
    '',
    ratioTable,
    '',
    "Per segment (shares of the segment's arrived players; waits of its matched players):",
    segments,
    '',
    ...(sweep ? [sweepTitle, sweepTable!, ''] : []),
  ].join('\n');

  const charts = runCharts({
    config,
    tickMs,
    engine: { samples: engine.metrics.samples(), summary: engineSummary },
    baseline: { samples: baseline.metrics.samples(), summary: baselineSummary },
    latencyAware: { samples: latencyAware.metrics.samples(), summary: latencyAwareSummary },
  });
  const sweepBaselines = [
    { system: BASELINE, label: 'FCFS', summary: baselineSummary },
    { system: LA_BASELINE, label: 'LA-FCFS', summary: latencyAwareSummary },
  ] as const;
  const sections: ReportSection[] = [
    { heading: 'Run', text: header },
    {
      heading: 'Engine beside the first-come baselines (same arrivals)',
      text: `${comparison}\n\n${ratioTable}`,
      charts: charts.filter((c) => c.name !== 'segments'),
    },
    { heading: 'Per segment', text: segments, charts: charts.filter((c) => c.name === 'segments') },
    ...(sweep
      ? [{ heading: `Sweep of ${sweep.key}`, text: sweepTable, charts: [sweepChart(sweep.key, sweepPoints, sweepBaselines)] }]
      : []),
  ];
  const reportPath = await writeReport(args['report-dir'], 'Matchmaking simulation', sections);
  const reportLine = `report: ${reportPath}\n`;

  if (args.json) {
    process.stderr.write(text);
    const result = {
      settings: {
        scenario: scenario.name,
        ticketsPerSec,
        playersPerSec: ticketsPerSec * meanPartySize(model),
        durationSecs,
        drain,
        tickMs,
        seed,
        queue: queuePath ?? null,
        set: sets,
        requireHostForced: forced ?? null,
      },
      engineVersion: engineVersion(),
      config,
      model: { ...MODEL, population: model, meanPartySize: meanPartySize(model) },
      arrivals: { players: arrivedPlayers, tickets: arrivedTickets },
      ticks,
      drainTicks,
      wallSecs,
      engine: engineSummary,
      baseline: baselineSummary,
      latencyAware: latencyAwareSummary,
      ratios: { vsNaive: ratios(engineSummary, baselineSummary), vsLatencyAware: ratios(engineSummary, latencyAwareSummary) },
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
