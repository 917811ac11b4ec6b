// Named workloads for --scenario: a population model, a queue, an arrival rate and how long, and whether to
// drain the pool at the end. Flags given on the command line override the scenario's values.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { DEFAULT_MODEL, ISSUE19_MODEL, type PopulationModel } from './population.js';

export interface Scenario {
  name: string;
  description: string;
  model: PopulationModel;
  /** A file under bench/scenarios/; undefined: the simulator's built-in queue. */
  queueFile: string | undefined;
  arrivals: { playersPerSec: number } | { ticketsPerSec: number };
  durationSecs: number;
  /** Keep ticking after arrivals stop until every ticket is matched or expired. */
  drain: boolean;
}

export const SCENARIOS: Readonly<Record<string, Scenario>> = {
  default: {
    name: 'default',
    description: 'six regions with one host each, three game modes, 50 players/s for 900 s, built-in queue',
    model: DEFAULT_MODEL,
    queueFile: undefined,
    arrivals: { playersPerSec: 50 },
    durationSecs: 900,
    drain: false,
  },
  issue19: {
    name: 'issue19',
    description:
      "issue 19's workload: four regions with two hosts each, far apart; mode 80/20; 40 tickets/s for 60 s, then drained; bench/scenarios/issue19.yaml",
    model: ISSUE19_MODEL,
    queueFile: 'issue19.yaml',
    arrivals: { ticketsPerSec: 40 },
    durationSecs: 60,
    drain: true,
  },
};

/** bench/scenarios/, from the sources (bench/simulator) or from the build (dist/bench/simulator). */
export function scenarioPath(file: string): string {
  const candidates = [resolve(import.meta.dirname, '../scenarios', file), resolve(import.meta.dirname, '../../../bench/scenarios', file)];
  return candidates.find((p) => existsSync(p)) ?? candidates[0]!;
}
