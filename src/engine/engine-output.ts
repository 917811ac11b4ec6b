// Turns the engine's index-level result for one match into the EngineOutput message callers receive.
import { create } from '@bufbuild/protobuf';
import type { QueueConfig } from '../config/queue-config.js';
import { EngineOutputSchema, type EngineOutput } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import type { ParsedEngineInput } from './engine-input.js';
import type { EngineMatch } from './tick-runner.js';
import type { TicketPool } from './ticket-pool.js';

/**
 * Teams are "0".."teams-1" in the engine's order; each lists its tickets' players, ticket by ticket.
 * `inputs` are the match's tickets' engine inputs, in match order.
 */
export function buildEngineOutput(
  match: EngineMatch,
  inputs: readonly ParsedEngineInput[],
  pool: TicketPool,
  config: QueueConfig,
): EngineOutput {
  const teamCount = config.rulesets[match.rulesetIndex]!.teams;
  const teams = Array.from({ length: teamCount }, (_, t) => ({ id: String(t), playerIds: [] as string[] }));
  inputs.forEach((input, i) => {
    teams[match.teams[i]!]!.playerIds.push(...input.playerIds);
  });
  const spans = pool.filterSpans();
  const attributes = config.engine.attribute_filters.map((filter, f) => ({
    name: filter.name,
    accepts: pool.attributeKeys[f]!.keysOf(match.accepts.subarray(spans[f]!.start, spans[f]!.start + spans[f]!.width)),
  }));
  const host =
    match.preferredHost === undefined
      ? undefined
      : { preferred: pool.hosts.keys[match.preferredHost]!, acceptable: pool.hosts.keysOf(match.acceptableHosts) };
  return create(EngineOutputSchema, { teams, attributes, host });
}
