// @matchmaker/client's MatchmakerClient against the real service over gRPC: the six operations, the engine
// input builder, typed errors (QUEUE_RETIRING among them), and retries: UNAVAILABLE only, with the ticket id
// chosen once, so a CreateTicket whose answer was lost and that is sent again creates one ticket.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  backoffDelay,
  decodeEngineInput,
  engineInput,
  MatchmakerClient,
  MatchmakerError,
  QueueRetiringError,
  type RetryEvent,
} from '@matchmaker/client';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/nats.js';
import { uuid } from '../support/fixtures.js';
import { adminTicket, duelQueue, pollUntil } from '../support/queues.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, useService, writeQueues, type TestService } from '../support/service.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { httpRequest } from '../support/transports.js';

const env = useService({
  queues: {
    'sdk.basic': BASIC_QUEUE,
    'sdk.duel': duelQueue(50),
    'sdk.retiring': BASIC_QUEUE,
  },
});

const clients: MatchmakerClient[] = [];
afterAll(() => {
  for (const c of clients) c.close();
});

function client(address: string, retries: RetryEvent[] = [], retry = { maxAttempts: 40, initialDelayMs: 20, maxDelayMs: 250 }) {
  const c = new MatchmakerClient({ address, retry, onRetry: (e) => retries.push(e) });
  clients.push(c);
  return c;
}

async function activeTickets(service: TestService, queueId: string): Promise<number> {
  const res = await httpRequest(service, 'GET', '/admin/v1/queues');
  const queues = res.body.queues as { queueId: string; activeTickets: number }[];
  return queues.find((q) => q.queueId === queueId)!.activeTickets;
}

const solo = (playerId: string, mmr = 0.5) => engineInput().player({ playerId, mmr, latencies: { 'eu-west': 30 } });

describe('MatchmakerClient: the six operations', () => {
  it('creates tickets (its own id or one it chooses), cancels them and clears the pool', async () => {
    const api = client(`127.0.0.1:${env.service.grpcPort}`);
    const id = uuid();
    const created = await api.createTicket({ id, queueId: 'sdk.basic', engineInput: solo('alice'), metadata: 'session-1' });
    expect(created.ticketId).toBe(id);
    const stored = await adminTicket(env.service, 'sdk.basic', id);
    expect(stored.body).toMatchObject({ state: 'active', ticket: { id, metadata: Buffer.from('session-1').toString('base64') } });

    const chosen = await api.createTicket({ queueId: 'sdk.basic' });
    expect(chosen.ticketId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect((await adminTicket(env.service, 'sdk.basic', chosen.ticketId)).status).toBe(200);

    await api.cancelTicket('sdk.basic', id);
    expect((await adminTicket(env.service, 'sdk.basic', id)).status).toBe(404);

    const cleared = await api.clearQueuePool('sdk.basic');
    expect(cleared.ticketsCleared).toBe(1n);
    expect(await activeTickets(env.service, 'sdk.basic')).toBe(0);
  });

  it('creates and cancels backfill requests', async () => {
    const api = client(`127.0.0.1:${env.service.grpcPort}`);
    const { backfillId } = await api.createBackfillRequest({
      queueId: 'sdk.basic',
      matchId: uuid(),
      slotsRequested: 2,
      engineInput: solo('host'),
    });
    expect(backfillId).toMatch(/^[0-9a-f-]{36}$/);
    const unknown = uuid();
    const cancelled = await api.cancelBackfillRequests('sdk.basic', [backfillId, unknown]);
    expect(cancelled.failedBackfillIds).toEqual([unknown]);
  });

  it('reactivates the tickets of a formed match', async () => {
    const api = client(`127.0.0.1:${env.service.grpcPort}`);
    const ids = [uuid(), uuid()];
    for (const [i, id] of ids.entries()) await api.createTicket({ id, queueId: 'sdk.duel', engineInput: solo(`p${i}`) });
    const resolved = await pollUntil(
      () => Promise.all(ids.map((id) => adminTicket(env.service, 'sdk.duel', id))),
      (r) => r.every((t) => t.body.state === 'resolved'),
    );
    expect(resolved.map((t) => t.body.state)).toEqual(['resolved', 'resolved']);
    const unknown = uuid();
    const reactivated = await api.reactivateTickets('sdk.duel', [...ids, unknown]);
    expect(reactivated.failedTicketIds).toEqual([unknown]);
  });

  it('builds engine inputs: a party with attributes round-trips, and nonsense is refused before sending', () => {
    const builder = engineInput()
      .player({ playerId: 'a', mmr: 0.61, latencies: { 'eu-west': 28, 'eu-central': 41 } })
      .player({ playerId: 'b', mmr: 0.58 })
      .attribute('game_mode', { values: ['ranked'], accepts: ['ranked', 'casual'] });
    const decoded = decodeEngineInput(builder.toBinary());
    expect(decoded).toEqual(builder.build());
    expect(decoded.players.map((p) => [p.playerId, p.mmr, p.latencies])).toEqual([
      ['a', 0.61, { 'eu-west': 28, 'eu-central': 41 }],
      ['b', 0.58, {}],
    ]);
    expect(decoded.attributes.game_mode).toMatchObject({ values: ['ranked'], accepts: ['ranked', 'casual'] });
    expect(() => engineInput().player({ playerId: 'x', mmr: Number.NaN })).toThrow(RangeError);
    expect(() => engineInput().player({ playerId: 'x', mmr: 1, latencies: { h: 1.5 } })).toThrow(RangeError);
  });
});

describe('MatchmakerClient: errors and retries', () => {
  it('fails at once, typed, on codes other than UNAVAILABLE', async () => {
    const retries: RetryEvent[] = [];
    const api = client(`127.0.0.1:${env.service.grpcPort}`, retries);
    const notFound = await api.createTicket({ queueId: 'sdk.nowhere' }).catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(MatchmakerError);
    expect(notFound).toMatchObject({ code: 'NOT_FOUND', grpcCode: 5, attempts: 1, method: 'CreateTicket', retryable: false });
    const invalid = await api.createTicket({ id: 'not-a-uuid', queueId: 'sdk.basic' }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ code: 'INVALID_ARGUMENT', attempts: 1 });
    expect((invalid as Error).message).toContain('ticket.id must be a UUID');
    expect(retries).toEqual([]);
  });

  it('reports a retiring queue as QueueRetiringError (FAILED_PRECONDITION, x-svc-reason QUEUE_RETIRING), not retried', async () => {
    const retries: RetryEvent[] = [];
    const api = client(`127.0.0.1:${env.service.grpcPort}`, retries);
    await api.createTicket({ queueId: 'sdk.retiring', engineInput: solo('waiting') });
    rmSync(join(env.service.queueDir, 'sdk.retiring.yaml'));
    const refused = await pollUntil(
      () =>
        api.createTicket({ queueId: 'sdk.retiring' }).then(
          () => undefined,
          (e: unknown) => e,
        ),
      (e) => e !== undefined,
      15_000,
    );
    expect(refused).toBeInstanceOf(QueueRetiringError);
    expect(refused).toMatchObject({ code: 'FAILED_PRECONDITION', reason: 'QUEUE_RETIRING', queueId: 'sdk.retiring', attempts: 1 });
    expect(retries).toEqual([]);
  });

  it('sends a CreateTicket whose answer was lost again with the same id: one ticket, created once', async () => {
    const proxy = await startTcpProxy(env.service.grpcPort);
    try {
      const retries: RetryEvent[] = [];
      const api = client(proxy.address, retries);
      await api.clearQueuePool('sdk.basic'); // connects, and starts from an empty pool
      proxy.dropResponses();
      const pending = api.createTicket({ queueId: 'sdk.basic' });
      // The service has stored it; its answer is lost, then the connection drops.
      expect(
        await pollUntil(
          () => activeTickets(env.service, 'sdk.basic'),
          (n) => n === 1,
        ),
      ).toBe(1);
      proxy.cut();
      const { ticketId } = await pending;
      expect(retries.map((r) => [r.method, r.error.code])).toEqual([['CreateTicket', 'UNAVAILABLE']]);
      expect((await adminTicket(env.service, 'sdk.basic', ticketId)).status).toBe(200);
      expect(await activeTickets(env.service, 'sdk.basic')).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it('retries UNAVAILABLE through a restart of the service: refused while draining and while down, created once it is back', async () => {
    const grpcPort = String(await freePort());
    const queueDir = tempDir('queues');
    const dataDir = tempDir('data');
    writeQueues(queueDir, { 'sdk.basic': BASIC_QUEUE });
    const first = await startService({ queueDir, dataDir, env: { GRPC_PORT: grpcPort, SHUTDOWN_DRAIN_MS: '700' } });
    let second: TestService | undefined;
    try {
      const retries: RetryEvent[] = [];
      const api = client(`127.0.0.1:${grpcPort}`, retries, { maxAttempts: 200, initialDelayMs: 20, maxDelayMs: 100 });
      const before = await api.createTicket({ queueId: 'sdk.basic' });
      const stopped = first.stop();
      await first.waitForLog((l) => l.msg === 'shutting down: new requests get UNAVAILABLE');
      const pending = api.createTicket({ queueId: 'sdk.basic' });
      expect(await stopped).toBe(0);
      second = await startService({ queueDir, dataDir, env: { GRPC_PORT: grpcPort } });
      const { ticketId } = await pending;

      expect(retries.length).toBeGreaterThanOrEqual(2);
      expect(new Set(retries.map((r) => r.error.code))).toEqual(new Set(['UNAVAILABLE']));
      // The draining service answered UNAVAILABLE itself; then there was no one to answer.
      expect(retries.some((r) => r.error.message.includes('shutting down'))).toBe(true);
      for (const id of [before.ticketId, ticketId]) expect((await adminTicket(second, 'sdk.basic', id)).body.state).toBe('active');
      expect(await activeTickets(second, 'sdk.basic')).toBe(2);
    } finally {
      await first.kill();
      await second?.stop();
      removeDirs(queueDir, dataDir);
    }
  });

  it('waits with exponential backoff and full jitter', () => {
    const policy = { initialDelayMs: 100, maxDelayMs: 1000 };
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, policy, () => 0.999999))).toEqual([99, 199, 399, 799, 999, 999]);
    expect(backoffDelay(3, policy, () => 0)).toBe(0);
  });
});
