// The tables printed by bench/simulate.ts: the engine beside the baselines, per segment, and the sweep.
import type { Dist, Summary } from './metrics.js';

const int = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');
const fix = (n: number, d: number) => (Number.isFinite(n) ? n.toFixed(d) : '-');
const pct = (n: number) => (Number.isFinite(n) ? `${(100 * n).toFixed(1)}%` : '-');
const trio = (d: Dist, digits: number) => `${fix(d.p50, digits)} / ${fix(d.p95, digits)} / ${fix(d.max, digits)}`;
const pair = (d: Dist, digits: number) => `${fix(d.mean, digits)} / ${fix(d.p95, digits)}`;

function table(rows: string[][], align: ('l' | 'r')[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, c) => (align[c] === 'l' ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** A system's column: its label and its summary. The first is the engine. */
export interface Column {
  label: string;
  summary: Summary;
}

/** Engine / baseline for the measures issue 19 compares (below 1: the engine is lower, i.e. better or faster). */
export interface Ratios {
  skillSpreadMean: number;
  teamImbalanceMean: number;
  /** p95 wait per matched player. */
  waitP95: number;
  /** p95 wait per matched ticket. */
  waitP95PerTicket: number;
}

export function ratios(engine: Summary, baseline: Summary): Ratios {
  const r = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? a / b : NaN);
  return {
    skillSpreadMean: r(engine.skillSpread.mean, baseline.skillSpread.mean),
    teamImbalanceMean: r(engine.teamImbalance.mean, baseline.teamImbalance.mean),
    waitP95: r(engine.waitSecs.p95, baseline.waitSecs.p95),
    waitP95PerTicket: r(engine.waitSecsPerTicket.p95, baseline.waitSecsPerTicket.p95),
  };
}

export function formatComparison(columns: readonly Column[], arrivedPlayers: number): string {
  const engine = columns[0]!.summary;
  const share = (n: number) => (arrivedPlayers === 0 ? '' : ` (${pct(n / arrivedPlayers)})`);
  const ticketShare = (s: Summary, n: number) => (s.arrivedTickets === 0 ? '' : ` (${pct(n / s.arrivedTickets)})`);
  const row = (label: string, f: (s: Summary) => string) => [label, ...columns.map((c) => f(c.summary))];
  const v = (s: Summary) => s.violations;
  const rows: string[][] = [
    ['', ...columns.map((c) => c.label)],
    row('matches formed', (s) => int(s.matches)),
    ...(Object.keys(engine.matchesByRuleset).length > 1
      ? Object.keys(engine.matchesByRuleset).map((id) => row(`  ruleset ${id}`, (s) => int(s.matchesByRuleset[id]!)))
      : []),
    row('players matched', (s) => `${int(s.playersMatched)}${share(s.playersMatched)}`),
    row('tickets matched', (s) => `${int(s.ticketsMatched)}${ticketShare(s, s.ticketsMatched)}`),
    row('tickets expired (players)', (s) => `${int(s.expiredTickets)} (${int(s.expiredPlayers)})${ticketShare(s, s.expiredTickets)}`),
    row('tickets still waiting at end (players)', (s) => `${int(s.waitingAtEndTickets)} (${int(s.waitingAtEndPlayers)})`),
    row('wait per player p50 / p95 / max (s)', (s) => trio(s.waitSecs, 1)),
    row('wait per ticket p50 / p95 / max (s)', (s) => trio(s.waitSecsPerTicket, 1)),
    row('skill spread mean / p95 (mmr)', (s) => pair(s.skillSpread, 3)),
    row('team imbalance mean / p95 (mmr)', (s) => pair(s.teamImbalance, 3)),
    row('host latency mean / p95 (ms)', (s) => pair(s.hostLatencyMs, 0)),
    row(`matches with host > max_latency_ms (${engine.hostOverMs})`, (s) => `${int(s.hostOverLatency)} (${pct(s.hostOverLatencyShare)})`),
    row('matches with no acceptable host', (s) => (s === engine ? int(s.matchesWithoutHost) : 'n/a')),
    row('matches breaking a hard bound in force', (s) => int(v(s).matches)),
    row('  teams / spread / imbalance / host / filters', (s) =>
      [v(s).teams, v(s).spread, v(s).imbalance, v(s).host, v(s).attributes].map(int).join(' / '),
    ),
    row('pool size mean / max (tickets)', (s) => `${int(s.poolTickets.mean)} / ${int(s.poolTickets.max)}`),
    row('tick time mean / p95 / max (ms)', (s) => trio(s.tickMs, 2)),
  ];
  return table(
    rows,
    rows[0]!.map((_, i) => (i === 0 ? 'l' : 'r')),
  );
}

/** engine ÷ each baseline, one column per baseline. */
export function formatRatios(columns: readonly Column[]): string {
  const engine = columns[0]!.summary;
  const all = columns.slice(1).map((c) => ratios(engine, c.summary));
  const x = (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)}x` : '-');
  const rows: string[][] = [
    ['engine ÷ baseline', ...columns.slice(1).map((c) => c.label)],
    ['skill spread mean', ...all.map((r) => x(r.skillSpreadMean))],
    ['team imbalance mean', ...all.map((r) => x(r.teamImbalanceMean))],
    ['wait p95 per player', ...all.map((r) => x(r.waitP95))],
    ['wait p95 per ticket', ...all.map((r) => x(r.waitP95PerTicket))],
  ];
  return table(
    rows,
    rows[0]!.map((_, i) => (i === 0 ? 'l' : 'r')),
  );
}

export function formatSegments(columns: readonly Column[]): string {
  const [first] = columns;
  const rows: string[][] = [['segment', 'players', ...columns.flatMap((c) => [`${c.label}: matched`, 'expired', 'wait p50', 'p95 (s)'])]];
  first!.summary.segments.forEach((e, i) => {
    if (e.players === 0) return;
    rows.push([
      e.name,
      int(e.players),
      ...columns.flatMap((c) => {
        const s = c.summary.segments[i]!;
        return [pct(s.matchedShare), pct(s.expiredShare), fix(s.waitP50, 1), fix(s.waitP95, 1)];
      }),
    ]);
  });
  return table(
    rows,
    rows[0]!.map((_, i) => (i === 0 ? 'l' : 'r')),
  );
}

/** One row per swept value, and one per baseline (run once, on the main config). */
export function formatSweep(
  key: string,
  points: readonly { value: number | string | boolean; summary: Summary }[],
  baselines: readonly Column[],
  arrivedPlayers: number,
): string {
  const share = (n: number) => (arrivedPlayers === 0 ? '-' : pct(n / arrivedPlayers));
  const row = (label: string, s: Summary) => [
    label,
    share(s.playersMatched),
    share(s.expiredPlayers),
    trio(s.waitSecs, 1),
    pair(s.skillSpread, 3),
    pair(s.teamImbalance, 3),
    pair(s.hostLatencyMs, 0),
    pct(s.hostOverLatencyShare),
    int(s.violations.matches),
    int(s.poolTickets.mean),
  ];
  const rows: string[][] = [
    [
      key,
      'matched',
      'expired',
      'wait p50 / p95 / max (s)',
      'spread mean / p95',
      'imbalance mean / p95',
      'host ms mean / p95',
      'host > bound',
      'violations',
      'pool mean',
    ],
    ...points.map((p) => row(`engine ${p.value}`, p.summary)),
    ...baselines.map((b) => row(b.label, b.summary)),
  ];
  return table(
    rows,
    rows[0]!.map((_, i) => (i === 0 ? 'l' : 'r')),
  );
}
