// The simulated player population: Poisson arrivals of tickets (parties), skill, region and latency, and
// attribute values. Every ticket carries both the real EngineInput (fed to the native engine through
// TicketPool.prepare) and the plain values the metrics and the baseline read.
import { create, toBinary } from '@bufbuild/protobuf';
import type { QueueConfig } from '../../src/config/queue-config.js';
import { EngineInputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { parseTicketEngineInput, type ParsedEngineInput } from '../../src/engine/engine-input.js';
import { Rng } from './rng.js';

export interface Region {
  key: string;
  share: number;
}

/** Host keys = regions: one game-server host per region. */
export const REGIONS: readonly Region[] = [
  { key: 'eu-west', share: 0.3 },
  { key: 'eu-central', share: 0.2 },
  { key: 'us-east', share: 0.2 },
  { key: 'us-west', share: 0.12 },
  { key: 'sa-east', share: 0.08 },
  { key: 'ap-southeast', share: 0.1 },
];

/**
 * Round trip between regions' datacenters (ms), roughly public cloud inter-region figures. A player's
 * latency to a foreign host is their access latency plus this, plus jitter.
 */
export const INTER_REGION_MS: readonly (readonly number[])[] = [
  //euw euc  use  usw  sae  aps
  [0, 25, 80, 140, 190, 170], // eu-west
  [25, 0, 95, 155, 205, 160], // eu-central
  [80, 95, 0, 65, 120, 215], // us-east
  [140, 155, 65, 0, 170, 165], // us-west
  [190, 205, 120, 170, 0, 320], // sa-east
  [170, 160, 215, 165, 320, 0], // ap-southeast
];

export const PARTY_SIZES: readonly { size: number; share: number }[] = [
  { size: 1, share: 0.6 },
  { size: 2, share: 0.2 },
  { size: 3, share: 0.1 },
  { size: 4, share: 0.05 },
  { size: 5, share: 0.05 },
];
export const MEAN_PARTY_SIZE = PARTY_SIZES.reduce((s, p) => s + p.size * p.share, 0);

export const GAME_MODES: readonly { key: string; share: number }[] = [
  { key: 'ranked', share: 0.55 },
  { key: 'unranked', share: 0.3 },
  { key: 'arcade', share: 0.15 },
];

/** Population model knobs, documented in bench/SIMULATOR.md. */
export const MODEL = {
  mmrMean: 0.5,
  mmrSd: 0.15,
  /** Spread of a party's members around the party's centre; the centre's sd is chosen so a player's marginal is mmrSd. */
  partyMemberSd: 0.05,
  accessMs: [15, 40] as const,
  /** Jitter on a foreign host, as a fraction of the inter-region RTT. */
  foreignJitter: [-0.05, 0.15] as const,
  /** Share of players missing 1-3 foreign-host measurements. */
  missingSomeShare: 0.06,
  /** Share of players who measured only their own region's host. */
  onlyOwnShare: 0.01,
  /** Share of tickets that accept two game modes. */
  twoModesShare: 0.08,
};

/** Spoken languages per region, for a queue with a `language` filter (approximate). */
const LANGUAGES: readonly (readonly [string, number][])[] = [
  [
    ['en', 0.6],
    ['fr', 0.2],
    ['es', 0.2],
  ],
  [
    ['de', 0.7],
    ['pl', 0.3],
  ],
  [
    ['en', 0.85],
    ['es', 0.15],
  ],
  [
    ['en', 0.85],
    ['es', 0.15],
  ],
  [
    ['pt', 0.8],
    ['es', 0.2],
  ],
  [
    ['en', 0.7],
    ['zh', 0.3],
  ],
];

export interface SimTicket {
  seq: number;
  id: string;
  arrivalMs: number;
  partySize: number;
  /** Region index of the party (and its home host). */
  region: number;
  /** Mean raw mmr of the party, and effective skill (mean + synergy * (size - 1)). */
  mmrMean: number;
  eff: number;
  /** Worst player latency per host index (REGIONS order); an unmeasured host counts as default_latency_ms. */
  latency: Uint16Array;
  /** Per queue attribute filter (config order): the ticket's values/accepts, or undefined if unspecified. */
  attrs: ({ values: Set<string>; accepts: Set<string> } | undefined)[];
  twoModes: boolean;
  input: ParsedEngineInput;
}

export class Population {
  private readonly rng: Rng;
  private readonly ticketRatePerMs: number;
  private nextArrival: number;
  private seq = 0;
  private readonly partyCentreSd = Math.sqrt(MODEL.mmrSd ** 2 - MODEL.partyMemberSd ** 2);
  /** Filters the model cannot fill in (left unspecified = compatible with everyone). */
  readonly unmodelledFilters: string[];

  constructor(
    private readonly config: QueueConfig,
    playersPerSec: number,
    seed: number,
    readonly startMs: number,
  ) {
    this.rng = new Rng(seed);
    this.ticketRatePerMs = playersPerSec / MEAN_PARTY_SIZE / 1000;
    this.nextArrival = startMs + this.rng.exponential(this.ticketRatePerMs);
    this.unmodelledFilters = config.engine.attribute_filters.map((f) => f.name).filter((n) => n !== 'game_mode' && n !== 'language');
  }

  /** Tickets arriving in (previous call's untilMs, untilMs], in arrival order. */
  arrivalsUntil(untilMs: number): SimTicket[] {
    const out: SimTicket[] = [];
    while (this.nextArrival <= untilMs) {
      out.push(this.ticket(Math.round(this.nextArrival)));
      this.nextArrival += this.rng.exponential(this.ticketRatePerMs);
    }
    return out;
  }

  private ticket(arrivalMs: number): SimTicket {
    const rng = this.rng;
    const seq = this.seq++;
    const size = PARTY_SIZES[rng.pick(PARTY_SIZES.map((p) => p.share))]!.size;
    const region = rng.pick(REGIONS.map((r) => r.share));
    const centre = size === 1 ? rng.normal(MODEL.mmrMean, MODEL.mmrSd) : rng.normal(MODEL.mmrMean, this.partyCentreSd);
    const defaultLatency = this.config.engine.default_latency_ms;

    const players = [];
    const worst = new Uint16Array(REGIONS.length);
    let mmrSum = 0;
    for (let i = 0; i < size; i++) {
      const mmr = clamp01(size === 1 ? centre : rng.normal(centre, MODEL.partyMemberSd));
      mmrSum += mmr;
      const latencies: Record<string, number> = {};
      const access = rng.uniform(MODEL.accessMs[0], MODEL.accessMs[1]);
      const onlyOwn = rng.chance(MODEL.onlyOwnShare);
      const missing = new Set<number>();
      if (!onlyOwn && rng.chance(MODEL.missingSomeShare)) {
        const k = 1 + rng.int(3);
        for (let j = 0; j < k; j++) missing.add(rng.int(REGIONS.length));
      }
      REGIONS.forEach((host, h) => {
        let ms: number | undefined;
        if (h === region) ms = access;
        else if (!onlyOwn && !missing.has(h)) {
          const base = INTER_REGION_MS[region]![h]!;
          ms = Math.max(access, access + base * (1 + rng.uniform(MODEL.foreignJitter[0], MODEL.foreignJitter[1])));
        }
        const rounded = ms === undefined ? undefined : Math.round(ms);
        if (rounded !== undefined) latencies[host.key] = rounded;
        // The pool's rule (TicketPool.prepare): a party's latency is its worst player's, unmeasured = default.
        worst[h] = Math.max(worst[h]!, Math.min(rounded ?? defaultLatency, 0xffff));
      });
      players.push({ playerId: `p${seq}-${i}`, mmr, latencies });
    }

    const attributes: Record<string, { values: string[]; accepts: string[] }> = {};
    const attrs: SimTicket['attrs'] = [];
    let twoModes = false;
    for (const filter of this.config.engine.attribute_filters) {
      let attr: { values: string[]; accepts: string[] } | undefined;
      if (filter.name === 'game_mode') {
        const first = rng.pick(GAME_MODES.map((m) => m.share));
        const modes = [GAME_MODES[first]!.key];
        if (rng.chance(MODEL.twoModesShare)) {
          twoModes = true;
          const others = GAME_MODES.filter((_, i) => i !== first);
          modes.push(others[rng.pick(others.map((m) => m.share))]!.key);
        }
        attr = { values: modes, accepts: modes };
      } else if (filter.name === 'language') {
        const langs = LANGUAGES[region]!;
        const lang = langs[rng.pick(langs.map(([, s]) => s))]![0];
        // Everyone accepts their own language; most non-English speakers also accept English, and some
        // English speakers accept the region's other languages.
        const accepts = new Set([lang]);
        if (lang !== 'en' && rng.chance(0.75)) accepts.add('en');
        if (lang === 'en' && rng.chance(0.4)) for (const [l] of langs) accepts.add(l);
        attr = { values: [lang], accepts: [...accepts] };
      }
      if (attr) attributes[filter.name] = attr;
      attrs.push(attr && { values: new Set(attr.values), accepts: new Set(attr.accepts) });
    }

    const mmrMean = mmrSum / size;
    const input = parseTicketEngineInput(
      toBinary(EngineInputSchema, create(EngineInputSchema, { players, attributes })),
      `t${seq}`,
      'engine_input',
    );
    return {
      seq,
      id: `t${seq}`,
      arrivalMs,
      partySize: size,
      region,
      mmrMean,
      eff: mmrMean + this.config.engine.party_synergy_bonus * (size - 1),
      latency: worst,
      attrs,
      twoModes,
      input,
    };
  }
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));
