// Rule diagnostics (docs/rule-diagnostics.md) through the host's engine path in-process: tickets prepared by a
// TicketPool, ticked by a TickRunner on the native engine. A pool built to fail on one rule shows that rule,
// and only it, in TickResult.rejections of its ruleset; the other rulesets show nothing. Per ticket
// (TickResult.refusals), every ticket of such a pool names that rule, and the pool keeps it with the row.
import { describe, expect, it } from 'vitest';
import { queueConfigSchema } from '../../src/config/queue-config.js';
import type { ParsedEngineInput } from '../../src/engine/engine-input.js';
import { TicketPool } from '../../src/engine/ticket-pool.js';
import { engineParams, refusalName, REJECTION_REASONS, TickRunner, type RejectionReason } from '../../src/engine/tick-runner.js';

const NOW = 1_700_000_000_000;

// One ruleset per reason; on the spec's 0..1 mmr scale 0.1 mmr is one normalized unit.
const config = queueConfigSchema.parse({
  engine: { attribute_filters: [{ name: 'platform' }] },
  rulesets: [
    { id: 'spread', teams: 2, team_size: 1, max_skill_spread: 0.5 },
    { id: 'balance', teams: 2, team_size: 1, max_skill_spread: 2, max_team_imbalance: 0.5 },
    { id: 'hosts', teams: 2, team_size: 1, require_host: true, max_latency_ms: 100 },
    { id: 'attributes', teams: 2, team_size: 1 },
    { id: 'party', teams: 2, team_size: 2 },
  ],
});
const rulesetIds = config.rulesets.map((r) => r.id);

interface Ticket {
  mmr: number;
  players?: number;
  latencies?: Record<string, number>;
  platform?: string;
}

function engineInput(id: string, t: Ticket): ParsedEngineInput {
  const players = t.players ?? 1;
  return {
    playerIds: Array.from({ length: players }, (_, p) => `${id}-${p}`),
    mmrMean: t.mmr,
    latencies: new Map(Object.entries(t.latencies ?? {}).map(([host, ms]) => [host, { ms, measuredBy: players }])),
    attributes: new Map(t.platform === undefined ? [] : [['platform', { values: [t.platform], accepts: [t.platform] }]]),
  };
}

/** One tick over `tickets`, all competing only in ruleset `ruleset`. */
async function tick(ruleset: string, tickets: Ticket[]) {
  return (await tickPool(ruleset, tickets)).result;
}

async function tickPool(ruleset: string, tickets: Ticket[]) {
  const pool = new TicketPool({
    filters: config.engine.attribute_filters,
    rulesetIds,
    defaultLatencyMs: config.engine.default_latency_ms,
  });
  tickets.forEach((t, i) => {
    const id = `${ruleset}-${i}`;
    pool.insert(id, pool.prepare(engineInput(id, t), [ruleset], NOW - 1000 * (tickets.length - i)));
  });
  return { pool, result: await new TickRunner(engineParams(config)).run(pool, NOW, 1) };
}

const none = Object.fromEntries(REJECTION_REASONS.map((r) => [r, 0])) as Record<RejectionReason, number>;

// Per reason: a pool that cannot form a match in the ruleset, and what the tick counts for it.
const cases: [RejectionReason, string, Ticket[], { rejected: number; failed: number; examined: number }][] = [
  // 0.8 apart under a spread of 0.05: each seed finds the other beyond its window.
  ['skill_spread', 'spread', [{ mmr: 0.1 }, { mmr: 0.9 }], { rejected: 2, failed: 2, examined: 0 }],
  // Within the spread (1.5 units), but a 1v1 of them is 1.5 units unbalanced (bound 0.5).
  ['team_imbalance', 'balance', [{ mmr: 0.4 }, { mmr: 0.55 }], { rejected: 2, failed: 2, examined: 2 }],
  // No host within 100 ms of both; the third ticket has none at all (set aside before the search).
  [
    'no_acceptable_host',
    'hosts',
    [
      { mmr: 0.5, latencies: { eu: 50, us: 300 } },
      { mmr: 0.5, latencies: { eu: 300, us: 50 } },
      { mmr: 0.5, latencies: { eu: 500, us: 500 } },
    ],
    { rejected: 3, failed: 3, examined: 2 },
  ],
  [
    'attributes',
    'attributes',
    [
      { mmr: 0.5, platform: 'pc' },
      { mmr: 0.5, platform: 'console' },
    ],
    { rejected: 2, failed: 2, examined: 2 },
  ],
  // Teams of 2: the trio fits no team, as a seed or as the solo's candidate.
  ['party_size', 'party', [{ mmr: 0.5, players: 3 }, { mmr: 0.5 }], { rejected: 2, failed: 2, examined: 1 }],
];

describe('rule diagnostics: the engine counts why candidate matches failed, per ruleset', () => {
  it('lists the reasons in the engine order', () => {
    expect(REJECTION_REASONS).toEqual(['skill_spread', 'team_imbalance', 'no_acceptable_host', 'attributes', 'party_size']);
  });

  it.each(cases)('%s: a pool that fails on it counts it in its ruleset, and nothing else', async (reason, ruleset, tickets, want) => {
    const result = await tick(ruleset, tickets);
    expect(result.count).toBe(0);
    rulesetIds.forEach((id, r) => {
      const mine = id === ruleset;
      expect(result.rejections(r), id).toEqual(mine ? { ...none, [reason]: want.rejected } : none);
      expect(result.candidates(r), id).toEqual(mine ? { failed: want.failed, examined: want.examined } : { failed: 0, examined: 0 });
    });
    // Every ticket waits for that reason.
    expect(Array.from(result.refusals, refusalName)).toEqual(tickets.map(() => reason));
  });

  it('per ticket: a matched ticket has no refusal, and the pool keeps each refusal with its row', async () => {
    // The oldest two (0.5 and 0.52) form a match; 0.9 then finds no one in its window, nor beyond it (the
    // others are used).
    const { pool, result } = await tickPool('spread', [{ mmr: 0.5 }, { mmr: 0.52 }, { mmr: 0.9 }]);
    expect(result.count).toBe(1);
    expect(Array.from(result.refusals, refusalName)).toEqual([undefined, undefined, 'not_enough_tickets']);
    pool.recordRefusals(result.refusals, NOW);
    expect(pool.refusalsAtMs).toBe(NOW);
    // The matched rows leave: the last row moves into the first one's hole, with its code.
    pool.remove('spread-0');
    pool.remove('spread-1');
    expect(pool.rowOf('spread-2')).toBe(0);
    expect(refusalName(pool.refusal[0]!)).toBe('not_enough_tickets');
    // A row added since the tick reads none.
    pool.insert('late', pool.prepare(engineInput('late', { mmr: 0.3 }), ['spread'], NOW));
    expect(pool.refusal[pool.rowOf('late')!]).toBe(0);
  });

  it('a match that forms leaves nothing to count', async () => {
    const result = await tick('attributes', [
      { mmr: 0.5, platform: 'pc' },
      { mmr: 0.52, platform: 'pc' },
    ]);
    expect(result.count).toBe(1);
    for (const r of rulesetIds.keys()) expect(result.rejections(r)).toEqual(none);
  });

  it('refuses a ruleset index the queue does not have', async () => {
    const result = await tick('spread', [{ mmr: 0.5 }]);
    expect(result.candidates(0)).toEqual({ failed: 1, examined: 0 });
    expect(() => result.rejections(rulesetIds.length)).toThrow(RangeError);
    expect(() => result.candidates(-1)).toThrow(RangeError);
  });
});
