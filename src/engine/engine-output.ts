// Turns the engine's index-level result for one match into the EngineOutput message callers receive.
import { create } from '@bufbuild/protobuf';
import type { QueueConfig } from '../config/queue-config.js';
import { EngineOutputSchema, type EngineOutput } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import type { EngineMatch } from './tick-runner.js';
import type { PoolKeys } from './ticket-pool.js';
import { keysOf, type TableKeys } from './value-table.js';

/**
 * Teams are "0".."teams-1" in the engine's order; each lists its tickets' players, ticket by ticket.
 * `playerIds` are the match's tickets' players (engine-input.ts `playerIdsOf`), in match order; `keys` the
 * pool's tables as the tick's engine read them (TickResult.keys).
 */
export function buildEngineOutput(
  match: EngineMatch,
  playerIds: readonly (readonly string[])[],
  keys: PoolKeys,
  config: QueueConfig,
): EngineOutput {
  const teamCount = config.rulesets[match.rulesetIndex]!.teams;
  const teams = Array.from({ length: teamCount }, (_, t) => ({ id: String(t), playerIds: [] as string[] }));
  playerIds.forEach((ids, i) => {
    teams[match.teams[i]!]!.playerIds.push(...ids);
  });
  const { spans } = keys;
  const attributes = config.engine.attribute_filters.map((filter, f) => ({
    name: filter.name,
    accepts: keysOf(keys.attributes[f]!, match.accepts.subarray(spans[f]!.start, spans[f]!.start + spans[f]!.width)),
  }));
  return create(EngineOutputSchema, { teams, attributes, host: hostOf(match, keys.hosts) });
}

/**
 * The match's host by key. A column that is no host's reads MAX_LATENCY for every ticket (host-columns.ts), so
 * the engine prefers one only when every host is as far: the first host is then as good, by the engine's rule
 * (the lowest index among equals).
 */
function hostOf(match: EngineMatch, hosts: TableKeys): { preferred: string; acceptable: string[] } | undefined {
  if (match.preferredHost === undefined) return undefined;
  const acceptable = keysOf(hosts, match.acceptableHosts);
  const preferred = hosts[match.preferredHost] ?? acceptable[0] ?? hosts.find((key) => key !== undefined);
  return preferred === undefined ? undefined : { preferred, acceptable };
}
