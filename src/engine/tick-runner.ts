// Runs the native engine over a TicketPool. Owns the preallocated output arrays (grown only when the pool
// outgrows them) and the engine's reusable scratch memory, so a steady-state tick allocates nothing.
import type { QueueConfig, RulesetConfig } from '../config/queue-config.js';
import { NO_HOST, TickEngine, type MatchArrays, type QueueParams, type RulesetParams } from './native.js';
import { expansionParams } from './ruleset-bounds.js';
import type { PoolKeys, TicketPool } from './ticket-pool.js';

/**
 * One formed match. `rows`, `teams` and `accepts` are views of the runner's output arrays (no copy): valid
 * until the runner's next run.
 */
export interface EngineMatch {
  rulesetIndex: number;
  /** Pool rows of the match's tickets, and the team index of each. */
  rows: Uint32Array;
  teams: Uint32Array;
  /** Host index, or undefined when there was no acceptable host. */
  preferredHost: number | undefined;
  /** Bit h of word h / 64: host h is acceptable to every ticket (one word per 64 hosts). */
  acceptableHosts: BigUint64Array;
  /** Per attribute filter: the intersection of accepts. */
  accepts: BigUint64Array;
}

/** One open backfill request, in engine terms. */
export interface EngineBackfillRequest {
  rulesetIndex: number;
  slots: number;
  /** Mean mmr of the match's current players; NaN when unknown (no skill bound). */
  skill: number;
  /** Host index of the running match; undefined when unknown (no latency bound). */
  host: number | undefined;
  arrivalMs: number;
  /** Per filter, its columns, as TicketPool.prepare gives them. */
  attrValues: bigint[][];
  attrAccepts: bigint[][];
}

/** A config key as the binding spells it: napi-rs turns the Rust field `team_size` into `teamSize`. */
type Native<Key extends string> = Key extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<Native<Tail>>}` : Key;

/** The `keys` of a config object under their binding names, values unchanged. */
function nativeFields<Config, Key extends keyof Config & string>(
  config: Config,
  keys: readonly Key[],
): { [K in Key as Native<K>]: Config[K] } {
  const fields: Record<string, unknown> = {};
  for (const key of keys) fields[key.replace(/_(.)/g, (_, letter: string) => letter.toUpperCase())] = config[key];
  return fields as { [K in Key as Native<K>]: Config[K] };
}

// The engine's parameters that the queue config holds as they are, each named once; QueueParams'
// type (generated from the binding) fails the build if one is missing. The rest are converted below.
const QUEUE_FIELDS = ['mmr_normalization_ref', 'party_synergy_bonus'] as const;
const RULESET_FIELDS = ['teams', 'team_size', 'max_skill_spread', 'max_team_imbalance', 'max_latency_ms', 'require_host'] as const;
const RELAXATION_FIELDS = ['max_skill_spread', 'max_latency_ms'] as const;

export function engineParams(config: QueueConfig): QueueParams {
  return {
    ...nativeFields(config.engine, QUEUE_FIELDS),
    filterModes: config.engine.attribute_filters.map((f) => f.mode),
    rulesets: config.rulesets.map(rulesetParams),
  };
}

/** One ruleset as the engine takes it. */
export function rulesetParams(r: RulesetConfig): RulesetParams {
  return {
    ...nativeFields(r, RULESET_FIELDS),
    relaxation: r.relaxation.map((s) => ({ ...nativeFields(s, RELAXATION_FIELDS), afterWaitMs: s.after_wait_secs * 1000 })),
    expansion: expansionParams(r),
  };
}

/**
 * Why candidate matches failed, in the engine's count order (RuleDiagnostics in crates/engine). What each one
 * counts: docs/rule-diagnostics.md.
 */
export const REJECTION_REASONS = ['skill_spread', 'team_imbalance', 'no_acceptable_host', 'attributes', 'party_size'] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];
/** Values per ruleset in the engine's `ruleCounts`: the reasons in order, then failed candidates, then tickets examined. */
const RULE_COUNT_COLUMNS = REJECTION_REASONS.length + 2;

/**
 * Why a ticket still waits after a tick (the engine's per-ticket record, TicketRefusal in crates/engine): the rule
 * that refused its own candidate, or too few tickets in reach. By code: 0 is none, then these in order.
 */
export const TICKET_REFUSALS = [...REJECTION_REASONS, 'not_enough_tickets'] as const;
export type TicketRefusal = (typeof TICKET_REFUSALS)[number];

/** A per-ticket refusal code as its name; undefined for 0 (none: matched, or in no ruleset) and unknown codes. */
export function refusalName(code: number): TicketRefusal | undefined {
  return TICKET_REFUSALS[code - 1];
}

/** A tick's matches, read from the engine's output arrays on demand (valid until the runner's next run). */
export interface TickResult {
  count: number;
  match(m: number): EngineMatch;
  /**
   * This tick's rejections in the ruleset's failed candidate matches, by reason (docs/rule-diagnostics.md). Zero
   * when none failed. Throws RangeError for an index that is not one of the queue's rulesets.
   */
  rejections(rulesetIndex: number): Record<RejectionReason, number>;
  /** The ruleset's candidate matches that failed this tick, and the tickets their scans examined. */
  candidates(rulesetIndex: number): { failed: number; examined: number };
  /** The per-ticket refusal codes (refusalName), by pool row, one per ticket of the pool the tick read. */
  refusals: Uint8Array;
  /** What the matches' host and value indices stand for: the pool's tables as the engine read them. */
  keys: PoolKeys;
}

/** Every match of a tick, read at once. */
export function allMatches(result: TickResult): EngineMatch[] {
  return Array.from({ length: result.count }, (_, m) => result.match(m));
}

export class TickRunner {
  private readonly engine: TickEngine;
  private out: MatchArrays = TickRunner.outputs(0, 0, 1);
  private outCapacity = 0;
  private outFilters = 0;
  private outHostWords = 1;
  /** The engine's rule diagnostics: RULE_COUNT_COLUMNS values per ruleset. */
  private ruleCounts: Float64Array;
  /** The parameters the engine has, with the filter modes of the pool's columns it last ran on. */
  private params: QueueParams;
  /** The pool the engine last ticked: the changes of another pool mean nothing to the layout it kept. */
  private lastPool: TicketPool | undefined;

  constructor(params: QueueParams) {
    this.engine = new TickEngine(params);
    this.params = params;
    this.ruleCounts = new Float64Array(params.rulesets.length * RULE_COUNT_COLUMNS);
  }

  /** New parameters (hot reload); only between ticks. */
  configure(params: QueueParams): void {
    this.engine.configure(params);
    this.params = params;
    // A new array only when the ruleset count changes: an earlier TickResult keeps reading its own.
    if (this.ruleCounts.length !== params.rulesets.length * RULE_COUNT_COLUMNS) {
      this.ruleCounts = new Float64Array(params.rulesets.length * RULE_COUNT_COLUMNS);
    }
  }

  /** Bytes the engine's scratch memory holds in the arrays that grow with the pool (between ticks). */
  engineBytes(): number {
    return this.engine.poolBytes();
  }

  /** Whether the last tick updated the layout the one before kept (docs/engine.md, "Incremental ticks"). */
  updatedLayout(): boolean {
    return this.engine.updatedLayout();
  }

  private assigned = new Uint32Array(0);

  /**
   * Fills backfill requests from the pool; answers, per request, the pool rows assigned to it (empty: not
   * filled). The pool's columns must not change until it resolves.
   */
  async backfill(pool: TicketPool, requests: readonly EngineBackfillRequest[], nowMs: number): Promise<number[][]> {
    this.matchColumns(pool);
    const columns = requests.map((q) => pool.columnsOf(q));
    const r = requests.length;
    if (this.assigned.length < pool.count) this.assigned = new Uint32Array(Math.max(1024, pool.count * 2));
    const offsets = new Uint32Array(r + 1);
    await this.engine.backfill(
      pool.columns(),
      {
        ruleset: Uint32Array.from(requests, (q) => q.rulesetIndex),
        slots: Uint32Array.from(requests, (q) => q.slots),
        skill: Float64Array.from(requests, (q) => q.skill),
        host: Uint32Array.from(requests, (q) => q.host ?? NO_HOST),
        arrivalMs: Float64Array.from(requests, (q) => q.arrivalMs),
        attrValues: BigUint64Array.from(columns.flatMap((c) => c.values)),
        attrAccepts: BigUint64Array.from(columns.flatMap((c) => c.accepts)),
        requestCount: r,
      },
      { offsets, assigned: this.assigned },
      nowMs,
    );
    return Array.from({ length: r }, (_, q) => Array.from(this.assigned.subarray(offsets[q]!, offsets[q + 1]!)));
  }

  /**
   * One tick. The pool's columns must not change until it resolves, and its result is valid until the next
   * run: matches are read from the output arrays when asked for, so a tick forming many matches costs the
   * event loop nothing until they are resolved.
   */
  async run(pool: TicketPool, nowMs: number, seed: number): Promise<TickResult> {
    this.matchColumns(pool);
    const keys = pool.keys();
    const hostWords = Math.max(1, Math.ceil(pool.hostCount / 64));
    if (pool.count > this.outCapacity || pool.filterCount !== this.outFilters || hostWords !== this.outHostWords) {
      this.outCapacity = Math.max(1024, pool.count * 2);
      this.outFilters = pool.filterCount;
      this.outHostWords = hostWords;
      this.out = TickRunner.outputs(this.outCapacity, this.outFilters, hostWords);
    }
    const o = this.out;
    const counts = this.ruleCounts;
    o.ruleCounts = counts;
    // The engine keeps each tick's layout and updates it by the rows written since (docs/engine.md,
    // "Incremental ticks"); changes it cannot use (another pool's, or none known) make it lay the pool out whole.
    let changes = pool.takeChanges();
    const samePool = this.lastPool === pool;
    // Unset until the tick succeeds: the changes just taken are the engine's only once it has read them (a
    // call refused here, or an engine run refused as busy, leaves the next tick to lay the pool out whole).
    this.lastPool = undefined;
    if (changes === undefined || !samePool) {
      this.engine.forgetLayout();
      changes = { previousCount: 0, rows: new Uint32Array(0) };
    }
    const count = await this.engine.run(pool.columns(), o, nowMs, seed >>> 0, changes);
    this.lastPool = pool;
    const refusals = o.ticketRefusals!.subarray(0, pool.count);
    const filters = pool.filterCount;
    const row = (r: number): number => {
      if (!(Number.isInteger(r) && r >= 0 && (r + 1) * RULE_COUNT_COLUMNS <= counts.length)) {
        throw new RangeError(`no ruleset ${r} (the queue has ${counts.length / RULE_COUNT_COLUMNS})`);
      }
      return r * RULE_COUNT_COLUMNS;
    };
    return {
      count,
      refusals,
      keys,
      rejections: (r) => {
        const at = row(r);
        return Object.fromEntries(REJECTION_REASONS.map((reason, k) => [reason, counts[at + k]!])) as Record<RejectionReason, number>;
      },
      candidates: (r) => {
        const at = row(r) + REJECTION_REASONS.length;
        return { failed: counts[at]!, examined: counts[at + 1]! };
      },
      match: (m) => {
        const start = o.matchOffsets[m]!;
        const end = o.matchOffsets[m + 1]!;
        const preferred = o.matchPreferredHost[m]!;
        return {
          rulesetIndex: o.matchRuleset[m]!,
          rows: o.matchTickets.subarray(start, end),
          teams: o.ticketTeam.subarray(start, end),
          preferredHost: preferred === NO_HOST ? undefined : preferred,
          acceptableHosts: o.matchAcceptableHosts.subarray(m * hostWords, (m + 1) * hostWords),
          accepts: o.matchAccepts.subarray(m * filters, (m + 1) * filters),
        };
      },
    };
  }

  /**
   * Lays the pool out for the values and hosts its tables hold now, and gives the engine the filter modes of its
   * columns: a filter past 64 values has further ("continued") ones.
   */
  private matchColumns(pool: TicketPool): void {
    pool.fitColumns();
    const modes = pool.filterModes();
    const current = this.params.filterModes;
    if (modes.length === current.length && modes.every((m, k) => m === current[k])) return;
    this.params = { ...this.params, filterModes: modes };
    this.engine.configure(this.params);
  }

  /** Worst case: every ticket alone in a match (OutputCapacity::for_pool in the engine crate). */
  private static outputs(capacity: number, filters: number, hostWords: number): MatchArrays {
    return {
      matchRuleset: new Uint32Array(capacity),
      matchOffsets: new Uint32Array(capacity + 1),
      matchTickets: new Uint32Array(capacity),
      ticketTeam: new Uint32Array(capacity),
      matchPreferredHost: new Uint32Array(capacity),
      matchAcceptableHosts: new BigUint64Array(capacity * hostWords),
      matchAccepts: new BigUint64Array(capacity * filters),
      ticketRefusals: new Uint8Array(capacity),
    };
  }
}
