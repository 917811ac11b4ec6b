// The match history behind the statistics and the wait estimates (src/queue/match-history.ts,
// docs/explain-and-statistics.md): waits per ruleset over the last five minutes, weighted percentiles once a
// bucket keeps a sample, and the estimate of the remaining wait conditioned on the wait so far.
import { describe, expect, it } from 'vitest';
import {
  estimateRemainingWait,
  HISTORY_WINDOW_MS,
  MatchHistory,
  MIN_ESTIMATE_TICKETS,
  waitQuantile,
} from '../../src/queue/match-history.js';

const T0 = 1_000_000_000; // a bucket boundary

describe('the match history', () => {
  it('counts matches, tickets and players per ruleset, within the window only', () => {
    const h = new MatchHistory();
    h.record('duel', T0, [1000, 2000], 2);
    h.record('duel', T0 + 15_000, [3000, 5000], 2);
    h.record('squads', T0 + 15_000, [4000, 4000, 4000], 6);
    const duel = h.window(['duel'], T0 + 20_000);
    expect(duel).toMatchObject({ windowMs: HISTORY_WINDOW_MS, matches: 2, tickets: 4, players: 4 });
    expect(h.window(['duel', 'squads'], T0 + 20_000)).toMatchObject({ matches: 3, tickets: 7, players: 10 });
    expect(h.window(['nope'], T0)).toMatchObject({ matches: 0, tickets: 0, waits: [] });
    // Five minutes on, the first bucket has left the window; the second is still in it.
    expect(h.window(['duel'], T0 + HISTORY_WINDOW_MS + 5_000)).toMatchObject({ matches: 1, tickets: 2 });
    expect(h.window(['duel'], T0 + HISTORY_WINDOW_MS + 25_000)).toMatchObject({ matches: 0, tickets: 0 });
  });

  it('keeps a bounded sample of a busy bucket, whose waits then stand for several tickets each', () => {
    let seed = 1;
    const h = new MatchHistory(() => (seed = (seed * 48271) % 2147483647) / 2147483647);
    // 20,000 tickets in one bucket: three in eight waited 1 s, the rest 9 s.
    for (let i = 0; i < 5000; i++) h.record('duel', T0 + 1, [1000, 9000, 9000, i % 2 === 0 ? 1000 : 9000], 4);
    const w = h.window(['duel'], T0 + 2);
    expect(w.tickets).toBe(20_000);
    expect(w.waits.length).toBeLessThanOrEqual(256);
    expect(w.waits.reduce((sum, x) => sum + x.weight, 0)).toBeCloseTo(20_000, 6);
    expect(waitQuantile(w.waits, 0.1)).toBe(1000);
    expect(waitQuantile(w.waits, 0.5)).toBe(9000);
    // Old buckets are dropped as new ones come: at most five minutes of them.
    for (let b = 1; b <= 100; b++) h.record('duel', T0 + b * 10_000, [1], 1);
    expect(h.window(['duel'], T0 + 100 * 10_000).matches).toBe(30);
  });

  it('nearest-rank percentiles, weighted', () => {
    const waits = [1, 2, 3, 4].map((s) => ({ waitMs: s * 1000, weight: 1 }));
    expect([0.25, 0.5, 0.51, 0.99, 1].map((q) => waitQuantile(waits, q))).toEqual([1000, 2000, 3000, 4000, 4000]);
    expect(
      waitQuantile(
        [
          { waitMs: 1, weight: 3 },
          { waitMs: 2, weight: 1 },
        ],
        0.75,
      ),
    ).toBe(1);
    expect(waitQuantile([], 0.5)).toBeUndefined();
  });
});

describe('the estimated remaining wait', () => {
  const h = new MatchHistory();
  // 20 tickets matched after 1 s to 20 s.
  for (let s = 1; s <= 20; s++) h.record('duel', T0, [s * 1000], 1);
  const window = h.window(['duel'], T0 + 1000);

  it('a new ticket: the median wait of the matched tickets', () => {
    expect(estimateRemainingWait(window, 0)).toEqual({ available: true, remainingMs: 10_000, basedOnTickets: 20 });
  });

  it('a ticket that has waited: the median of what the tickets that waited at least as long waited beyond that', () => {
    // Waited 6 s: the 15 tickets of 6..20 s waited 0..14 s more; their median is 7 s.
    expect(estimateRemainingWait(window, 6000)).toEqual({ available: true, remainingMs: 7000, basedOnTickets: 15 });
  });

  it(`fewer than ${MIN_ESTIMATE_TICKETS} such tickets: no estimate, and why`, () => {
    const none = estimateRemainingWait(window, 12_000);
    expect(none).toMatchObject({ available: false, basedOnTickets: 9 });
    expect(none.available ? '' : none.reason).toBe(
      'too little history: 9 ticket(s) matched after waiting at least 12.0 s in the last 300 s (10 needed)',
    );
  });
});
