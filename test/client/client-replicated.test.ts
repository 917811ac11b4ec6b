// The client SDK against the replicated mode (two service processes on one nats-server): tickets created
// through one replica are matched once, and a named WebSocket consumer on the other replica receives the
// match, acknowledges it, and after reconnecting to the first replica resumes after it: the position is kept
// in the queue's log. Each queue is its own producer here, and the stream says so: gap detection is on.
import { engineInput, MatchmakerClient, websocketConsumer, type OutcomeConsumer, type OutcomeDelivery } from '@matchmaker/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuid } from '../support/fixtures.js';
import { startNatsServer, type TestNatsServer } from '../support/nats.js';
import { startReplicaServices } from '../support/replica-services.js';
import { duelQueue } from '../support/queues.js';
import { removeDirs, tempDir, writeQueues, type TestService } from '../support/service.js';
import { nextDelivery } from '../support/outcome-consumers.js';

const QUEUE = 'sdk.replicated';

let nats: TestNatsServer;
const replicas: TestService[] = [];
const queueDir = tempDir('queues');
const clients: MatchmakerClient[] = [];
const consumers: OutcomeConsumer[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
  writeQueues(queueDir, { [QUEUE]: duelQueue(50) });
  replicas.push(...(await startReplicaServices(nats.url, queueDir, ['sdk-a', 'sdk-b'])));
}, 60_000);

afterAll(async () => {
  await Promise.all(consumers.map((c) => c.close()));
  for (const c of clients) c.close();
  await Promise.all(replicas.map((r) => r.stop()));
  await nats?.dispose();
  removeDirs(queueDir, ...replicas.map((r) => r.dataDir));
});

/** Two players queued through `client`: their ticket ids. */
async function duel(client: MatchmakerClient): Promise<string[]> {
  const ids: string[] = [];
  for (const playerId of [`p-${uuid()}`, `p-${uuid()}`]) {
    ids.push((await client.createTicket({ queueId: QUEUE, engineInput: engineInput().player({ playerId, mmr: 0.5 }) })).ticketId);
  }
  return ids.sort();
}

const ticketsOf = (d: OutcomeDelivery) =>
  d.outcome.payload.case === 'matchCreated' ? d.outcome.payload.value.match!.tickets.map((t) => t.id).sort() : [];

describe('the client on two replicas', () => {
  it('creates through one replica, consumes through the other, and resumes a named consumer on the first', async () => {
    const [a, b] = replicas as [TestService, TestService];
    const onA = new MatchmakerClient({ address: `127.0.0.1:${a.grpcPort}` });
    clients.push(onA);
    const gaps: unknown[] = [];
    // No detectGaps: the stream's `ready` says offsets are the queue's own, and the consumer turns it on.
    const options = { queueId: QUEUE, consumer: 'sdk-replicated', onGap: (g: unknown) => gaps.push(g) };

    const onB = websocketConsumer({ url: b.baseUrl, ...options });
    consumers.push(onB);
    await onB.ready();
    const first = await duel(onA);
    const delivered = await nextDelivery(onB, 15_000);
    expect(delivered.outcome.kind).toBe('match.created');
    expect(ticketsOf(delivered)).toEqual(first);
    await delivered.ack();
    await onB.close();

    // The acknowledged position is in the queue's log: on replica a the consumer starts after it.
    const second = await duel(onA);
    const resumed = websocketConsumer({ url: a.baseUrl, ...options });
    consumers.push(resumed);
    await resumed.ready();
    const after = await nextDelivery(resumed, 15_000);
    expect(ticketsOf(after)).toEqual(second);
    expect(after.outcome.producerSequence).toBe(delivered.outcome.producerSequence + 1n);
    expect(after.outcome.producerId).toBe(delivered.outcome.producerId);
    await after.ack();
    expect(gaps).toEqual([]);
  });
});
