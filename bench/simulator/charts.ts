// The report's charts as Vega-Lite specs: the engine beside the two first-come baselines (naive, and
// latency-aware) on the same arrivals, and the sweep's wait-against-quality curve. bench/simulator/html-report.ts renders them to SVG.
import type { TopLevelSpec } from 'vega-lite';
import type { QueueConfig } from '../../src/config/queue-config.js';
import type { Samples, Summary } from './metrics.js';
import type { SweepPoint } from './sweep.js';

export const ENGINE = 'engine';
export const BASELINE = 'naive FCFS';
export const LA_BASELINE = 'latency-aware FCFS';
/** The systems in every chart's order, with their short labels (the sweep's points). */
const SYSTEMS = [ENGINE, BASELINE, LA_BASELINE] as const;

export interface Chart {
  /** File name without extension, e.g. `wait` -> wait.svg. */
  name: string;
  title: string;
  /** How to read it, one or two sentences. */
  caption: string;
  spec: TopLevelSpec;
}

export interface RunCharts {
  config: QueueConfig;
  tickMs: number;
  engine: { samples: Samples; summary: Summary };
  baseline: { samples: Samples; summary: Summary };
  latencyAware: { samples: Samples; summary: Summary };
}

/** Every chart's file name, so that a report directory can be cleared of charts a run did not draw. */
export const CHART_NAMES = ['wait', 'skill-spread', 'team-imbalance', 'host-latency', 'pool-size', 'segments', 'sweep'] as const;

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';
const WIDTH = 560;
const HEIGHT = 260;
/** The same colour for a system in every chart. */
const SYSTEM_COLOR = {
  field: 'system',
  type: 'nominal',
  title: null,
  scale: { domain: [...SYSTEMS], range: ['#4c78a8', '#f58518', '#54a24b'] },
} as const;
const CONFIG = { background: 'white', font: 'sans-serif', view: { stroke: null }, legend: { orient: 'top' } } as const;

/** Quantiles drawn for a CDF: every half percent, then every 0.1% in the last percent, then the maximum. */
const CDF_PROBS = [...Array.from({ length: 199 }, (_, i) => i * 0.005), ...Array.from({ length: 10 }, (_, i) => 0.99 + i * 0.001), 1];

/** One row per value of each system, in SYSTEMS order. */
function rows(...perSystem: (readonly number[])[]): { system: string; value: number }[] {
  return perSystem.flatMap((values, i) => values.map((value) => ({ system: SYSTEMS[i]!, value })));
}

/** The first ruleset's bound on a measure and its relaxation steps, as labelled rules on a chart. */
interface Bound {
  at: number;
  label: string;
}

function boundRules(bounds: readonly Bound[]) {
  const data = { values: bounds.map((b, i) => ({ ...b, y: 2 + 12 * i })) };
  return [
    { data, mark: { type: 'rule', strokeDash: [4, 3], color: '#555' }, encoding: { x: { field: 'at', type: 'quantitative' } } },
    {
      data,
      mark: { type: 'text', align: 'left', baseline: 'top', dx: 3, fontSize: 10, color: '#333' },
      encoding: {
        x: { field: 'at', type: 'quantitative' },
        y: { field: 'y', type: 'quantitative', scale: null },
        text: { field: 'label' },
      },
    },
  ] as const;
}

/** Shares of each system's matches per bin, both systems on the same bins, with the bounds as rules. */
function histogram(
  name: string,
  title: string,
  caption: string,
  xTitle: string,
  values: { system: string; value: number }[],
  bounds: Bound[],
): Chart {
  const spec = {
    $schema: SCHEMA,
    width: WIDTH,
    height: HEIGHT,
    config: CONFIG,
    layer: [
      {
        data: { values },
        transform: [
          { joinaggregate: [{ op: 'count', as: 'total' }], groupby: ['system'] },
          { bin: { maxbins: 40 }, field: 'value', as: ['lo', 'hi'] },
          { aggregate: [{ op: 'count', as: 'n' }], groupby: ['system', 'lo', 'hi', 'total'] },
          { calculate: 'datum.n / datum.total', as: 'share' },
        ],
        mark: { type: 'bar', opacity: 0.6, binSpacing: 0 },
        encoding: {
          x: { field: 'lo', type: 'quantitative', bin: { binned: true }, title: xTitle },
          x2: { field: 'hi' },
          y: { field: 'share', type: 'quantitative', stack: null, axis: { format: '%' }, title: 'share of matches' },
          color: SYSTEM_COLOR,
        },
      },
      ...boundRules(bounds),
    ],
  } as TopLevelSpec;
  return { name, title, caption, spec };
}

function relaxationLabel(afterWaitSecs: number): string {
  return `after ${afterWaitSecs} s`;
}

export function runCharts(run: RunCharts): Chart[] {
  const { config, engine, baseline, latencyAware } = run;
  const ruleset = config.rulesets[0]!;
  const norm = config.engine.mmr_normalization_ref;
  const only = config.rulesets.length > 1 ? ` (bounds of ruleset ${ruleset.id})` : '';
  const charts: Chart[] = [];

  charts.push({
    name: 'wait',
    title: 'Wait per matched player',
    caption:
      'Cumulative distribution: the share of matched players (y) who waited at most x seconds, from arrival to the tick that matched them. ' +
      'Log scale; waits under 0.05 s sit on the left edge. A curve further left is shorter waiting.',
    spec: {
      $schema: SCHEMA,
      width: WIDTH,
      height: HEIGHT,
      config: CONFIG,
      data: { values: rows(engine.samples.waitSecs, baseline.samples.waitSecs, latencyAware.samples.waitSecs) },
      transform: [{ quantile: 'value', groupby: ['system'], probs: CDF_PROBS, as: ['share', 'wait'] }],
      mark: { type: 'line', strokeWidth: 2 },
      encoding: {
        x: { field: 'wait', type: 'quantitative', scale: { type: 'log', domainMin: 0.05, clamp: true }, title: 'wait (s, log scale)' },
        y: { field: 'share', type: 'quantitative', axis: { format: '%' }, title: 'players who waited at most x' },
        color: SYSTEM_COLOR,
      },
    } as TopLevelSpec,
  });

  charts.push(
    histogram(
      'skill-spread',
      'Skill spread per match',
      `Highest minus lowest effective mmr among a match's tickets (raw mmr units; the bound ${ruleset.max_skill_spread} is ${
        ruleset.max_skill_spread * norm
      } raw with mmr_normalization_ref ${norm}). Dashed: the bound and its relaxation steps${only}. Further left is fairer.`,
      'skill spread (raw mmr)',
      rows(engine.samples.skillSpread, baseline.samples.skillSpread, latencyAware.samples.skillSpread),
      [
        { at: ruleset.max_skill_spread * norm, label: 'max_skill_spread' },
        ...ruleset.relaxation.map((s) => ({ at: s.max_skill_spread * norm, label: relaxationLabel(s.after_wait_secs) })),
      ],
    ),
  );

  charts.push(
    histogram(
      'team-imbalance',
      'Team imbalance per match',
      `Highest minus lowest team mean effective mmr (raw units). Dashed: max_team_imbalance${only}. Further left is more balanced.`,
      'team imbalance (raw mmr)',
      rows(engine.samples.teamImbalance, baseline.samples.teamImbalance, latencyAware.samples.teamImbalance),
      [{ at: ruleset.max_team_imbalance * norm, label: 'max_team_imbalance' }],
    ),
  );

  const hostless = engine.summary.matchesWithoutHost;
  charts.push(
    histogram(
      'host-latency',
      'Preferred-host latency per match',
      "The match's worst ticket latency to its host: the engine's preferred host, or for the baselines the host that minimises it. " +
        (hostless > 0
          ? `${hostless.toLocaleString('en-US')} engine matches had no acceptable host (require_host false); they are drawn at their best host's latency. `
          : '') +
        `Dashed: max_latency_ms and its relaxation steps${only}.`,
      'worst player latency to the host (ms)',
      rows(engine.samples.hostLatencyMs, baseline.samples.hostLatencyMs, latencyAware.samples.hostLatencyMs),
      [
        { at: ruleset.max_latency_ms, label: 'max_latency_ms' },
        ...ruleset.relaxation.map((s) => ({ at: s.max_latency_ms, label: relaxationLabel(s.after_wait_secs) })),
      ],
    ),
  );

  const pool = poolSeries(run.tickMs, [engine.samples.poolTickets, baseline.samples.poolTickets, latencyAware.samples.poolTickets]);
  charts.push({
    name: 'pool-size',
    title: 'Pool size over time',
    caption: `Tickets waiting when each tick began${pool.every > 1 ? ` (mean over every ${pool.every} ticks)` : ''}. A pool that keeps growing means the queue cannot keep up with arrivals.`,
    spec: {
      $schema: SCHEMA,
      width: WIDTH,
      height: HEIGHT,
      config: CONFIG,
      data: { values: pool.values },
      mark: { type: 'line', strokeWidth: 1.5 },
      encoding: {
        x: { field: 'time', type: 'quantitative', title: 'simulated time (s)' },
        y: { field: 'tickets', type: 'quantitative', title: 'tickets waiting' },
        color: SYSTEM_COLOR,
      },
    } as TopLevelSpec,
  });

  const summaries = [engine.summary, baseline.summary, latencyAware.summary];
  const segments = engine.summary.segments.flatMap((e, i) => {
    if (e.players === 0) return [];
    return summaries
      .map((s, k) => ({ segment: e.name, system: SYSTEMS[k]!, p50: s.segments[i]!.waitP50, p95: s.segments[i]!.waitP95 }))
      .filter((r) => Number.isFinite(r.p95));
  });
  charts.push({
    name: 'segments',
    title: 'Who waits: wait per segment',
    caption:
      "Bars: p95 wait of the segment's matched players; black ticks: p50. Segments by party size, region, mmr tail and tickets accepting two game modes.",
    spec: {
      $schema: SCHEMA,
      width: WIDTH,
      // The step is each system's bar within a segment.
      height: { step: 11 },
      config: CONFIG,
      data: { values: segments },
      encoding: {
        y: { field: 'segment', type: 'nominal', sort: null, title: null },
        yOffset: { field: 'system', type: 'nominal', sort: [...SYSTEMS] },
      },
      layer: [
        { mark: { type: 'bar' }, encoding: { x: { field: 'p95', type: 'quantitative', title: 'wait (s)' }, color: SYSTEM_COLOR } },
        { mark: { type: 'tick', color: 'black', thickness: 2, bandSize: 8 }, encoding: { x: { field: 'p50', type: 'quantitative' } } },
      ],
    } as TopLevelSpec,
  });
  return charts;
}

/** One point per tick, or means over groups of ticks when there are many (the SVG stays small). */
function poolSeries(tickMs: number, perSystem: readonly (readonly number[])[]) {
  const every = Math.max(1, Math.ceil(perSystem[0]!.length / 600));
  const values: { system: string; time: number; tickets: number }[] = [];
  for (const [k, series] of perSystem.entries()) {
    const system = SYSTEMS[k]!;
    for (let i = 0; i < series.length; i += every) {
      const group = series.slice(i, i + every);
      const mean = group.reduce((s, v) => s + v, 0) / group.length;
      values.push({ system, time: ((i + 1) * tickMs) / 1000, tickets: mean });
    }
  }
  return { every, values };
}

/** Quality measures a sweep plots wait against, lower is better for each. */
const QUALITY = [
  { field: 'spread', key: 'max_skill_spread', title: 'mean skill spread (raw mmr)', of: (s: Summary) => s.skillSpread.mean },
  { field: 'imbalance', key: 'max_team_imbalance', title: 'mean team imbalance (raw mmr)', of: (s: Summary) => s.teamImbalance.mean },
  { field: 'latency', key: 'max_latency_ms', title: 'mean host latency (ms)', of: (s: Summary) => s.hostLatencyMs.mean },
] as const;

/** A baseline's point on the sweep chart: which system, its short label, its summary. */
export interface SweepBaseline {
  system: typeof BASELINE | typeof LA_BASELINE;
  label: string;
  summary: Summary;
}

export function sweepChart(key: string, points: readonly SweepPoint[], baselines: readonly SweepBaseline[]): Chart {
  // A path such as rulesets[0].max_skill_spread puts the panel of its last key first, as the bound does.
  const governs = key.replace(/^.*\./, '');
  const row = (system: string, label: string, order: number, s: Summary) => {
    const quality = Object.fromEntries(QUALITY.map((q) => [q.field, q.of(s)]));
    return [
      { system, label, order, stat: 'p50', wait: s.waitSecs.p50, ...quality },
      { system, label, order, stat: 'p95', wait: s.waitSecs.p95, ...quality },
    ];
  };
  // A log axis cannot place a zero or missing wait (a run too short to match anyone).
  const values = [
    ...points.flatMap((p, i) => row(ENGINE, String(p.value), i, p.summary)),
    ...baselines.flatMap((b) => row(b.system, b.label, -1, b.summary)),
  ].filter((r) => Number.isFinite(r.wait) && r.wait > 0);
  const panel = (q: (typeof QUALITY)[number]) => ({
    width: 250,
    height: 250,
    layer: [
      {
        transform: [{ filter: `datum.system === '${ENGINE}'` }],
        mark: { type: 'line', color: SYSTEM_COLOR.scale.range[0] },
        encoding: {
          // From zero, so that a change too small to matter also looks small.
          x: { field: q.field, type: 'quantitative', scale: { zero: true }, title: q.title },
          y: { field: 'wait', type: 'quantitative', scale: { type: 'log' }, title: 'wait (s, log scale)' },
          order: { field: 'order', type: 'quantitative' },
          strokeDash: {
            field: 'stat',
            type: 'nominal',
            title: 'wait',
            scale: {
              domain: ['p50', 'p95'],
              range: [
                [1, 0],
                [5, 3],
              ],
            },
          },
        },
      },
      {
        mark: { type: 'point', filled: true, size: 50 },
        encoding: {
          x: { field: q.field, type: 'quantitative' },
          y: { field: 'wait', type: 'quantitative' },
          color: SYSTEM_COLOR,
          shape: { field: 'stat', type: 'nominal', title: 'wait', scale: { domain: ['p50', 'p95'], range: ['circle', 'square'] } },
        },
      },
      {
        mark: { type: 'text', align: 'left', dx: 5, dy: -6, fontSize: 10 },
        encoding: { x: { field: q.field, type: 'quantitative' }, y: { field: 'wait', type: 'quantitative' }, text: { field: 'label' } },
      },
    ],
  });
  return {
    name: 'sweep',
    title: `Wait against match quality, one engine run per ${key}`,
    caption:
      `Each labelled engine point is one ${key} value, run on the same arrivals; ` +
      'circles are the median wait, squares p95. Down and left is better on both axes: a tighter bound buys quality with wait. ' +
      `Each baseline (${baselines.map((b) => b.label).join(', ')}) ran once, on the queue as given, so it is one point.`,
    spec: {
      $schema: SCHEMA,
      config: CONFIG,
      data: { values },
      // The measure the swept bound governs first.
      hconcat: [...QUALITY.filter((q) => q.key === governs), ...QUALITY.filter((q) => q.key !== governs)].map(panel),
      resolve: { scale: { y: 'shared' } },
    } as TopLevelSpec,
  };
}
