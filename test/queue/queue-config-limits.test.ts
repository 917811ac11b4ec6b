// A queue file whose ruleset the engine would refuse at every tick is refused when it is read, naming the
// key: the schema's bound on players per match is the engine's own (checked against the engine here).
import { describe, expect, it } from 'vitest';
import { formatPath, MAX_PLAYERS_PER_MATCH, queueConfigSchema, queueFileSchema } from '../../src/config/queue-config.js';
import { TicketPool } from '../../src/engine/ticket-pool.js';
import { engineParams, TickRunner } from '../../src/engine/tick-runner.js';

const file = (teams: number, team_size: number) => ({ config: { rulesets: [{ id: 'big', teams, team_size }] } });

/** One tick of the native engine over one solo ticket in a ruleset of `teams` × `team_size`. */
async function tickOnce(teams: number, team_size: number) {
  const config = queueConfigSchema.parse({ rulesets: [{ id: 'big', teams: 1, team_size: 1 }] });
  config.rulesets[0] = { ...config.rulesets[0]!, teams, team_size }; // past the schema, as the engine sees it
  const pool = new TicketPool({ filters: [], rulesetIds: ['big'], defaultLatencyMs: 150 });
  const input = { playerIds: ['p'], mmrMean: 0.5, latencies: new Map(), attributes: new Map() };
  pool.insert('t', pool.prepare(input, [], 0));
  return new TickRunner(engineParams(config)).run(pool, 1000, 1);
}

describe('players per match', () => {
  it('refuses a ruleset of more players than a match holds, naming team_size', () => {
    const refused = queueFileSchema.safeParse(file(32, 33));
    expect(refused.success).toBe(false);
    const issue = refused.error!.issues[0]!;
    expect(formatPath(issue.path)).toBe('config.rulesets[0].team_size');
    expect(issue.message).toBe('teams × team_size is 1056; a match holds at most 1024 players');
    expect(queueFileSchema.safeParse(file(32, 32)).success).toBe(true);
    expect(queueFileSchema.safeParse(file(64, 16)).success).toBe(true);
  });

  it('is the engine’s own bound: the engine ticks a ruleset of exactly that many players and refuses one more', async () => {
    expect(MAX_PLAYERS_PER_MATCH).toBe(1024);
    await expect(tickOnce(32, 32)).resolves.toMatchObject({ count: 0 });
    await expect(tickOnce(1, MAX_PLAYERS_PER_MATCH + 1)).rejects.toThrow(/MAX_PLAYERS_PER_MATCH \(1024\)/);
  });
});
