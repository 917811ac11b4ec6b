// Tickets for in-process pool tests (TicketPool and the native engine): a ticket described by its skill,
// party size, maps (one overlap filter named "map"), measured hosts and wait, turned into the parsed
// engine input TicketPool.prepare takes.
import type { ParsedEngineInput } from '../../src/engine/engine-input.js';

export interface PoolTicketSpec {
  mmr: number;
  players: number;
  /** Values of the filter "map": map-<n>. */
  maps: number[];
  /** Measured hosts, host-<n>, with the party's worst latency in ms. */
  hosts: [number, number][];
  waitMs: number;
}

export function poolTicketInput(id: string, t: PoolTicketSpec): ParsedEngineInput {
  const attributes = new Map<string, { values: string[]; accepts: string[] }>();
  if (t.maps.length > 0) attributes.set('map', { values: t.maps.map((m) => `map-${m}`), accepts: [] });
  return {
    playerIds: Array.from({ length: t.players }, (_, k) => `${id}-p${k}`),
    mmrMean: t.mmr,
    latencies: new Map(t.hosts.map(([h, ms]) => [`host-${h}`, { ms, measuredBy: 1 }])),
    attributes,
  };
}
