// The dashboard's in-memory history (src/api/dashboard/queue-activity.ts), on a clock the test moves:
// buckets, per-minute rates, wait percentiles, the rule window and the recent matches.
import { describe, expect, it } from 'vitest';
import { BUCKET_MS, BUCKETS, QueueActivity } from '../../src/api/dashboard/queue-activity.js';
import type { MatchFacts } from '../../src/queue/queue-telemetry.js';

const match = (atMs: number, waitsMs: number[], skillSpread = 1): MatchFacts => ({
  queueId: 'q',
  rulesetId: 'duel',
  matchId: `m-${atMs}-${waitsMs.join('-')}`,
  atMs,
  waitsMs,
  players: waitsMs.length,
  skillSpread,
  teamImbalance: skillSpread / 2,
  host: 'eu-west',
  teams: waitsMs.map((_, i) => [`p${i}`]),
});

describe('the dashboard activity history', () => {
  it('buckets arrivals, matches and waits, oldest first, null where nothing was measured', () => {
    let now = 1_000 * BUCKET_MS; // a bucket boundary
    const activity = new QueueActivity(() => now);
    activity.ticketsCreated('q', 3);
    activity.matchFormed(match(now, [1000, 3000]));
    now += BUCKET_MS;
    activity.ticketsCreated('q', 1);
    for (let w = 1; w <= 100; w++) activity.matchFormed(match(now, [w * 100], 2));

    const { series } = activity.view('q', 60_000);
    expect(series.startMs).toHaveLength(BUCKETS);
    expect(series.startMs.at(-1)).toBe(now);
    expect(series.startMs.at(-1)! - series.startMs[0]!).toBe((BUCKETS - 1) * BUCKET_MS);
    expect(series.arrivalsPerMinute.slice(-3)).toEqual([0, 18, 6]);
    expect(series.matchesPerMinute.slice(-2)).toEqual([6, 600]);
    expect(series.playersPerMinute.slice(-2)).toEqual([12, 600]);
    expect(series.waitP50Secs.slice(-3)).toEqual([null, 1, 5]);
    expect(series.waitP95Secs.slice(-2)).toEqual([3, 9.5]);
    expect(series.skillSpreadMean.slice(-2)).toEqual([1, 2]);
    expect(series.teamImbalanceMean.slice(-2)).toEqual([0.5, 1]);
  });

  it('forgets buckets older than the window and sums rule rejections over the asked window, most first', () => {
    let now = 5_000 * BUCKET_MS;
    const activity = new QueueActivity(() => now);
    const tick = (counts: Record<string, number>) =>
      activity.tick({
        queueId: 'q',
        tickMs: 1,
        engineMs: 1,
        ticketsExamined: 10,
        rejections: Object.entries(counts).map(([rule, count]) => ({ rulesetId: 'duel', rule, count })),
      });
    tick({ skill_spread: 50 });
    activity.samplePool('q', 7);
    now += 6 * BUCKET_MS;
    tick({ skill_spread: 2, attributes: 5 });
    tick({ attributes: 1 });
    expect(activity.view('q', 60_000).rules).toEqual([
      { rulesetId: 'duel', rule: 'skill_spread', count: 52 },
      { rulesetId: 'duel', rule: 'attributes', count: 6 },
    ]);
    expect(activity.view('q', 30_000).rules).toEqual([
      { rulesetId: 'duel', rule: 'attributes', count: 6 },
      { rulesetId: 'duel', rule: 'skill_spread', count: 2 },
    ]);
    expect(activity.view('q', 60_000).series.poolSize.slice(-7)).toEqual([7, null, null, null, null, null, null]);
    now += BUCKETS * BUCKET_MS;
    expect(activity.view('q', 60 * 60_000).series.poolSize.every((p) => p === null)).toBe(true);
  });

  it('keeps the last 20 matches, newest first, with their longest wait', () => {
    const activity = new QueueActivity(() => 0);
    for (let i = 0; i < 25; i++) activity.matchFormed(match(i, [i, 2 * i]));
    const { recentMatches } = activity.view('q', 60_000);
    expect(recentMatches).toHaveLength(20);
    expect(recentMatches[0]).toMatchObject({ atMs: 24, longestWaitMs: 48, host: 'eu-west', teams: [['p0'], ['p1']] });
    expect(recentMatches.at(-1)!.atMs).toBe(5);
  });
});
