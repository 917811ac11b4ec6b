// kill -9 at any moment loses no acknowledged ticket, backfill request or recorded outcome.
import { open } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { LmdbStore } from '../../src/store/lmdb-store.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { alike, seedTickets } from '../support/seed.js';
import { grpcTransport, httpRequest, httpTransport } from '../support/transports.js';
import { engineInput, party, uuid } from '../support/fixtures.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';

const dirs: string[] = [];
const services: TestService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.kill();
  removeDirs(...dirs.splice(0));
});

async function start(queueDir: string, dataDir: string): Promise<TestService> {
  const s = await startService({ queueDir, dataDir });
  services.push(s);
  return s;
}

async function queueCounts(service: TestService, queueId: string) {
  const res = await httpRequest(service, 'GET', '/admin/v1/queues');
  return (res.body.queues as { queueId: string; activeTickets: number; backfillRequests: number }[]).find((q) => q.queueId === queueId)!;
}

describe('kill -9 and restart', () => {
  it('keeps every ticket acknowledged before the kill, even with writes in flight, over three kills', { timeout: 120_000 }, async () => {
    const queueDir = tempDir('queues');
    const dataDir = tempDir('data');
    dirs.push(queueDir, dataDir);
    writeQueues(queueDir, { 'test.basic': BASIC_QUEUE });
    const acknowledged = new Set<string>();

    for (let round = 0; round < 3; round++) {
      const service = await start(queueDir, dataDir);
      const apis = [grpcTransport(service), httpTransport(service)];
      let stop = false;
      // 64 writers over both transports keep creating until the process dies under them.
      const writers = Array.from({ length: 64 }, async (_, w) => {
        const api = apis[w % 2]!;
        while (!stop) {
          const id = uuid();
          const res = await api.createTicket({ id, queueId: 'test.basic', engineInput: party(1 + (w % 5)) }).catch(() => undefined);
          if (!res?.ok) return;
          acknowledged.add(id);
        }
      });
      const target = acknowledged.size + 300;
      while (acknowledged.size < target) await new Promise((r) => setTimeout(r, 5));
      await service.kill();
      stop = true;
      await Promise.all(writers);
      apis[0]!.close();
    }

    const last = await start(queueDir, dataDir);
    const counts = await queueCounts(last, 'test.basic');
    // Every acknowledged ticket is back; a write that committed but whose answer was cut off may be there too.
    expect(counts.activeTickets).toBeGreaterThanOrEqual(acknowledged.size);
    const missing: string[] = [];
    for (const id of acknowledged) {
      const res = await httpRequest(last, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
      if (res.status !== 200) missing.push(id);
    }
    expect(missing).toEqual([]);
  });

  it('keeps backfill requests and recorded outcomes, and continues the producer sequence', async () => {
    const queueDir = tempDir('queues');
    const dataDir = tempDir('data');
    dirs.push(queueDir, dataDir);
    writeQueues(queueDir, { 'test.basic': BASIC_QUEUE });
    const first = await start(queueDir, dataDir);
    const api = grpcTransport(first);
    const tickets = [uuid(), uuid(), uuid()];
    for (const id of tickets) expect((await api.createTicket({ id, queueId: 'test.basic' })).ok).toBe(true);
    expect((await api.clearQueuePool('test.basic')).ok).toBe(true);
    const backfill = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid(), slotsRequested: 2 });
    expect(backfill.ok).toBe(true);
    api.close();
    const before = (await httpRequest(first, 'GET', '/admin/v1/outcomes')).body.outcomes as {
      id: string;
      producerId: string;
      producerSequence: string;
    }[];
    expect(before).toHaveLength(1);
    await first.kill();

    const second = await start(queueDir, dataDir);
    const after = (await httpRequest(second, 'GET', '/admin/v1/outcomes')).body.outcomes as typeof before;
    expect(after).toEqual(before);
    expect((await queueCounts(second, 'test.basic')).backfillRequests).toBe(1);

    // The next outcome continues the sequence of the same producer.
    const api2 = grpcTransport(second);
    expect((await api2.createTicket({ id: uuid(), queueId: 'test.basic' })).ok).toBe(true);
    expect((await api2.clearQueuePool('test.basic')).ok).toBe(true);
    api2.close();
    const latest = (await httpRequest(second, 'GET', '/admin/v1/outcomes')).body.outcomes as typeof before;
    expect(latest.map((o) => o.producerSequence)).toEqual(['1', '2', '3']);
    expect(new Set(latest.map((o) => o.producerId))).toEqual(new Set([before[0]!.producerId]));
  });

  it('a clean SIGTERM shutdown exits 0 and keeps the pool', async () => {
    const queueDir = tempDir('queues');
    const dataDir = tempDir('data');
    dirs.push(queueDir, dataDir);
    writeQueues(queueDir, { 'test.basic': BASIC_QUEUE });
    const first = await start(queueDir, dataDir);
    const api = httpTransport(first);
    const id = uuid();
    expect((await api.createTicket({ id, queueId: 'test.basic' })).ok).toBe(true);
    expect(await first.stop()).toBe(0);
    const second = await start(queueDir, dataDir);
    expect((await httpRequest(second, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`)).status).toBe(200);
  });

  it('refuses a data directory whose tickets are in the earlier layout instead of serving without them', async () => {
    const dataDir = tempDir('data');
    dirs.push(dataDir);
    const old = open({ path: dataDir, maxDbs: 10 });
    await old.openDB({ name: 'tickets' }).put(`test.basic\u0000${uuid()}`, { state: 'active' });
    await old.close();
    expect(() => new LmdbStore({ path: dataDir, onFatal: () => undefined })).toThrow(/earlier data layout \(database "tickets"\)/);
  });

  it('takes requests while a large pool is restored, with duplicates and cancels right from the first one', {
    timeout: 120_000,
  }, async () => {
    const queueDir = tempDir('queues');
    const dataDir = tempDir('data');
    dirs.push(queueDir, dataDir);
    writeQueues(queueDir, { 'restore.duel': duelQueue(50, 80) });
    // 100k tickets that never match (their only host is 500 ms away), then two that match each other,
    // last, so their rows are built in the restore's last slice.
    const far = engineInput({ players: [{ playerId: 'far', mmr: 0.9, latencies: { near: 500 } }] });
    const near = engineInput({ players: [{ playerId: 'near', mmr: 0.1, latencies: { near: 10 } }] });
    const background = 100_000;
    const [a, b, c] = [uuid(), uuid(), uuid()];
    await seedTickets(dataDir, 'restore.duel', [...alike(background, far), { id: a, engineInput: near }, { id: b, engineInput: near }]);

    const service = await startService({ queueDir, dataDir, startTimeoutMs: 90_000 });
    services.push(service);
    const api = grpcTransport(service);
    // Answered at once, before the restored rows are all built: a's cancel means it is never matched, b's
    // retried create makes no second entry, and c is new.
    expect((await api.cancelTicket('restore.duel', a)).ok).toBe(true);
    expect((await api.createTicket({ id: b, queueId: 'restore.duel', engineInput: near })).ok).toBe(true);
    expect((await api.createTicket({ id: c, queueId: 'restore.duel', engineInput: near })).ok).toBe(true);
    const answeredAt = Date.now();
    expect((await queueCounts(service, 'restore.duel')).activeTickets).toBe(background + 2);
    const restored = await pollUntil(
      async () => service.logs.find((l) => l.msg === 'pool restored'),
      (l) => l !== undefined,
      60_000,
    );
    expect(restored!.time as number).toBeGreaterThan(answeredAt);

    const outcomes = async () =>
      (await httpRequest(service, 'GET', '/admin/v1/outcomes?queue_id=restore.duel&limit=100')).body.outcomes as {
        kind: string;
        matchCreated?: { match: { tickets: { id: string }[] } };
      }[];
    const matched = await pollUntil(outcomes, (list) => list.some((o) => o.kind === 'match.created'), 60_000);
    const matches = matched.filter((o) => o.kind === 'match.created').map((o) => o.matchCreated!.match.tickets.map((t) => t.id).sort());
    expect(matches).toEqual([[b, c].sort()]);
    api.close();
  });
});
