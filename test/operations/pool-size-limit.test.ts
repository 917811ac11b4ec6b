// A queue's pool holds at most limits.max_pool_tickets waiting tickets (docs/configuration.md "Pool size"): at
// the limit CreateTicket of a new ticket is refused with RESOURCE_EXHAUSTED (HTTP 429) naming the queue and
// the limit, and nothing is stored; a retry of a ticket the queue holds answers as before; ReactivateTickets is
// not refused; a hot reload changes the limit and a lowered one removes nothing. Real service, both
// transports; and in the replicated mode, two replicas on one nats-server.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { queueConfigSchema } from '../../src/config/queue-config.js';
import { engineInput, uuid } from '../support/fixtures.js';
import { startNatsServer, type TestNatsServer } from '../support/nats.js';
import { startReplicaServices } from '../support/replica-services.js';
import { adminTicket, pollUntil } from '../support/queues.js';
import { removeDirs, tempDir, type TestService, useService, writeQueues } from '../support/service.js';
import { grpcTransport, httpRequest, httpTransport, type Transport } from '../support/transports.js';

/** A 1v1 queue holding at most `maxPoolTickets` waiting tickets; it never ticks unless `tickIntervalMs` says. */
function limitedQueue(maxPoolTickets: number, tickIntervalMs = 3_600_000): string {
  return stringify({
    config: {
      tick_interval_ms: tickIntervalMs,
      limits: { max_pool_tickets: maxPoolTickets },
      // Bounds that never widen: tickets far apart in skill never match.
      rulesets: [{ id: 'duel', teams: 2, team_size: 1, expansion: { curve: 'none' } }],
    },
  });
}

const fullMessage = (queueId: string, limit: number) =>
  `queue "${queueId}" is full: its pool holds its limit of ${limit} waiting tickets (limits.max_pool_tickets); retry once tickets have left it`;

/** The refusal as each transport says it. */
const refusal = (transport: 'grpc' | 'http', queueId: string, limit: number) => ({
  ok: false,
  code: 'RESOURCE_EXHAUSTED',
  message: fullMessage(queueId, limit),
  ...(transport === 'http' ? { httpStatus: 429 } : {}),
});

const solo = (queueId: string, mmr = 0.5, id = uuid()) => ({
  id,
  queueId,
  engineInput: engineInput({ players: [{ playerId: `p-${id}`, mmr }] }),
});

async function activeTickets(service: TestService, queueId: string): Promise<number | undefined> {
  const res = await httpRequest(service, 'GET', '/admin/v1/queues');
  return (res.body.queues as { queueId: string; activeTickets: number }[]).find((q) => q.queueId === queueId)?.activeTickets;
}

it('defaults to 2,000,000 waiting tickets per queue', () => {
  const config = queueConfigSchema.parse({ rulesets: [{ id: 'duel', teams: 2, team_size: 1 }] });
  expect(config.limits.max_pool_tickets).toBe(2_000_000);
  expect(queueConfigSchema.safeParse({ limits: { max_pool_tickets: 0 }, rulesets: [{ id: 'd', teams: 2, team_size: 1 }] }).success).toBe(
    false,
  );
});

const env = useService({
  queues: {
    'pool.grpc': limitedQueue(3),
    'pool.http': limitedQueue(3),
    'react.grpc': limitedQueue(2, 50),
    'react.http': limitedQueue(2, 50),
  },
});

/** Each transport with its own queues. */
const TRANSPORTS = [
  ['grpc', () => grpcTransport(env.service)],
  ['http', () => httpTransport(env.service)],
] as const;

describe.each(TRANSPORTS)('the pool size limit (%s)', (name, transport) => {
  const queueId = `pool.${name}`;
  let api: Transport;
  const held: string[] = [];
  beforeAll(() => {
    api = transport();
  });
  afterAll(() => api.close());

  it('refuses a new ticket once the pool holds max_pool_tickets, naming the queue and the limit, and stores nothing', async () => {
    for (let i = 0; i < 3; i++) {
      const t = solo(queueId);
      expect((await api.createTicket(t)).ok).toBe(true);
      held.push(t.id);
    }
    const refused = solo(queueId);
    expect(await api.createTicket(refused)).toEqual(refusal(name, queueId, 3));
    expect((await adminTicket(env.service, queueId, refused.id)).status).toBe(404);
    expect(await activeTickets(env.service, queueId)).toBe(3);
  });

  it('answers a retry of a ticket the pool holds as before, even at the limit', async () => {
    expect(await api.createTicket(solo(queueId, 0.5, held[0]))).toEqual({
      ok: true,
      value: expect.objectContaining({ ticketId: held[0] }),
    });
    expect(await activeTickets(env.service, queueId)).toBe(3);
  });

  it('takes a new ticket once one has left the pool', async () => {
    expect((await api.cancelTicket(queueId, held.shift()!)).ok).toBe(true);
    const t = solo(queueId);
    expect((await api.createTicket(t)).ok).toBe(true);
    held.push(t.id);
    expect(await api.createTicket(solo(queueId))).toEqual(refusal(name, queueId, 3));
  });

  it('follows a hot-reloaded limit: raised, new tickets enter; lowered below the pool, nothing is removed', async () => {
    writeFileSync(join(env.service.queueDir, `${queueId}.yaml`), limitedQueue(5));
    await pollUntil(
      () => api.createTicket(solo(queueId)),
      (r) => r.ok,
    );
    expect((await api.createTicket(solo(queueId))).ok).toBe(true);
    expect(await api.createTicket(solo(queueId))).toEqual(refusal(name, queueId, 5));

    writeFileSync(join(env.service.queueDir, `${queueId}.yaml`), limitedQueue(2));
    const lowered = await pollUntil(
      () => api.createTicket(solo(queueId)),
      (r) => !r.ok && r.message === fullMessage(queueId, 2),
    );
    expect(lowered).toEqual(refusal(name, queueId, 2));
    expect(await activeTickets(env.service, queueId)).toBe(5);
    for (const id of held) expect((await adminTicket(env.service, queueId, id)).body).toMatchObject({ state: 'active' });
  });
});

describe.each(TRANSPORTS)('ReactivateTickets at the limit (%s)', (name, transport) => {
  it('returns matched tickets to a full pool: they were admitted before', async () => {
    const queueId = `react.${name}`;
    const api = transport();
    try {
      const pair = [solo(queueId, 0.5), solo(queueId, 0.5)];
      for (const t of pair) expect((await api.createTicket(t)).ok).toBe(true);
      for (const t of pair) {
        const seen = await pollUntil(
          () => adminTicket(env.service, queueId, t.id),
          (res) => res.body.state === 'resolved',
        );
        expect(seen.body).toMatchObject({ state: 'resolved' });
      }
      // Two tickets far apart in skill fill the pool; neither matches.
      for (const mmr of [0, 100]) expect((await api.createTicket(solo(queueId, mmr))).ok).toBe(true);
      expect(await api.createTicket(solo(queueId))).toEqual(refusal(name, queueId, 2));
      expect(await api.reactivateTickets(queueId, [pair[0]!.id, pair[1]!.id])).toEqual({
        ok: true,
        value: expect.objectContaining({ failedTicketIds: [] }),
      });
    } finally {
      api.close();
    }
  });
});

describe('the pool size limit in the replicated mode (two replicas)', () => {
  let nats: TestNatsServer;
  const replicas: TestService[] = [];
  const queueDir = tempDir('queues');
  const queueId = 'rep.pool';

  beforeAll(async () => {
    nats = await startNatsServer();
    writeQueues(queueDir, { [queueId]: limitedQueue(3) });
    replicas.push(...(await startReplicaServices(nats.url, queueDir, ['pool-a', 'pool-b'])));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await nats?.dispose();
    removeDirs(queueDir, ...replicas.map((r) => r.dataDir));
  });

  it('refuses a new ticket through either replica once the shared pool is full; a retry through the other replica answers OK', async () => {
    const [a, b] = replicas as [TestService, TestService];
    const grpcA = grpcTransport(a);
    const httpB = httpTransport(b);
    try {
      const first = solo(queueId);
      expect((await grpcA.createTicket(first)).ok).toBe(true);
      expect((await httpB.createTicket(solo(queueId))).ok).toBe(true);
      expect((await grpcA.createTicket(solo(queueId))).ok).toBe(true);
      for (const r of replicas) {
        expect(
          await pollUntil(
            () => activeTickets(r, queueId),
            (n) => n === 3,
          ),
        ).toBe(3);
      }
      expect(await grpcA.createTicket(solo(queueId))).toEqual(refusal('grpc', queueId, 3));
      expect(await httpB.createTicket(solo(queueId))).toEqual(refusal('http', queueId, 3));
      expect(await httpB.createTicket(first)).toEqual({ ok: true, value: expect.objectContaining({ ticketId: first.id }) });

      // A raised limit, through the queue file both replicas read.
      writeQueues(queueDir, { [queueId]: limitedQueue(4) });
      await pollUntil(
        () => httpB.createTicket(solo(queueId)),
        (r) => r.ok,
      );
      for (const r of replicas) {
        expect(
          await pollUntil(
            () => activeTickets(r, queueId),
            (n) => n === 4,
          ),
        ).toBe(4);
      }
      const refused = await pollUntil(
        () => grpcA.createTicket(solo(queueId)),
        (r) => !r.ok && r.message === fullMessage(queueId, 4),
      );
      expect(refused).toEqual(refusal('grpc', queueId, 4));
    } finally {
      grpcA.close();
    }
  }, 60_000);
});
