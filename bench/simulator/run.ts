// Drives matchmakers tick by tick on one arrival sequence: every system sees the same tickets at the same
// simulated instants, so their results differ only by how they match.
import { performance } from 'node:perf_hooks';
import type { Population } from './population.js';
import type { MatchSystem } from './systems.js';

export interface RunTotals {
  /** Ticks in all, drain included. */
  ticks: number;
  /** Ticks after arrivals stopped (0 without drain). */
  drainTicks: number;
  arrivedPlayers: number;
  arrivedTickets: number;
  wallSecs: number;
}

export interface Clock {
  startMs: number;
  /** Arrivals stop here. */
  endMs: number;
  tickMs: number;
  /**
   * Keep ticking after endMs, with no arrivals, until no system has a ticket waiting or this instant has
   * passed (the TTL after endMs settles every ticket). Undefined: stop at endMs.
   */
  drainUntilMs?: number;
}

/** Tick k runs at startMs + k * tickMs; arrivals stop at endMs (the last tick may fall after it). */
export async function runSystems(population: Population, systems: readonly MatchSystem[], clock: Clock): Promise<RunTotals> {
  const { startMs, endMs, tickMs, drainUntilMs } = clock;
  const wallStart = performance.now();
  const arrivalTicks = Math.ceil((endMs - startMs) / tickMs);
  let arrivedTickets = 0;
  let arrivedPlayers = 0;
  let k = 1;
  for (; k <= arrivalTicks; k++) {
    const nowMs = startMs + k * tickMs;
    const arrivals = population.arrivalsUntil(Math.min(nowMs, endMs));
    arrivedTickets += arrivals.length;
    for (const t of arrivals) arrivedPlayers += t.partySize;
    for (const system of systems) await system.tick(nowMs, arrivals, k);
  }
  let drainTicks = 0;
  if (drainUntilMs !== undefined) {
    for (; systems.some((s) => s.waitingCount() > 0) && startMs + (k - 1) * tickMs <= drainUntilMs; k++, drainTicks++) {
      for (const system of systems) await system.tick(startMs + k * tickMs, [], k);
    }
  }
  return { ticks: arrivalTicks + drainTicks, drainTicks, arrivedPlayers, arrivedTickets, wallSecs: (performance.now() - wallStart) / 1000 };
}
