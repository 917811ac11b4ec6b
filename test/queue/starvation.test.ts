// The starvation guarantee (docs/engine.md "Bounds"): with the expansion's limits unbounded (the default), a
// ticket whose only obstacle is skill is matched once its widening bounds cover its partner, before its TTL;
// with widening turned off the same pair waits until it expires. Real service, real sockets.
import { describe, expect, it } from 'vitest';
import { engineInput, uuid } from '../support/fixtures.js';
import type { OutcomeJson } from '../support/outcomes.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { useService } from '../support/service.js';
import { grpcTransport, httpRequest } from '../support/transports.js';

// A 1v1 whose two tickets are 10 normalized units apart (mmr 0.0 and 1.0, mmr_normalization_ref 0.1). The
// bound starts at 0.5 and doubles every 0.25 s: 0.5 * 2^k * (1 + f) >= 10 once the wait is 4.25 * 0.25 s.
const WIDENING_AFTER_MS = 1062.5;
const TTL_SECS = 3;
const env = useService({
  queues: {
    'starve.widening': duelQueue(50, {
      config: { ticket_ttl_secs: TTL_SECS },
      ruleset: { max_skill_spread: 0.5, expansion: { over_secs: 0.25 } },
    }),
    'starve.fixed': duelQueue(50, {
      config: { ticket_ttl_secs: TTL_SECS },
      ruleset: { max_skill_spread: 0.5, expansion: { curve: 'none' } },
    }),
  },
});

async function outcomesOf(queueId: string): Promise<OutcomeJson[]> {
  const res = await httpRequest(env.service, 'GET', `/admin/v1/outcomes?queue_id=${queueId}&limit=1000`);
  return res.body.outcomes as OutcomeJson[];
}

async function createPair(queueId: string): Promise<{ ids: string[]; createdAt: number }> {
  const api = grpcTransport(env.service);
  const ids = [uuid(), uuid()];
  const createdAt = Date.now();
  for (const [i, id] of ids.entries()) {
    const input = engineInput({ players: [{ playerId: `p${i}`, mmr: i, latencies: {} }] });
    expect((await api.createTicket({ id, queueId, engineInput: input })).ok).toBe(true);
  }
  return { ids, createdAt };
}

describe('starvation guarantee', () => {
  it('matches a far pair once the widening bound covers it, before the TTL', async () => {
    const { ids, createdAt } = await createPair('starve.widening');
    const outcomes = await pollUntil(
      () => outcomesOf('starve.widening'),
      (os) => os.some((o) => o.kind === 'match.created' || o.kind === 'ticket.expired'),
      (TTL_SECS + 5) * 1000,
    );
    const match = outcomes.find((o) => o.kind === 'match.created');
    expect(outcomes.map((o) => o.kind)).toEqual(['match.created']);
    expect(match!.matchCreated!.match.tickets.map((t) => t.id).sort()).toEqual([...ids].sort());
    const formedAfterMs = Date.parse(match!.occurredAt) - createdAt;
    // Not before the bound covers the pair (a tick of slack for the clock read before the first create), and
    // well before the TTL.
    expect(formedAfterMs).toBeGreaterThanOrEqual(WIDENING_AFTER_MS - 100);
    expect(formedAfterMs).toBeLessThan(TTL_SECS * 1000);
  });

  it('lets the same pair expire when the bounds do not widen', async () => {
    const { ids } = await createPair('starve.fixed');
    // The two may expire in one sweep or in two (they were created a few milliseconds apart).
    const expiredIds = (os: OutcomeJson[]) => os.flatMap((o) => o.ticketsExpired?.ticketIds ?? []);
    const outcomes = await pollUntil(
      () => outcomesOf('starve.fixed'),
      (os) => expiredIds(os).length >= 2,
      (TTL_SECS + 10) * 1000,
    );
    expect(new Set(outcomes.map((o) => o.kind))).toEqual(new Set(['ticket.expired']));
    expect(expiredIds(outcomes).sort()).toEqual([...ids].sort());
  });
});
