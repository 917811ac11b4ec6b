// @matchmaker/client's admin calls (docs/client.md): MatchmakerClient.explainTicket and getQueueStatistics
// against the real service over gRPC, on the same channel as the core operations, with the generated types the
// package exports, and NOT_FOUND as a typed MatchmakerError.
import { AnswerScope, decodeEngineInput, engineInput, MatchmakerClient, MatchmakerError } from '@matchmaker/client';
import { afterAll, describe, expect, it } from 'vitest';
import { createTrio, refusedAfter, TARGET_COUNTS, TRIO_MEMBERS, TRIO_QUEUE } from '../support/explain-pool.js';
import { uuid } from '../support/fixtures.js';
import { pollUntil } from '../support/queues.js';
import { useService } from '../support/service.js';

const env = useService({ queues: { 'sdk.trio': TRIO_QUEUE } });

let client: MatchmakerClient | undefined;
const sdk = () => (client ??= new MatchmakerClient({ address: `127.0.0.1:${env.service.grpcPort}`, retry: { maxAttempts: 1 } }));
afterAll(() => client?.close());

describe('MatchmakerClient admin calls', () => {
  it('explainTicket and getQueueStatistics on tickets the client created', async () => {
    const ids = await createTrio('sdk.trio', ({ id, queueId, engineInput: bytes }) =>
      sdk().createTicket({ id, queueId, engineInput: decodeEngineInput(bytes) }),
    );
    const createdMs = Date.now();
    const x = await pollUntil(
      () => sdk().explainTicket('sdk.trio', ids.target),
      (v) => refusedAfter(v, createdMs),
    );
    expect(x).toMatchObject({ state: 'active', scope: AnswerScope.LEADER, lastRefusal: { rule: 'skill_spread' } });
    expect(x.rulesets[0]!.candidates).toMatchObject(TARGET_COUNTS);

    const s = await sdk().getQueueStatistics('sdk.trio');
    const players = Object.values(TRIO_MEMBERS).reduce((sum, m) => sum + m.players, 0);
    expect(s.queue).toMatchObject({ ticketsWaiting: 6, playersWaiting: players, matches: 0 });
    expect(s.rulesets.map((r) => r.rulesetId)).toEqual(['trio']);
  });

  it('a ticket created with the engine input builder is explained too', async () => {
    const id = uuid();
    const input = engineInput().player({ playerId: 'solo', mmr: 5, latencies: { 'eu-west': 40 } });
    await sdk().createTicket({
      id,
      queueId: 'sdk.trio',
      engineInput: input.attribute('mode', { values: ['ranked'], accepts: ['ranked'] }),
    });
    const x = await sdk().explainTicket('sdk.trio', id);
    // Far above everyone in skill: it fits and is compatible with the others, but none is within its spread.
    expect(x.rulesets[0]!.candidates).toMatchObject({ skillWithinSpread: 0, all: 0, playersNeeded: 2 });
  });

  it('an unknown queue or ticket is a MatchmakerError with NOT_FOUND', async () => {
    const unknownTicket = await sdk()
      .explainTicket('sdk.trio', uuid())
      .catch((e: unknown) => e);
    expect(unknownTicket).toBeInstanceOf(MatchmakerError);
    expect(unknownTicket).toMatchObject({ code: 'NOT_FOUND', method: 'ExplainTicket' });
    const unknownQueue = await sdk()
      .getQueueStatistics('sdk.nope')
      .catch((e: unknown) => e);
    expect(unknownQueue).toMatchObject({ code: 'NOT_FOUND', method: 'GetQueueStatistics' });
  });
});
