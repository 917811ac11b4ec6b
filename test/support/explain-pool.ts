// A handmade pool for the explain and statistics tests (docs/explain-and-statistics.md): six tickets in a
// 1x3 ruleset ("trio") that can never form a match, each pair kept apart by one known rule, so the counts
// per rule of the party of two ("target") are known exactly, and a tick records skill_spread against it.
// Also a 1x2 queue ("pairs") where any two tickets match at once.
import { randomUUID } from 'node:crypto';
import { stringify } from 'yaml';
import { engineInput } from './fixtures.js';

/**
 * max_skill_spread 1.0 normalized unit (0.1 raw mmr), a host within 100 ms required, one overlap filter; the bounds
 * widen only by one relaxation step, after an hour (no continuous expansion, so the counts do not move with time).
 */
export const TRIO_QUEUE = stringify({
  config: {
    tick_interval_ms: 100,
    engine: { attribute_filters: [{ name: 'mode' }] },
    rulesets: [
      {
        id: 'trio',
        teams: 1,
        team_size: 3,
        max_skill_spread: 1.0,
        max_latency_ms: 100,
        require_host: true,
        relaxation: [{ after_wait_secs: 3600, max_skill_spread: 3.0, max_latency_ms: 100 }],
        expansion: { curve: 'none' },
      },
    ],
  },
});

export const PAIRS_QUEUE = stringify({ config: { tick_interval_ms: 100, rulesets: [{ id: 'pairs', teams: 1, team_size: 2 }] } });

export interface Member {
  players: number;
  mmr: number;
  mode: string;
  latencies: Record<string, number>;
}

/**
 * The target (a party of 2 at 0.50, mode ranked, eu-west 50 ms) and five solos or parties, each failing one rule
 * against it: 0.80 and 0.20 beyond its skill window, casual (attributes), no host within 100 ms of it (its
 * eu-west is 300 ms; eu-central 50 ms, which the target did not measure: 150 ms by default), and a party of 2
 * (2 + 2 > 3: party). Among themselves, no three of them can form a match either.
 */
export const TRIO_MEMBERS = {
  target: { players: 2, mmr: 0.5, mode: 'ranked', latencies: { 'eu-west': 50 } },
  high: { players: 1, mmr: 0.8, mode: 'ranked', latencies: { 'eu-west': 50 } },
  low: { players: 1, mmr: 0.2, mode: 'ranked', latencies: { 'eu-west': 50 } },
  casual: { players: 1, mmr: 0.52, mode: 'casual', latencies: { 'eu-west': 50 } },
  far: { players: 1, mmr: 0.53, mode: 'ranked', latencies: { 'eu-west': 300, 'eu-central': 50 } },
  duo: { players: 2, mmr: 0.51, mode: 'ranked', latencies: { 'eu-west': 50 } },
} satisfies Record<string, Member>;

/** The target's counts in "trio" (ExplainTicketResponse.rulesets[0].candidates, JSON names). */
export const TARGET_COUNTS = {
  inRuleset: 5,
  partyFits: 4, // all but the duo
  skillWithinSpread: 3, // casual, far, duo
  attributesCompatible: 4, // all but casual
  acceptableHost: 4, // all but far
  playersNeeded: 1,
};

export function memberInput(m: Member): Uint8Array {
  return engineInput({
    players: Array.from({ length: m.players }, () => ({ playerId: `p-${randomUUID()}`, mmr: m.mmr, latencies: m.latencies })),
    attributes: { mode: { values: [m.mode], accepts: [m.mode] } },
  });
}

/**
 * Whether an ExplainTicketResponse (message or JSON) holds a refusal recorded by a tick that ran after `afterMs`:
 * one that saw the whole pool, not a tick that ran while the members were still being created.
 */
export function refusedAfter(
  x: { lastRefusal?: { tickAt?: { seconds: bigint; nanos: number } | string } | undefined },
  afterMs: number,
): boolean {
  const at = x.lastRefusal?.tickAt;
  if (at === undefined) return false;
  const ms = typeof at === 'string' ? Date.parse(at) : Number(at.seconds) * 1000 + at.nanos / 1e6;
  return ms > afterMs;
}

/** Creates every member in `queueId` through `create`; answers their ticket ids by name. */
export async function createTrio(
  queueId: string,
  create: (ticket: { id: string; queueId: string; engineInput: Uint8Array }) => Promise<unknown>,
): Promise<Record<keyof typeof TRIO_MEMBERS, string>> {
  const ids: Record<string, string> = {};
  for (const [name, m] of Object.entries(TRIO_MEMBERS)) {
    const id = randomUUID();
    ids[name] = id;
    await create({ id, queueId, engineInput: memberInput(m) });
  }
  return ids as Record<keyof typeof TRIO_MEMBERS, string>;
}

export const solo = (mmr = 0.5): Uint8Array => engineInput({ players: [{ playerId: `p-${randomUUID()}`, mmr }] });
