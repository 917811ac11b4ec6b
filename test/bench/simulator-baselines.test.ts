// The simulator's latency-aware first-come baseline (bench/simulator/systems.ts, LatencyAwareFcfs) on
// handmade arrivals: it never joins tickets an attribute filter forbids, never forms a match without a host
// within the latency bound in force, emits only full matches, on the host with the lowest worst latency, and
// gives the oldest forming match first pick. No engine runs here.
import { describe, expect, it } from 'vitest';
import { queueConfigSchema, type QueueConfig } from '../../src/config/queue-config.js';
import type { ParsedEngineInput } from '../../src/engine/engine-input.js';
import { attributesCompatible, boundsForWait, bestHost, type FormedMatch } from '../../bench/simulator/metrics.js';
import type { PopulationModel, SimTicket } from '../../bench/simulator/population.js';
import { Rng } from '../../bench/simulator/rng.js';
import { LatencyAwareFcfs } from '../../bench/simulator/systems.js';

const MODEL: PopulationModel = {
  name: 'test',
  regions: [
    { key: 'a', share: 0.5 },
    { key: 'b', share: 0.5 },
  ],
  hosts: [
    { key: 'a-1', region: 0 },
    { key: 'a-2', region: 0 },
    { key: 'b-1', region: 1 },
  ],
  interRegionMs: [
    [0, 150],
    [150, 0],
  ],
  extraHostMs: [5, 15],
  partySizes: [
    { size: 1, share: 0.5 },
    { size: 2, share: 0.5 },
  ],
  modeFilter: 'mode',
  modes: [
    { key: 'ranked', share: 0.5 },
    { key: 'casual', share: 0.5 },
  ],
  twoModesShare: 0,
  twoModesLabel: 'two modes',
};

/** 2 teams of 2, 100 ms relaxed to 150 ms after 10 s, one overlap filter `mode`. */
function queue(overrides: Record<string, unknown> = {}): QueueConfig {
  return queueConfigSchema.parse({
    ticket_ttl_secs: 60,
    engine: { attribute_filters: [{ name: 'mode', mode: 'overlap' }] },
    rulesets: [
      {
        id: '2v2',
        teams: 2,
        team_size: 2,
        max_latency_ms: 100,
        require_host: true,
        relaxation: [{ after_wait_secs: 10, max_skill_spread: 3, max_latency_ms: 150 }],
        ...overrides,
      },
    ],
  });
}

let seq = 0;
/** A ticket: arrival (ms), latency to hosts a-1, a-2, b-1, modes (undefined: unspecified), party size. */
function ticket(arrivalMs: number, latency: [number, number, number], modes?: string[], partySize = 1): SimTicket {
  const id = `t${seq++}`;
  const set = modes && new Set(modes);
  return {
    seq,
    id,
    arrivalMs,
    partySize,
    region: latency[2] < latency[0] ? 1 : 0,
    mmrMean: 0.5,
    eff: 0.5,
    latency: Uint16Array.from(latency),
    attrs: [set && { values: set, accepts: set }],
    twoModes: false,
    input: undefined as unknown as ParsedEngineInput,
  };
}

const ids = (m: FormedMatch) => m.tickets.map((t) => t.id);
const A: [number, number, number] = [20, 30, 160];
const B: [number, number, number] = [160, 170, 25];

describe('latency-aware FCFS baseline', () => {
  it('fills the oldest forming match first and emits it full, with teams of team_size', () => {
    const la = new LatencyAwareFcfs(queue(), MODEL);
    const ts = [ticket(0, A), ticket(1, A), ticket(2, A), ticket(3, A), ticket(4, A)];
    const [m, ...rest] = la.formMatches(5, ts);
    expect(rest).toEqual([]);
    expect(ids(m!)).toEqual(ts.slice(0, 4).map((t) => t.id));
    // First team with room: two in team 0, then two in team 1.
    expect(m!.teams).toEqual([0, 0, 1, 1]);
  });

  it('never joins tickets an attribute filter forbids; unspecified is compatible with everyone', () => {
    const la = new LatencyAwareFcfs(queue(), MODEL);
    const ts = [
      ticket(0, A, ['ranked']),
      ticket(1, A, ['casual']),
      ticket(2, A, undefined),
      ticket(3, A, ['casual']),
      ticket(4, A, ['ranked']),
      ticket(5, A, ['ranked', 'casual']),
      ticket(6, A, ['ranked']),
    ];
    const matches = la.formMatches(10, ts);
    expect(matches.map(ids)).toEqual([[ts[0]!.id, ts[2]!.id, ts[4]!.id, ts[5]!.id]]);
    for (const m of matches) expect(attributesCompatible(queue(), m.tickets)).toBe(true);
  });

  it('takes a ticket only while the match keeps a host within the bound, and emits on the best host', () => {
    const la = new LatencyAwareFcfs(queue(), MODEL);
    const ts = [
      ticket(0, A), // a-1 20, a-2 30
      ticket(1, B), // only b-1: opens a second forming match
      ticket(2, [90, 40, 160]), // a-1 and a-2 still within 100 ms; a-2 is now the better host
      ticket(3, [101, 35, 160]), // leaves a-2 alone
      ticket(4, [160, 101, 160]), // no host within 100 ms with the first: joins nothing, opens nothing
      ticket(5, [120, 45, 160]),
    ];
    const matches = la.formMatches(6, ts);
    expect(matches.map(ids)).toEqual([[ts[0]!.id, ts[2]!.id, ts[3]!.id, ts[5]!.id]]);
    expect(matches[0]!.host).toBe(1);
    expect(matches[0]!.host).toBe(bestHost(matches[0]!.tickets));
  });

  it("applies the relaxation step in force by the oldest ticket's wait", () => {
    const far: [number, number, number] = [140, 145, 150];
    const ts = [ticket(0, A), ticket(100, far), ticket(200, far), ticket(300, far)];
    const la = new LatencyAwareFcfs(queue(), MODEL);
    // Before 10 s the far tickets are over 100 ms everywhere: they join nothing (and cannot open a match).
    expect(la.formMatches(9_999, ts)).toEqual([]);
    // From 10 s of the oldest's wait the bound is 150 ms: a-1 keeps everyone within it.
    const [m] = la.formMatches(10_000, ts);
    expect(ids(m!)).toEqual(ts.map((t) => t.id));
    expect(m!.host).toBe(0);
    expect(boundsForWait(queue().rulesets[0]!, 10_000).latency).toBe(150);
  });

  it('puts a party whole into one team, or into another forming match', () => {
    const la = new LatencyAwareFcfs(queue(), MODEL);
    const ts = [ticket(0, A), ticket(1, A, undefined, 2), ticket(2, A), ticket(3, A, undefined, 2), ticket(4, A, undefined, 3)];
    const [m, ...rest] = la.formMatches(5, ts);
    expect(rest).toEqual([]);
    // The solo in team 0, the pair in team 1, the next solo fills team 0. The second pair opens a new forming
    // match; a party of 3 exceeds team_size 2 and never matches.
    expect(ids(m!)).toEqual([ts[0]!.id, ts[1]!.id, ts[2]!.id]);
    expect(m!.teams).toEqual([0, 1, 0]);
  });

  it('ticks: matched tickets leave, the rest wait, and tickets expire at the TTL', async () => {
    const la = new LatencyAwareFcfs(queue(), MODEL);
    const ts = [ticket(0, A), ticket(10, B), ticket(20, A), ticket(30, A), ticket(40, A)];
    await la.tick(1000, ts);
    expect(la.metrics.matches).toBe(1);
    expect([...la.waiting()].map((t) => t.id)).toEqual([ts[1]!.id]);
    await la.tick(60_010, []);
    expect(la.waitingCount()).toBe(0);
    const s = la.metrics.summary(la.waiting());
    expect([s.arrivedTickets, s.ticketsMatched, s.expiredTickets, s.waitingAtEndTickets]).toEqual([5, 4, 1, 0]);
    expect(s.violations.matches).toBe(0);
    expect(s.hostOverLatency).toBe(0);
  });

  it('on random arrivals: full matches only, each ticket once, filters kept, a host within the bound in force, the best host', () => {
    const config = queue({ team_size: 5 });
    const ruleset = config.rulesets[0]!;
    const rng = new Rng(42);
    const ts: SimTicket[] = [];
    for (let i = 0; i < 400; i++) {
      const home = rng.int(3);
      const latency = [0, 1, 2].map((h) => (h === home ? rng.uniform(15, 60) : rng.uniform(60, 200))) as [number, number, number];
      const modes = rng.chance(0.1) ? undefined : rng.chance(0.2) ? ['casual'] : ['ranked'];
      ts.push(ticket(i * 25, latency.map(Math.round) as [number, number, number], modes, 1 + rng.int(rng.chance(0.3) ? 5 : 1)));
    }
    const nowMs = 400 * 25 + 3000;
    const matches = new LatencyAwareFcfs(config, MODEL).formMatches(nowMs, ts);
    expect(matches.length).toBeGreaterThan(10);
    const seen = new Set<string>();
    for (const m of matches) {
      for (const t of m.tickets) {
        expect(seen.has(t.id)).toBe(false);
        seen.add(t.id);
      }
      const players = [0, 1].map((team) => m.tickets.reduce((n, t, i) => n + (m.teams[i] === team ? t.partySize : 0), 0));
      expect(players).toEqual([5, 5]);
      expect(attributesCompatible(config, m.tickets)).toBe(true);
      const oldest = Math.min(...m.tickets.map((t) => t.arrivalMs));
      const worst = (h: number) => Math.max(...m.tickets.map((t) => t.latency[h]!));
      expect(worst(m.host!)).toBeLessThanOrEqual(boundsForWait(ruleset, nowMs - oldest).latency);
      for (let h = 0; h < 3; h++) expect(worst(m.host!)).toBeLessThanOrEqual(worst(h));
    }
  });
});
