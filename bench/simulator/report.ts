// The side-by-side table printed by bench/simulate.ts.
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

export function formatComparison(engine: Summary, baseline: Summary, arrivedPlayers: number): string {
  const share = (n: number) => (arrivedPlayers === 0 ? '' : ` (${pct(n / arrivedPlayers)})`);
  const row = (label: string, f: (s: Summary) => string) => [label, f(engine), f(baseline)];
  const rows: string[][] = [
    ['', 'engine', 'FCFS baseline'],
    row('matches formed', (s) => int(s.matches)),
    ...(Object.keys(engine.matchesByRuleset).length > 1
      ? Object.keys(engine.matchesByRuleset).map((id) => row(`  ruleset ${id}`, (s) => int(s.matchesByRuleset[id]!)))
      : []),
    row('players matched', (s) => `${int(s.playersMatched)}${share(s.playersMatched)}`),
    row('players expired (tickets)', (s) => `${int(s.expiredPlayers)} (${int(s.expiredTickets)})${share(s.expiredPlayers)}`),
    row('players still waiting at end', (s) => `${int(s.waitingAtEndPlayers)}${share(s.waitingAtEndPlayers)}`),
    row('wait p50 / p95 / max (s)', (s) => trio(s.waitSecs, 1)),
    row('skill spread mean / p95 (mmr)', (s) => pair(s.skillSpread, 3)),
    row('team imbalance mean / p95 (mmr)', (s) => pair(s.teamImbalance, 3)),
    row('host latency mean / p95 (ms)', (s) => pair(s.hostLatencyMs, 0)),
    row(`matches with host > ${engine.hostOverMs} ms`, (s) => `${int(s.matchesOverLatency)} (${pct(s.shareOverLatency)})`),
    row('matches with no acceptable host', (s) => (s === engine ? int(s.matchesWithoutHost) : 'n/a')),
    row('matches breaking attribute filters', (s) => int(s.attributeViolations)),
    row('engine contract violations', (s) => (s === engine ? int(s.constraintViolations) : 'n/a')),
    row('pool size mean / max (tickets)', (s) => `${int(s.poolTickets.mean)} / ${int(s.poolTickets.max)}`),
    row('tick time mean / p95 / max (ms)', (s) => trio(s.tickMs, 2)),
  ];
  return table(rows, ['l', 'r', 'r']);
}

export function formatSegments(engine: Summary, baseline: Summary): string {
  const rows: string[][] = [
    ['segment', 'players', 'engine: matched', 'expired', 'wait p50', 'p95 (s)', 'FCFS: matched', 'expired', 'wait p50', 'p95 (s)'],
  ];
  engine.segments.forEach((e, i) => {
    const b = baseline.segments[i]!;
    if (e.players === 0) return;
    rows.push([
      e.name,
      int(e.players),
      pct(e.matchedShare),
      pct(e.expiredShare),
      fix(e.waitP50, 1),
      fix(e.waitP95, 1),
      pct(b.matchedShare),
      pct(b.expiredShare),
      fix(b.waitP50, 1),
      fix(b.waitP95, 1),
    ]);
  });
  return table(rows, ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r']);
}

/** One row per swept value, and the baseline's row (which no bound affects). */
export function formatSweep(
  key: string,
  points: readonly { value: number; summary: Summary }[],
  baseline: Summary,
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
    int(s.poolTickets.mean),
  ];
  const rows: string[][] = [
    [key, 'matched', 'expired', 'wait p50 / p95 / max (s)', 'spread mean / p95', 'imbalance mean / p95', 'host ms mean / p95', 'pool mean'],
    ...points.map((p) => row(`engine ${p.value}`, p.summary)),
    row('FCFS baseline', baseline),
  ];
  return table(rows, ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r']);
}
