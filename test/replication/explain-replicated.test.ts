// Explain and statistics in the replicated mode (docs/explain-and-statistics.md, "Leader and followers"),
// with two service processes on one nats-server: the leader answers everything; a follower answers from its
// replicated pool and match history, says it is a follower, and has no tick-recorded refusal.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTrio, PAIRS_QUEUE, refusedAfter, solo, TARGET_COUNTS, TRIO_QUEUE } from '../support/explain-pool.js';
import { uuid } from '../support/fixtures.js';
import { startNatsServer, type TestNatsServer } from '../support/nats.js';
import { pollUntil } from '../support/queues.js';
import { startReplicaServices } from '../support/replica-services.js';
import { removeDirs, tempDir, writeQueues, type TestService } from '../support/service.js';
import { httpRequest, httpTransport } from '../support/transports.js';

describe('explain and statistics on the leader and on a follower', () => {
  let nats: TestNatsServer;
  const replicas: TestService[] = [];
  const queueDir = tempDir('queues');

  beforeAll(async () => {
    nats = await startNatsServer();
    writeQueues(queueDir, { 'rx.trio': TRIO_QUEUE, 'rx.pairs': PAIRS_QUEUE });
    replicas.push(...(await startReplicaServices(nats.url, queueDir, ['rx-a', 'rx-b'])));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await nats?.dispose();
    removeDirs(queueDir, ...replicas.map((r) => r.dataDir));
  });

  /**
   * The replica leading `queueId`, and the other one, once leadership has spread (each replica leads one of
   * the two queues): before that, the replica leading both hands one over, and roles read then would change.
   */
  async function roles(queueId: string): Promise<{ leader: TestService; follower: TestService }> {
    const leading = async (r: TestService) =>
      ((await httpRequest(r, 'GET', '/admin/v1/queues')).body.queues as { queueId: string; leading: boolean }[])
        .filter((q) => q.leading)
        .map((q) => q.queueId);
    const found = await pollUntil(
      async () => Promise.all(replicas.map(leading)),
      (l) => l.every((queues) => queues.length === 1) && l.filter((queues) => queues.includes(queueId)).length === 1,
      30_000,
    );
    const i = found.findIndex((queues) => queues.includes(queueId));
    return { leader: replicas[i]!, follower: replicas[1 - i]! };
  }

  it('a follower explains from its replicated pool, says it follows, and has no tick-recorded refusal', async () => {
    const { follower } = await roles('rx.trio');
    const trio = await createTrio('rx.trio', async (ticket) => expect((await httpTransport(follower).createTicket(ticket)).ok).toBe(true));
    const path = `/admin/v1/queues/rx.trio/tickets/${trio.target}:explain`;
    const inRuleset = (body: Record<string, unknown>) =>
      (body.rulesets as { candidates: { inRuleset?: number } }[] | undefined)?.[0]?.candidates.inRuleset;
    const answers = () => Promise.all(replicas.map((r) => httpRequest(r, 'GET', path)));
    // Each replica applies the members from the log: once both pools hold them all, a tick after that saw them.
    await pollUntil(answers, (rs) => rs.every((r) => inRuleset(r.body) === 5));
    const completeMs = Date.now();
    // Asked of both replicas at once, so that a lease that moves under load (it may) still leaves one of each.
    const both = await pollUntil(
      answers,
      (rs) => rs.some((r) => r.body.scope === 'ANSWER_SCOPE_LEADER' && refusedAfter(r.body as never, completeMs)),
      20_000,
    );
    const onLeader = both.find((r) => r.body.scope === 'ANSWER_SCOPE_LEADER')!;
    const onFollower = both.find((r) => r.body.scope === 'ANSWER_SCOPE_FOLLOWER')!;
    expect(onLeader.body).toMatchObject({ state: 'active', lastRefusal: { rule: 'skill_spread' } });
    expect(onFollower.status).toBe(200);
    expect(onFollower.body).toMatchObject({ state: 'active' });
    expect(onFollower.body.lastRefusal).toBeUndefined();
    expect((onFollower.body.notes as string[]).join()).toMatch(/follows the queue.*known only there/);
    // The same pool, the same counts as on the leader.
    const counts = (body: Record<string, unknown>) => (body.rulesets as { candidates: unknown }[])[0]!.candidates;
    expect(counts(onFollower.body)).toMatchObject(TARGET_COUNTS);
    expect(counts(onFollower.body)).toEqual(counts(onLeader.body));
  }, 40_000);

  it("a follower's statistics hold the matches it applied from the queue's log", async () => {
    const { leader, follower } = await roles('rx.pairs');
    for (let i = 0; i < 12; i++)
      expect((await httpTransport(leader).createTicket({ id: uuid(), queueId: 'rx.pairs', engineInput: solo() })).ok).toBe(true);
    const statistics = (r: TestService) => httpRequest(r, 'GET', '/admin/v1/queues/rx.pairs/statistics');
    const onFollower = await pollUntil(
      () => statistics(follower),
      (r) => (r.body.queue as { matchedTickets?: number }).matchedTickets === 12,
      15_000,
    );
    expect(onFollower.body).toMatchObject({ scope: 'ANSWER_SCOPE_FOLLOWER', queue: { matches: 6, matchedTickets: 12 } });
    expect((onFollower.body.notes as string[]).join()).toMatch(/follows the queue/);
    const onLeader = await statistics(leader);
    expect(onLeader.body).toMatchObject({ scope: 'ANSWER_SCOPE_LEADER', queue: { matches: 6, matchedTickets: 12 } });
    // Both replicas applied the same records: the same waits.
    const waits = (body: Record<string, unknown>) => {
      const q = body.queue as Record<string, number>;
      return [q.waitP50Secs, q.waitP95Secs, q.waitP99Secs];
    };
    expect(waits(onFollower.body)).toEqual(waits(onLeader.body));
  }, 30_000);
});
