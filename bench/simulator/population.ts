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

/** A game-server host as the engine sees it (its key in EngineInput latencies), in a region. */
export interface Host {
  key: string;
  /** Index into the model's regions. */
  region: number;
}

/**
 * Who arrives: regions and their hosts, the latency between regions, party sizes and the attribute the
 * model fills with modes. The default model and the issue19 one are below; bench/simulator/scenarios.ts
 * picks one per scenario.
 */
export interface PopulationModel {
  name: string;
  regions: readonly Region[];
  /** Host keys in the order of the tickets' latency arrays; a region's first host comes before its others. */
  hosts: readonly Host[];
  /** Round trip between regions' datacenters (ms), by region index. */
  interRegionMs: readonly (readonly number[])[];
  /** Added to a player's latency to a region's second (and later) host: uniform, drawn per player and host. */
  extraHostMs: readonly [number, number];
  partySizes: readonly { size: number; share: number }[];
  /** The attribute filter the model fills with a mode (other filters: `language`, or unspecified). */
  modeFilter: string;
  modes: readonly { key: string; share: number }[];
  /** Share of tickets that accept two modes (values = accepts = both). */
  twoModesShare: number;
  /** Segment name for those tickets. */
  twoModesLabel: string;
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

/** The default population: six regions, one host each (host key = region key), three game modes. */
export const DEFAULT_MODEL: PopulationModel = {
  name: 'default',
  regions: REGIONS,
  hosts: REGIONS.map((r, i) => ({ key: r.key, region: i })),
  interRegionMs: INTER_REGION_MS,
  extraHostMs: [5, 15],
  partySizes: PARTY_SIZES,
  modeFilter: 'game_mode',
  modes: GAME_MODES,
  twoModesShare: 0.08,
  twoModesLabel: 'two game modes',
};

const ISSUE19_REGIONS: readonly Region[] = [
  { key: 'eu-west', share: 0.35 },
  { key: 'us-east', share: 0.3 },
  { key: 'ap-southeast', share: 0.2 },
  { key: 'sa-east', share: 0.15 },
];

/**
 * Issue 19's workload: four regions with two hosts each (`eu-west-1`, `eu-west-2`, ...), far apart: every
 * pair of regions is over 100 ms apart but eu-west/us-east (85 ms plus access and jitter, so mostly over 100
 * too). One `mode` attribute, 80/20, no two-mode tickets.
 */
export const ISSUE19_MODEL: PopulationModel = {
  name: 'issue19',
  regions: ISSUE19_REGIONS,
  hosts: ISSUE19_REGIONS.flatMap((r, i) => [1, 2].map((n) => ({ key: `${r.key}-${n}`, region: i }))),
  interRegionMs: [
    //euw use  aps  sae
    [0, 85, 170, 190], // eu-west
    [85, 0, 200, 120], // us-east
    [170, 200, 0, 200], // ap-southeast
    [190, 120, 200, 0], // sa-east
  ],
  extraHostMs: [5, 15],
  partySizes: PARTY_SIZES,
  modeFilter: 'mode',
  modes: [
    { key: 'ranked', share: 0.8 },
    { key: 'casual', share: 0.2 },
  ],
  twoModesShare: 0,
  twoModesLabel: 'two modes',
};

export const meanPartySize = (model: PopulationModel) => model.partySizes.reduce((s, p) => s + p.size * p.share, 0);

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
};

/** Spoken languages per region key, for a queue with a `language` filter (approximate). */
const LANGUAGES: Readonly<Record<string, readonly [string, number][]>> = {
  'eu-west': [
    ['en', 0.6],
    ['fr', 0.2],
    ['es', 0.2],
  ],
  'eu-central': [
    ['de', 0.7],
    ['pl', 0.3],
  ],
  'us-east': [
    ['en', 0.85],
    ['es', 0.15],
  ],
  'us-west': [
    ['en', 0.85],
    ['es', 0.15],
  ],
  'sa-east': [
    ['pt', 0.8],
    ['es', 0.2],
  ],
  'ap-southeast': [
    ['en', 0.7],
    ['zh', 0.3],
  ],
};

export interface SimTicket {
  seq: number;
  id: string;
  arrivalMs: number;
  partySize: number;
  /** Region index of the party (model.regions). */
  region: number;
  /** Mean raw mmr of the party, and effective skill (mean + synergy * (size - 1)). */
  mmrMean: number;
  eff: number;
  /** Worst player latency per host index (model.hosts order); an unmeasured host counts as default_latency_ms. */
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
  /** Per host: true for a region's second and later hosts (they get model.extraHostMs). */
  private readonly extraHost: boolean[];
  /** Filters the model cannot fill in (left unspecified = compatible with everyone). */
  readonly unmodelledFilters: string[];

  constructor(
    private readonly config: QueueConfig,
    readonly model: PopulationModel,
    ticketsPerSec: number,
    seed: number,
    readonly startMs: number,
  ) {
    this.rng = new Rng(seed);
    this.ticketRatePerMs = ticketsPerSec / 1000;
    this.nextArrival = startMs + this.rng.exponential(this.ticketRatePerMs);
    this.extraHost = model.hosts.map((h, i) => model.hosts.findIndex((o) => o.region === h.region) !== i);
    this.unmodelledFilters = config.engine.attribute_filters.map((f) => f.name).filter((n) => n !== model.modeFilter && n !== 'language');
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
    const model = this.model;
    const hosts = model.hosts;
    const seq = this.seq++;
    const size = model.partySizes[rng.pick(model.partySizes.map((p) => p.share))]!.size;
    const region = rng.pick(model.regions.map((r) => r.share));
    const centre = size === 1 ? rng.normal(MODEL.mmrMean, MODEL.mmrSd) : rng.normal(MODEL.mmrMean, this.partyCentreSd);
    const defaultLatency = this.config.engine.default_latency_ms;

    const players = [];
    const worst = new Uint16Array(hosts.length);
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
        // A pick among all hosts; one of the player's own region does not go missing.
        for (let j = 0; j < k; j++) missing.add(rng.int(hosts.length));
      }
      hosts.forEach((host, h) => {
        let ms: number | undefined;
        if (host.region === region) ms = access;
        else if (!onlyOwn && !missing.has(h)) {
          const base = model.interRegionMs[region]![host.region]!;
          ms = Math.max(access, access + base * (1 + rng.uniform(MODEL.foreignJitter[0], MODEL.foreignJitter[1])));
        }
        if (ms !== undefined && this.extraHost[h]) ms += rng.uniform(model.extraHostMs[0], model.extraHostMs[1]);
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
      if (filter.name === model.modeFilter) {
        const first = rng.pick(model.modes.map((m) => m.share));
        const modes = [model.modes[first]!.key];
        if (model.twoModesShare > 0 && model.modes.length > 1 && rng.chance(model.twoModesShare)) {
          twoModes = true;
          const others = model.modes.filter((_, i) => i !== first);
          modes.push(others[rng.pick(others.map((m) => m.share))]!.key);
        }
        attr = { values: modes, accepts: modes };
      } else if (filter.name === 'language') {
        const langs = LANGUAGES[model.regions[region]!.key];
        if (langs) {
          const lang = langs[rng.pick(langs.map(([, s]) => s))]![0];
          // Everyone accepts their own language; most non-English speakers also accept English, and some
          // English speakers accept the region's other languages.
          const accepts = new Set([lang]);
          if (lang !== 'en' && rng.chance(0.75)) accepts.add('en');
          if (lang === 'en' && rng.chance(0.4)) for (const [l] of langs) accepts.add(l);
          attr = { values: [lang], accepts: [...accepts] };
        }
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
