import { createHash } from 'node:crypto';
// The schema of a queue file. Every key has its default here; docs/configuration.md documents them.
import { z } from 'zod';

/** Queue ids are dot-separated tokens, so that broker subjects and namespace subscriptions (`ns.>`) work. */
export const QUEUE_ID_PATTERN = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
/** A JetStream stream name (at most STREAM_NAME_MAX_BYTES): no whitespace, control characters, `.`, `*`, `>`
 *  or path separators (nats-server refuses them). */
export const STREAM_NAME_PATTERN = /^[^\s\p{Cc}.*>/\\]+$/u;
export const STREAM_NAME_MAX_BYTES = 255;
/** The engine keeps ruleset membership as a 32-bit mask. */
export const MAX_RULESETS = 32;
/** Default of a ruleset's `expansion.over_secs`. */
export const DEFAULT_EXPANSION_OVER_SECS = 2;

const relaxationStep = z
  .object({
    /** Applies once the oldest ticket of a candidate match has waited this long. */
    after_wait_secs: z.number().min(0),
    max_skill_spread: z.number().positive(),
    max_latency_ms: z.number().int().positive(),
  })
  .strict();

/**
 * Continuous widening of a ruleset's bounds with the seed's wait (docs/engine.md "Bounds"). Every key has a
 * default, so a ruleset without the block widens too.
 */
const expansion = z
  .object({
    /** exponential: the bounds double every over_secs; linear: they grow by their base every over_secs; none: steps only. */
    curve: z.enum(['none', 'linear', 'exponential']).default('exponential'),
    /** The knob: the wait a ticket spends for quality per doubling (or per base, linear). */
    over_secs: z.number().positive().finite().default(DEFAULT_EXPANSION_OVER_SECS),
    /** Limits the widening never passes; absent: unbounded (skill, imbalance) or the base (latency: no widening). */
    max_skill_spread: z.number().positive().optional(),
    max_team_imbalance: z.number().positive().optional(),
    max_latency_ms: z.number().int().positive().optional(),
    /** Without require_host: the wait after which a seed may form a match with no common acceptable host. */
    any_host_after_secs: z.number().min(0).default(10),
  })
  .strict();

/** The engine's bound on the players of one match (MAX_PLAYERS_PER_MATCH in crates/engine). */
export const MAX_PLAYERS_PER_MATCH = 1024;

const ruleset = z
  .object({
    id: z.string().min(1).max(128),
    /** Number of teams in a match. */
    teams: z.number().int().min(1).max(64),
    /** Players per team. A party never splits, so a party larger than this cannot compete here. */
    team_size: z.number().int().min(1).max(255),
    /** Bound on (highest - lowest effective skill) / mmr_normalization_ref over a match's tickets. */
    max_skill_spread: z.number().positive().default(2.0),
    /** Bound on (highest - lowest team mean skill) / mmr_normalization_ref. */
    max_team_imbalance: z.number().positive().default(1.0),
    /** A host is acceptable when every ticket's latency to it is at most this. */
    max_latency_ms: z.number().int().positive().default(200),
    /** When true, a match with no acceptable host is not formed. */
    require_host: z.boolean().default(false),
    /** Bounds widen with the oldest ticket's wait; steps in increasing after_wait_secs. */
    relaxation: z.array(relaxationStep).default([]),
    /** Continuous widening with wait, on top of the steps. */
    expansion: expansion.default({}),
  })
  .strict()
  .superRefine((r, ctx) => {
    const limits = [
      ['max_skill_spread', r.expansion.max_skill_spread, r.max_skill_spread],
      ['max_team_imbalance', r.expansion.max_team_imbalance, r.max_team_imbalance],
      ['max_latency_ms', r.expansion.max_latency_ms, r.max_latency_ms],
    ] as const;
    for (const [key, limit, base] of limits) {
      if (limit !== undefined && limit < base) {
        ctx.addIssue({ code: 'custom', path: ['expansion', key], message: `a limit below the base ${key} (${base})` });
      }
    }
    if (r.teams * r.team_size > MAX_PLAYERS_PER_MATCH) {
      ctx.addIssue({
        code: 'custom',
        path: ['team_size'],
        message: `teams × team_size is ${r.teams * r.team_size}; a match holds at most ${MAX_PLAYERS_PER_MATCH} players`,
      });
    }
    r.relaxation.forEach((step, i) => {
      const prev = i === 0 ? undefined : r.relaxation[i - 1]!;
      if (prev && step.after_wait_secs <= prev.after_wait_secs) {
        ctx.addIssue({
          code: 'custom',
          path: ['relaxation', i, 'after_wait_secs'],
          message: 'steps must be in increasing after_wait_secs',
        });
      }
      const floorSpread = prev?.max_skill_spread ?? r.max_skill_spread;
      const floorLatency = prev?.max_latency_ms ?? r.max_latency_ms;
      if (step.max_skill_spread < floorSpread || step.max_latency_ms < floorLatency) {
        ctx.addIssue({ code: 'custom', path: ['relaxation', i], message: 'relaxation only widens: bounds may not shrink' });
      }
    });
  });

const attributeFilter = z
  .object({
    /** Key in EngineInput.attributes. */
    name: z.string().min(1),
    /** overlap: values share an entry; containment: each side's values are all in the other's accepts. */
    mode: z.enum(['overlap', 'containment']).default('overlap'),
  })
  .strict();

const webhook = z
  .object({
    url: z.string().url(),
    /** HMAC-SHA256 key; `${ENV_NAME}` takes it from the environment. */
    secret: z.string().min(1),
    encoding: z.enum(['protobuf', 'json']).default('protobuf'),
    timeout_ms: z.number().int().positive().default(5000),
    max_retries: z.number().int().min(0).default(10),
    /** First retry waits up to this (full jitter), doubling per attempt up to retry_max_delay_ms. */
    retry_base_delay_ms: z.number().int().positive().default(500),
    retry_max_delay_ms: z.number().int().positive().default(60_000),
    /** Outcomes per request; 1 sends one outcome per request (docs/outcomes-webhook.md describes the batch body).
     *  At most 100: the batch's ids travel in headers, which proxies limit to a few KiB. */
    max_batch_size: z.number().int().min(1).max(100).default(1),
  })
  .strict();

const outcomes = z
  .object({
    sink: z.enum(['broker', 'webhook', 'websocket']).default('websocket'),
    webhook: webhook.optional(),
    /** Ids per batched outcome (ticket.expired, ticket.removed, ...); larger sweeps are split in chunks. */
    batch_chunk_size: z.number().int().min(1).max(100_000).default(1000),
  })
  .strict()
  .superRefine((o, ctx) => {
    if (o.sink === 'webhook' && !o.webhook) {
      ctx.addIssue({ code: 'custom', path: ['webhook'], message: 'required when sink is webhook' });
    }
  });

const replication = z
  .object({
    /** Pre-provisioned resources (BROKER_RESOURCE_MODE=bind); in create mode the service names its own. */
    binding: z
      .object({
        /** The queue's replication stream; required in bind mode with POOL_REPLICATION_BACKEND=broker. */
        stream_name: z
          .string()
          .regex(STREAM_NAME_PATTERN, 'not a valid JetStream stream name (no whitespace, ".", "*", ">", "/" or "\\")')
          .refine((s) => Buffer.byteLength(s) <= STREAM_NAME_MAX_BYTES, `longer than ${STREAM_NAME_MAX_BYTES} bytes`)
          .optional(),
      })
      .strict()
      .default({}),
  })
  .strict();

const limits = z
  .object({
    max_engine_input_bytes: z
      .number()
      .int()
      .positive()
      .default(32 * 1024),
    max_metadata_bytes: z
      .number()
      .int()
      .positive()
      .default(4 * 1024),
    /** Waiting tickets the pool holds at most; CreateTicket of a new ticket is then refused (RESOURCE_EXHAUSTED).
     *  Twice the largest pool measured (bench/RESULTS.md: 1M): it bounds a queue's memory, not its normal use. */
    max_pool_tickets: z.number().int().positive().default(2_000_000),
  })
  .strict();

const engine = z
  .object({
    /** Skill differences are divided by this. Suits mmr on a 0.0 to 1.0 scale; rescale for ratings in the thousands. */
    mmr_normalization_ref: z.number().positive().default(0.1),
    /** Added to a party's mean mmr per member beyond the first. */
    party_synergy_bonus: z.number().min(0).default(0.0),
    /** Latency assumed for a host a player has no measurement for. */
    default_latency_ms: z.number().int().min(0).max(65_535).default(150),
    attribute_filters: z.array(attributeFilter).max(16).default([]),
  })
  .strict();

export const queueConfigSchema = z
  .object({
    /** How often the engine runs over the pool. */
    tick_interval_ms: z.number().int().min(10).default(1000),
    /** Unmatched tickets expire after this long (ticket.expired). */
    ticket_ttl_secs: z.number().int().positive().default(600),
    /** Unfilled backfill requests expire after this long (backfill.expired). */
    backfill_ttl_secs: z.number().int().positive().default(300),
    /** How long resolved tickets stay reactivatable (ReactivateTickets). */
    terminal_retention_ttl_secs: z.number().int().min(0).default(600),
    limits: limits.default({}),
    engine: engine.default({}),
    rulesets: z.array(ruleset).min(1).max(MAX_RULESETS),
    outcomes: outcomes.default({}),
    /** The broker-backed replication of the pool (POOL_REPLICATION_BACKEND=broker). */
    replication: replication.default({}),
  })
  .strict()
  .superRefine((c, ctx) => {
    const seen = new Set<string>();
    c.rulesets.forEach((r, i) => {
      if (seen.has(r.id)) ctx.addIssue({ code: 'custom', path: ['rulesets', i, 'id'], message: `duplicate ruleset id "${r.id}"` });
      seen.add(r.id);
    });
    const names = new Set<string>();
    c.engine.attribute_filters.forEach((f, i) => {
      if (names.has(f.name))
        ctx.addIssue({ code: 'custom', path: ['engine', 'attribute_filters', i, 'name'], message: `duplicate filter "${f.name}"` });
      names.add(f.name);
    });
  });

export const queueFileSchema = z.object({ config: queueConfigSchema }).strict();

export type QueueConfig = z.infer<typeof queueConfigSchema>;
export type RulesetConfig = QueueConfig['rulesets'][number];

/** Renders a zod path the way a YAML user reads it: config.rulesets[0].team_size. */
export function formatPath(path: readonly (string | number)[]): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

/**
 * A short fingerprint of a queue's configuration as validated (defaults applied), so that operators can
 * tell whether replicas run the same version of a queue's file.
 */
export function configHash(config: QueueConfig): string {
  return createHash('sha256').update(JSON.stringify(config)).digest('hex').slice(0, 16);
}
