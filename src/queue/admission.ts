// The rules that decide whether a ticket or backfill request fits a queue's configuration. CreateTicket
// applies them to refuse a request; a hot reload applies them to the pool to find what no longer fits.
import type { QueueConfig, RulesetConfig } from '../config/queue-config.js';
import { quote, resourceExhausted, type ServiceError } from '../errors.js';
import type { BackfillRequest, Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import { RemovalReason } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

/** The first of `ids` the queue has no ruleset for. */
export function missingRuleset(config: QueueConfig, ids: readonly string[]): string | undefined {
  return ids.find((id) => !config.rulesets.some((r) => r.id === id));
}

/**
 * A party never splits: it needs a team at least its size in every ruleset it names, or, when it names none,
 * in at least one ruleset of the queue. Answers a ruleset it does not fit, or undefined when it fits.
 */
export function rulesetTooSmall(config: QueueConfig, rulesetIds: readonly string[], partySize: number): RulesetConfig | undefined {
  const rulesets = rulesetIds.length === 0 ? config.rulesets : config.rulesets.filter((r) => rulesetIds.includes(r.id));
  const tooSmall = rulesets.filter((r) => r.team_size < partySize);
  return (rulesetIds.length > 0 ? tooSmall.length > 0 : tooSmall.length === rulesets.length) ? tooSmall[0] : undefined;
}

/** The queue limit a payload exceeds, if any. */
export function overLimit(config: QueueConfig, item: Pick<Ticket | BackfillRequest, 'engineInput' | 'metadata'>): string | undefined {
  const { max_engine_input_bytes, max_metadata_bytes } = config.limits;
  if ((item.engineInput?.length ?? 0) > max_engine_input_bytes) return 'max_engine_input_bytes';
  if ((item.metadata?.length ?? 0) > max_metadata_bytes) return 'max_metadata_bytes';
  return undefined;
}

/**
 * CreateTicket of a new ticket when the pool already holds `limits.max_pool_tickets` waiting tickets. Only a
 * new ticket: a retry of a known id answers as before, and a reactivation or a lowered limit removes nothing.
 */
export function poolFull(queueId: string, config: QueueConfig): ServiceError {
  const max = config.limits.max_pool_tickets;
  return resourceExhausted(
    `queue ${quote(queueId)} is full: its pool holds its limit of ${max} waiting tickets (limits.max_pool_tickets); retry once tickets have left it`,
  );
}

export type Fate = { kind: 'keep' } | { kind: 'orphaned'; rulesetId: string } | { kind: 'removed'; reason: RemovalReason };

const KEEP: Fate = { kind: 'keep' };

/**
 * What a hot reload does to an active ticket (docs/configuration.md, "Hot reload"): a ruleset it named is
 * gone -> orphaned; its party no longer fits the rulesets -> removed with RULESET_PARAMS_CHANGED; it breaks a
 * queue-wide limit -> removed with QUEUE_CONFIG_CHANGED; anything else -> it stays.
 */
export function ticketFate(config: QueueConfig, ticket: Pick<Ticket, 'rulesetIds' | 'engineInput' | 'metadata'>, partySize: number): Fate {
  const gone = missingRuleset(config, ticket.rulesetIds);
  if (gone !== undefined) return { kind: 'orphaned', rulesetId: gone };
  if (overLimit(config, ticket)) return { kind: 'removed', reason: RemovalReason.QUEUE_CONFIG_CHANGED };
  if (rulesetTooSmall(config, ticket.rulesetIds, partySize)) return { kind: 'removed', reason: RemovalReason.RULESET_PARAMS_CHANGED };
  return KEEP;
}

/** The same for a backfill request: its ruleset gone -> orphaned; a limit broken -> QUEUE_CONFIG_CHANGED. */
export function backfillFate(config: QueueConfig, request: BackfillRequest): Fate {
  if (missingRuleset(config, [request.rulesetId]) !== undefined) return { kind: 'orphaned', rulesetId: request.rulesetId };
  if (overLimit(config, request)) return { kind: 'removed', reason: RemovalReason.QUEUE_CONFIG_CHANGED };
  return KEEP;
}
