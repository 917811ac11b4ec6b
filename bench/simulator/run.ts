// Drives matchmakers tick by tick on one arrival sequence: every system sees the same tickets at the same
// simulated instants, so their results differ only by how they match.
import { performance } from 'node:perf_hooks';
import type { Population } from './population.js';
import type { MatchSystem } from './systems.js';

export interface RunTotals {
  ticks: number;
  arrivedPlayers: number;
  arrivedTickets: number;
  wallSecs: number;
}

/** Tick k runs at startMs + k * tickMs; arrivals stop at endMs (the last tick may fall after it). */
export async function runSystems(
  population: Population,
  systems: readonly MatchSystem[],
  clock: { startMs: number; endMs: number; tickMs: number },
): Promise<RunTotals> {
  const { startMs, endMs, tickMs } = clock;
  const wallStart = performance.now();
  const ticks = Math.ceil((endMs - startMs) / tickMs);
  let arrivedTickets = 0;
  let arrivedPlayers = 0;
  for (let k = 1; k <= ticks; k++) {
    const nowMs = startMs + k * tickMs;
    const arrivals = population.arrivalsUntil(Math.min(nowMs, endMs));
    arrivedTickets += arrivals.length;
    for (const t of arrivals) arrivedPlayers += t.partySize;
    for (const system of systems) await system.tick(nowMs, arrivals, k);
  }
  return { ticks, arrivedPlayers, arrivedTickets, wallSecs: (performance.now() - wallStart) / 1000 };
}
