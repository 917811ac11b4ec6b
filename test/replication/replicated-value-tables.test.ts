// Value tables that empty, in the replicated mode (docs/engine.md, "Value tables"): two service processes on one
// nats-server apply the same log, so each holds the values of the same waiting tickets. A table full on one
// replica is full on the other once it applied the same entries; a clear or a cancel applied from the log empties
// it on both, whichever replica took the request.
import { fromBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineOutputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { engineInput, uuid } from '../support/fixtures.js';
import { startNatsServer, type TestNatsServer } from '../support/nats.js';
import type { OutcomeJson } from '../support/outcomes.js';
import { startReplicaServices } from '../support/replica-services.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { removeDirs, tempDir, writeQueues, type TestService } from '../support/service.js';
import { grpcTransport, httpRequest, httpTransport, type Transport } from '../support/transports.js';

const QUEUE = 'vt.duel';

/** A ticket of one player at `mmr` with at most one map and one host key (at 50 ms). */
function mapTicket(api: Transport, id: string, mmr: number, t: { map?: string; host?: string }) {
  const input = engineInput({
    players: [{ playerId: `p-${id}`, mmr, latencies: t.host === undefined ? {} : { [t.host]: 50 } }],
    attributes: t.map === undefined ? {} : { map: { values: [t.map], accepts: [] } },
  });
  return api.createTicket({ id, queueId: QUEUE, engineInput: input });
}

/** `count` tickets far from each other in skill, each with a map and a host key of its own; answers their ids. */
async function fill(api: Transport, prefix: string, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => uuid());
  // In batches of 16: each create waits for its log entry.
  for (let i = 0; i < count; i += 16) {
    const batch = ids
      .slice(i, i + 16)
      .map((id, k) => mapTicket(api, id, 1000 + 10 * (i + k), { map: `${prefix}-map-${i + k}`, host: `${prefix}-host-${i + k}` }));
    for (const res of await Promise.all(batch)) expect(res.ok, JSON.stringify(res)).toBe(true);
  }
  return ids;
}

/** A map and a host key new to the queue are both refused by the replica `api` talks to. */
async function expectFull(api: Transport): Promise<void> {
  const map = await mapTicket(api, uuid(), 9000, { map: `extra-${uuid()}` });
  expect(map).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
  expect(!map.ok && map.message).toContain('256 distinct values');
  const host = await mapTicket(api, uuid(), 9000, { host: `extra-${uuid()}` });
  expect(host).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
}

describe('value tables that empty, replicated on one nats-server', () => {
  let nats: TestNatsServer;
  const replicas: TestService[] = [];
  const queueDir = tempDir('queues');
  let a: Transport;
  let b: Transport;

  /** Resolves once `replica` has applied the log up to `active` waiting tickets of the queue. */
  const applied = (replica: TestService, active: number) =>
    pollUntil(
      async () =>
        ((await httpRequest(replica, 'GET', '/admin/v1/queues')).body.queues as { queueId: string; activeTickets: number }[]).find(
          (q) => q.queueId === QUEUE,
        ),
      (q) => q?.activeTickets === active,
      20_000,
    );

  const matchesOf = async (): Promise<OutcomeJson[]> => {
    // Outcomes are in every replica's outbox: the first replica answers.
    const res = await httpRequest(replicas[0]!, 'GET', `/admin/v1/outcomes?queue_id=${QUEUE}&limit=1000`);
    return (res.body.outcomes as OutcomeJson[]).filter((o) => o.kind === 'match.created');
  };

  beforeAll(async () => {
    nats = await startNatsServer();
    writeQueues(queueDir, { [QUEUE]: duelQueue(50, { config: { engine: { attribute_filters: [{ name: 'map', mode: 'overlap' }] } } }) });
    replicas.push(...(await startReplicaServices(nats.url, queueDir, ['vt-a', 'vt-b'])));
    a = httpTransport(replicas[0]!);
    b = grpcTransport(replicas[1]!);
  }, 60_000);

  afterAll(async () => {
    a?.close();
    b?.close();
    await Promise.all(replicas.map((r) => r.stop()));
    await nats?.dispose();
    removeDirs(queueDir, ...replicas.map((r) => r.dataDir));
  });

  it('fills on one replica, refuses on both, and takes new values on both once a clear from the other emptied it', async () => {
    await fill(a, 'old', 256);
    await applied(replicas[1]!, 256);
    await expectFull(a);
    await expectFull(b);
    const cleared = await b.clearQueuePool(QUEUE);
    expect(cleared.ok && Number(cleared.value.ticketsCleared)).toBe(256);
    await applied(replicas[0]!, 0);
    // A new map and host key through each replica: the two tickets share them and match, on that host.
    const pair = [uuid(), uuid()];
    expect((await mapTicket(a, pair[0]!, 0.5, { map: 'new-map', host: 'new-host' })).ok).toBe(true);
    expect((await mapTicket(b, pair[1]!, 0.5, { map: 'new-map', host: 'new-host' })).ok).toBe(true);
    const matches = await pollUntil(
      () => matchesOf(),
      (ms) => ms.length >= 1,
      10_000,
    );
    expect(matches[0]!.matchCreated!.match.tickets.map((t) => t.id).sort()).toEqual([...pair].sort());
    const { host } = fromBinary(EngineOutputSchema, Buffer.from(matches[0]!.matchCreated!.match.engineOutput!, 'base64'));
    expect(host).toMatchObject({ preferred: 'new-host' });
  }, 90_000);

  it('forgets a cancelled ticket’s values on both replicas: the freed room is taken once, by either', async () => {
    await applied(replicas[1]!, 0);
    await fill(b, 'lone', 255);
    const cancelled = uuid();
    expect((await mapTicket(a, cancelled, 5000, { map: 'cancel-map', host: 'cancel-host' })).ok).toBe(true);
    await applied(replicas[0]!, 256);
    await applied(replicas[1]!, 256);
    await expectFull(a);
    await expectFull(b);
    expect((await a.cancelTicket(QUEUE, cancelled)).ok).toBe(true);
    await applied(replicas[1]!, 255);
    // The room goes to a ticket through b; once a applied it, a's table is full again too.
    expect((await mapTicket(b, uuid(), 6000, { map: 'after-cancel', host: 'after-cancel-host' })).ok).toBe(true);
    await applied(replicas[0]!, 256);
    await expectFull(a);
    await expectFull(b);
  }, 90_000);
});
