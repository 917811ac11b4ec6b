// Seeded generator of realistic engine pools, shared by benchmarks (bench/engine-reference.ts) and tests.
// It draws players (mmr, per-host latency around a home region), groups them into parties, and encodes
// the parties as the engine's columns (PoolArrays) the way TicketPool does (docs/engine.md): mean mmr,
// worst latency per host with the default latency for unmeasured pairs, interned attribute bitsets,
// unspecified attributes as "compatible with everyone". Optionally it also returns the same tickets as
// EngineInput messages, for benchmarks that go through TicketPool or the API.
import { create, toBinary } from '@bufbuild/protobuf';
import { queueConfigSchema, type QueueConfig } from '../src/config/queue-config.js';
import type { PoolArrays, QueueParams } from '../src/engine/native.js';
import { engineParams } from '../src/engine/tick-runner.js';
import { EngineInputSchema } from '../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { parseTicketEngineInput, type ParsedEngineInput } from '../src/engine/engine-input.js';
import { prng } from './prng.js';

export { prng };

const ALL = 0xffff_ffff_ffff_ffffn;

export interface GeneratedFilter {
  name: string;
  mode: 'overlap' | 'containment';
  /** Interned values: index = bit in the column bitsets. */
  values: readonly string[];
}

/** The three attribute filters of the generated pools. */
export const GENERATED_FILTERS: readonly GeneratedFilter[] = [
  { name: 'game_mode', mode: 'overlap', values: ['ranked', 'casual', 'arcade'] },
  { name: 'language', mode: 'containment', values: ['en', 'de', 'fr', 'es', 'pt'] },
  { name: 'platform', mode: 'overlap', values: ['pc', 'console', 'mobile'] },
];

export interface PoolGeneratorOptions {
  /** Number of tickets (parties). */
  tickets: number;
  /** PRNG seed; same seed and options = same pool. Default 1. */
  seed?: number;
  /** Tick time; arrivals are whole milliseconds in [nowMs - maxWaitMs, nowMs]. Default 1.7e12. */
  nowMs?: number;
  /** Default 120 000. */
  maxWaitMs?: number;
  /** Hosts (regions on a ring), at most 64. Default 8. */
  hosts?: number;
  /** Latency assumed for an unmeasured (player, host) pair, as TicketPool applies it. Default 150. */
  defaultLatencyMs?: number;
  /** ruleset_mask of every ticket. Default 1 (ruleset 0). */
  rulesetMask?: number;
  /** Also build the tickets as EngineInput messages (slower; memory heavy for 1M). Default false. */
  engineInputs?: boolean;
}

export interface GeneratedPool {
  /** Exactly `tickets` rows, ready for TickEngine.run or the reference engine. */
  columns: PoolArrays;
  nowMs: number;
  filters: readonly GeneratedFilter[];
  hostKeys: string[];
  /** Present when `engineInputs` was set: ticket i's EngineInput, and its arrival (epoch ms). */
  engineInputs?: ParsedEngineInput[];
}

/** Party sizes 1..5 with decreasing probability (cumulative weights 50/22/13/9/6 %). */
function partySize(rand: () => number): number {
  const u = rand();
  return u < 0.5 ? 1 : u < 0.72 ? 2 : u < 0.85 ? 3 : u < 0.94 ? 4 : 5;
}

function normal(rand: () => number): number {
  // Box-Muller; 1 - u keeps the log argument in (0, 1].
  return Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
}

const clamp = (x: number, lo: number, hi: number) => Math.min(hi, Math.max(lo, x));

/** A ticket's attribute for one filter: the chosen value indices and accepted indices, or undefined. */
type AttrDraw = { values: number[]; accepts: number[] } | undefined;

function drawAttributes(rand: () => number): AttrDraw[] {
  const pick = (n: number) => Math.floor(rand() * n);
  // game_mode (overlap): 25% unspecified; else one mode, sometimes two.
  let gameMode: AttrDraw;
  if (rand() >= 0.25) {
    const a = pick(3);
    const values = rand() < 0.3 ? [...new Set([a, pick(3)])] : [a];
    gameMode = { values, accepts: values };
  }
  // language (containment): 40% unspecified; else the party's language, accepting it, often English, and
  // sometimes one more.
  let language: AttrDraw;
  if (rand() >= 0.4) {
    const own = pick(5);
    const accepts = new Set([own]);
    if (rand() < 0.6) accepts.add(0);
    if (rand() < 0.2) accepts.add(pick(5));
    language = { values: [own], accepts: [...accepts] };
  }
  // platform (overlap): 50% unspecified; else one platform, or crossplay with two or three.
  let platform: AttrDraw;
  if (rand() >= 0.5) {
    const values = rand() < 0.7 ? [pick(3)] : [...new Set([pick(3), pick(3), pick(3)])];
    platform = { values, accepts: values };
  }
  return [gameMode, language, platform];
}

const bits = (indices: readonly number[]) => indices.reduce((m, i) => m | (1n << BigInt(i)), 0n);

/** Generates a pool of `tickets` parties. See the file comment for the model. */
export function generatePool(options: PoolGeneratorOptions): GeneratedPool {
  const n = options.tickets;
  const rand = prng(options.seed ?? 1);
  const nowMs = options.nowMs ?? 1_700_000_000_000;
  const maxWaitMs = options.maxWaitMs ?? 120_000;
  const H = options.hosts ?? 8;
  const defaultLatency = options.defaultLatencyMs ?? 150;
  const filters = GENERATED_FILTERS;
  const F = filters.length;
  const hostKeys = Array.from({ length: H }, (_, h) => `region-${h}`);

  const columns = emptyPoolArrays(n, F, H);
  columns.rulesetMask.fill(options.rulesetMask ?? 1);
  const engineInputs: ParsedEngineInput[] | undefined = options.engineInputs ? [] : undefined;
  const worst = new Float64Array(H);
  const measuredBy = new Uint8Array(H);

  for (let i = 0; i < n; i++) {
    const size = partySize(rand);
    // Party skill ~ normal(0.5, 0.15), players spread a little around it; all clamped to [0, 1].
    const partyMmr = clamp(0.5 + 0.15 * normal(rand), 0, 1);
    // Hosts are regions on a ring; the party lives near one of them (a member may live next door).
    const home = Math.floor(rand() * Math.max(H, 1));
    worst.fill(0);
    measuredBy.fill(0);
    let mmrSum = 0;
    const players: { playerId: string; mmr: number; latencies: Record<string, number> }[] = [];
    for (let k = 0; k < size; k++) {
      const mmr = clamp(partyMmr + 0.03 * normal(rand), 0, 1);
      mmrSum += mmr;
      const playerHome = rand() < 0.85 ? home : (home + (rand() < 0.5 ? 1 : H - 1)) % Math.max(H, 1);
      const latencies: Record<string, number> = {};
      for (let h = 0; h < H; h++) {
        if (rand() < 0.02) continue; // not measured: the default applies
        const ring = Math.min(Math.abs(h - playerHome), H - Math.abs(h - playerHome));
        const ms = Math.round(clamp(20 + 40 * ring + 15 * Math.abs(normal(rand)), 1, 0xffff));
        latencies[hostKeys[h]!] = ms;
        worst[h] = Math.max(worst[h]!, ms);
        measuredBy[h]!++;
      }
      players.push({ playerId: `t${i}-p${k}`, mmr, latencies });
    }
    columns.partySize[i] = size;
    columns.mmrMean[i] = mmrSum / size;
    columns.arrivalMs[i] = nowMs - Math.floor(rand() * maxWaitMs);
    for (let h = 0; h < H; h++) {
      // TicketPool: worst measured latency; if any player did not measure the host, at least the default.
      const ms = measuredBy[h] === 0 ? defaultLatency : measuredBy[h]! < size ? Math.max(worst[h]!, defaultLatency) : worst[h]!;
      columns.latencyMs[i * H + h] = Math.min(ms, 0xffff);
    }
    const attrs = drawAttributes(rand);
    attrs.forEach((a, f) => {
      const unspecifiedValues = filters[f]!.mode === 'overlap' ? ALL : 0n;
      columns.attrValues[i * F + f] = a ? bits(a.values) : unspecifiedValues;
      columns.attrAccepts[i * F + f] = a ? bits(a.accepts) : ALL;
    });
    if (engineInputs) {
      const attributes: Record<string, { values: string[]; accepts: string[] }> = {};
      attrs.forEach((a, f) => {
        const filter = filters[f]!;
        if (a)
          attributes[filter.name] = { values: a.values.map((v) => filter.values[v]!), accepts: a.accepts.map((v) => filter.values[v]!) };
      });
      // Encoded and parsed as CreateTicket does.
      engineInputs.push(
        parseTicketEngineInput(toBinary(EngineInputSchema, create(EngineInputSchema, { players, attributes })), `t${i}`, 'engine_input'),
      );
    }
  }
  return { columns, nowMs, filters, hostKeys, ...(engineInputs ? { engineInputs } : {}) };
}

/**
 * The queue of the generated pools, matching the engine crate's bench (crates/engine/benches/tick.rs): one
 * 2x5 ruleset with require_host and two relaxation steps, the generated pools' three filters.
 */
export const GENERATED_QUEUE: QueueConfig = queueConfigSchema.parse({
  engine: {
    mmr_normalization_ref: 0.1,
    party_synergy_bonus: 0.01,
    attribute_filters: GENERATED_FILTERS.map(({ name, mode }) => ({ name, mode })),
  },
  rulesets: [
    {
      id: '5v5',
      teams: 2,
      team_size: 5,
      max_skill_spread: 0.5,
      max_team_imbalance: 0.2,
      max_latency_ms: 120,
      require_host: true,
      relaxation: [
        { after_wait_secs: 30, max_skill_spread: 1.0, max_latency_ms: 200 },
        { after_wait_secs: 90, max_skill_spread: 3.0, max_latency_ms: 300 },
      ],
    },
  ],
});

/** GENERATED_QUEUE as the engine's parameters. */
export function generatedQueueParams(): QueueParams {
  return engineParams(GENERATED_QUEUE);
}

/** Zeroed pool columns for `tickets` rows, `filters` attribute filters and `hosts` host keys. */
export function emptyPoolArrays(tickets: number, filters: number, hosts: number): PoolArrays {
  return {
    partySize: new Uint8Array(tickets),
    mmrMean: new Float64Array(tickets),
    arrivalMs: new Float64Array(tickets),
    rulesetMask: new Uint32Array(tickets),
    attrValues: new BigUint64Array(tickets * filters),
    attrAccepts: new BigUint64Array(tickets * filters),
    latencyMs: new Uint16Array(tickets * hosts),
    ticketCount: tickets,
    filterCount: filters,
    hostCount: hosts,
  };
}

/** Output arrays sized for the worst case of a pool (OutputCapacity::for_pool). */
export function matchArrays(tickets: number, filters: number) {
  return {
    matchRuleset: new Uint32Array(tickets),
    matchOffsets: new Uint32Array(tickets + 1),
    matchTickets: new Uint32Array(tickets),
    ticketTeam: new Uint32Array(tickets),
    matchPreferredHost: new Uint32Array(tickets),
    matchAcceptableHosts: new BigUint64Array(tickets),
    matchAccepts: new BigUint64Array(tickets * filters),
  };
}
