// Serving in the replicated mode, with two service processes on one nats-server. Availability: a queue
// answers UNAVAILABLE (and its health and readiness say so) while the NATS server is gone, and serves again
// once it is back. The WebSocket outcome stream: every replica holds every queue's outbox, so a stream works
// on any replica; offsets are the queue's own producer_sequence, so a stream follows one queue; a named
// consumer's acknowledgement is recorded in the queue's log, so it resumes on another replica.
import { credentials, makeGenericClientConstructor, type Client } from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { party, uuid } from '../support/fixtures.js';
import { startNatsServer, type TestNatsServer } from '../support/nats.js';
import { startReplicaServices } from '../support/replica-services.js';
import type { StreamFrame } from '../support/outcomes.js';
import { sampleSum, scrape, type Sample } from '../support/prometheus.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';
import { httpRequest, httpTransport } from '../support/transports.js';

type Frame = StreamFrame;

/** Opens a stream; resolves with its frames once `ready` came (or the refusal's HTTP status). */
function openStream(service: TestService, query: Record<string, string>): Promise<{ ws: WebSocket; frames: Frame[] } | number> {
  const ws = new WebSocket(`ws://127.0.0.1:${service.httpPort}/v1/outcomes/stream?${new URLSearchParams(query)}`);
  const frames: Frame[] = [];
  return new Promise((resolve, reject) => {
    ws.on('message', (data) => {
      frames.push(JSON.parse(String(data)) as Frame);
      if (frames.length === 1) resolve({ ws, frames });
    });
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('error', reject);
  });
}

const outcomesOf = (frames: Frame[]) => frames.filter((f): f is Extract<Frame, { type: 'outcome' }> => f.type === 'outcome');

/** The gRPC health status of `service` on the replica. */
async function healthOf(replica: TestService, service: string): Promise<string> {
  const Health = makeGenericClientConstructor(healthService, 'Health');
  const client = new Health(`127.0.0.1:${replica.grpcPort}`, credentials.createInsecure()) as unknown as Client & {
    Check(req: unknown, cb: (err: Error | null, r: { status: string }) => void): void;
  };
  try {
    return await new Promise((resolve, reject) => client.Check({ service }, (err, r) => (err ? reject(err) : resolve(r.status))));
  } finally {
    client.close();
  }
}

describe('replicated mode on one nats-server', () => {
  let nats: TestNatsServer;
  const replicas: TestService[] = [];
  const queueDir = tempDir('queues');

  beforeAll(async () => {
    nats = await startNatsServer();
    writeQueues(queueDir, { 'ws.duel': duelQueue(50), 'ws.other': duelQueue(50), 'ws.count': duelQueue(50) });
    replicas.push(...(await startReplicaServices(nats.url, queueDir, ['ws-a', 'ws-b'])));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await nats?.dispose();
    removeDirs(queueDir, ...replicas.map((r) => r.dataDir));
  });

  it('answers UNAVAILABLE for a queue while NATS is gone, says so in health and readiness, and serves again after', async () => {
    const [a] = replicas as [TestService];
    // Brought up to date every 500 ms: right after start-up it may still say the queue was starting.
    await pollUntil(
      () => healthOf(a, 'queue/ws.other'),
      (s) => s === 'SERVING',
      5_000,
    );
    expect((await fetch(`${a.baseUrl}/readyz?queue_id=ws.other`)).status).toBe(200);
    expect((await fetch(`${a.baseUrl}/readyz?queue_id=nope`)).status).toBe(404);

    await nats.kill();
    const down = await pollUntil(
      () => httpTransport(a).createTicket({ id: uuid(), queueId: 'ws.other' }),
      (r) => !r.ok,
      10_000,
    );
    expect(down.ok || down.code).toBe('UNAVAILABLE');
    const ready = await fetch(`${a.baseUrl}/readyz?queue_id=ws.other`);
    expect([ready.status, await ready.json()]).toEqual([503, { status: 'unreachable' }]);
    await pollUntil(
      () => healthOf(a, 'queue/ws.other'),
      (s) => s === 'NOT_SERVING',
      5_000,
    );
    // The service itself stays up: other answers keep coming.
    expect((await fetch(`${a.baseUrl}/readyz`)).status).toBe(200);

    await nats.restart();
    const again = await pollUntil(
      () => httpTransport(a).createTicket({ id: uuid(), queueId: 'ws.other' }),
      (r) => r.ok,
      20_000,
      200,
    );
    expect(again.ok).toBe(true);
    expect((await fetch(`${a.baseUrl}/readyz?queue_id=ws.other`)).status).toBe(200);
  }, 60_000);

  it('shows an operator which replicas run another version of a queue file (a rollout)', async () => {
    const [a] = replicas as [TestService];
    type Summary = { queueId: string; configHash: string; replicaConfigHashes: Record<string, string | null>; configDiverges: boolean };
    const summary = async (replica: TestService, queueId: string) =>
      ((await httpRequest(replica, 'GET', '/admin/v1/queues')).body.queues as Summary[]).find((q) => q.queueId === queueId)!;
    const same = await pollUntil(
      () => summary(a, 'ws.other'),
      (q) => Object.keys(q.replicaConfigHashes).length === 2,
    );
    expect(same.configDiverges).toBe(false);
    expect(Object.values(same.replicaConfigHashes)).toEqual([same.configHash, same.configHash]);

    // A third replica with a newer file of ws.other (another tick interval), and no ws.duel.
    const newer = tempDir('queues-newer');
    writeQueues(newer, { 'ws.other': duelQueue(75) });
    const c = await startService({
      queueDir: newer,
      env: { POOL_REPLICATION_BACKEND: 'broker', BROKER_URL: nats.url, REPLICA_ID: 'ws-c', LEADER_LEASE_MS: '2000' },
    });
    try {
      const split = await pollUntil(
        () => summary(a, 'ws.other'),
        (q) => q.configDiverges,
        10_000,
      );
      expect(split.replicaConfigHashes['ws-a']).toBe(split.configHash);
      expect(split.replicaConfigHashes['ws-c']).not.toBe(split.configHash);
      // The newcomer sees it too, once it has counted the others (its first presence refresh).
      await pollUntil(
        () => summary(c, 'ws.other'),
        (q) => q.configDiverges,
        10_000,
      );
      const duel = await pollUntil(
        () => summary(a, 'ws.duel'),
        (q) => 'ws-c' in q.replicaConfigHashes,
      );
      expect(duel.replicaConfigHashes['ws-c']).toBeNull();
    } finally {
      await c.stop();
      removeDirs(newer, c.dataDir);
    }
    // Gone (its presence key deleted on stop): the others agree again. Waits for both: once in CI a's view
    // held only itself for a moment (ws-b's presence not listed by one refresh; the next lists it).
    const healed = await pollUntil(
      () => summary(a, 'ws.other'),
      (q) => !q.configDiverges && Object.keys(q.replicaConfigHashes).length === 2,
      10_000,
    );
    expect(Object.keys(healed.replicaConfigHashes).sort()).toEqual(['ws-a', 'ws-b']);
  }, 60_000);

  it('refuses a stream over several queues: offsets are per queue', async () => {
    expect(await openStream(replicas[0]!, { queue_id: 'ws.>' })).toBe(400);
    expect(await openStream(replicas[0]!, {})).toBe(400);
  });

  it('streams a queue on every replica, with the same offsets, and resumes a consumer on another replica', async () => {
    const [a, b] = replicas as [TestService, TestService];
    const onA = await openStream(a, { queue_id: 'ws.duel', consumer: 'billing' });
    const onB = await openStream(b, { queue_id: 'ws.duel' });
    if (typeof onA === 'number' || typeof onB === 'number') throw new Error('stream refused');
    expect(onA.frames[0]).toMatchObject({ type: 'ready', after: '0', consumer: 'billing', offsets: 'queue' });

    // Four tickets through both replicas: two matches. Outcomes of another queue number on their own.
    const ids = [uuid(), uuid(), uuid(), uuid()];
    for (const [i, id] of ids.entries()) {
      const created = await httpTransport(i % 2 === 0 ? a : b).createTicket({ id, queueId: 'ws.duel' });
      expect(created.ok).toBe(true);
      await httpTransport(a).createTicket({ id: uuid(), queueId: 'ws.other' });
    }
    await pollUntil(
      async () => [outcomesOf(onA.frames).length, outcomesOf(onB.frames).length],
      ([x, y]) => x === 2 && y === 2,
      15_000,
    );
    const offsets = (frames: Frame[]) => outcomesOf(frames).map((f) => [f.offset, f.outcome.id]);
    expect(offsets(onA.frames)).toEqual(offsets(onB.frames));
    expect(outcomesOf(onA.frames).map((f) => f.offset)).toEqual(['1', '2']);
    const matched = outcomesOf(onA.frames).flatMap((f) => f.outcome.matchCreated!.match.tickets.map((t) => t.id));
    expect(matched.sort()).toEqual([...ids].sort());

    // The first outcome acknowledged on A: a reconnect on B without from_offset starts after it.
    onA.ws.send(JSON.stringify({ type: 'ack', offset: '1' }));
    await pollUntil(
      async () => onA.frames.find((f) => f.type === 'acked'),
      (f) => f !== undefined,
    );
    onA.ws.close();
    onB.ws.close();
    // B learns of the acknowledgement when it applies its log entry: a reconnect in the moment before
    // starts earlier (a replay, which at-least-once allows), so the client reconnects until B has it.
    const resumed = await pollUntil(
      async () => {
        const stream = await openStream(b, { queue_id: 'ws.duel', consumer: 'billing' });
        if (typeof stream === 'number') throw new Error('stream refused');
        if (stream.frames[0]?.type === 'ready' && stream.frames[0].after !== '1') stream.ws.close();
        return stream;
      },
      (stream) => stream.frames[0]?.type === 'ready' && stream.frames[0].after === '1',
      5_000,
    );
    expect(resumed.frames[0]).toMatchObject({ type: 'ready', after: '1', consumer: 'billing' });
    await pollUntil(
      async () => outcomesOf(resumed.frames).length,
      (n) => n === 1,
    );
    expect(outcomesOf(resumed.frames)[0]!.offset).toBe('2');
    resumed.ws.close();
  }, 60_000);

  it("counts a queue's events on the replica that leads it only, so the replicas add up to each event once", async () => {
    // Tickets created through both replicas; the leader matches them.
    const [a, b] = replicas as [TestService, TestService];
    const requestsOk = (samples: Sample[]) =>
      sampleSum(samples, 'matchmaker_requests_total', { operation: 'CreateTicket', transport: 'http', code: 'OK' }) ?? 0;
    const before = (await Promise.all(replicas.map((r) => scrape(r.baseUrl)))).map(requestsOk);
    for (const [i, replica] of [a, b, a, b].entries()) {
      const created = await httpTransport(replica).createTicket({
        id: uuid(),
        queueId: 'ws.count',
        engineInput: party(1, 0.5 + i * 0.001),
      });
      expect(created.ok).toBe(true);
    }
    const labels = { queue_id: 'ws.count', ruleset_id: 'duel' };
    const both = await pollUntil(
      () => Promise.all(replicas.map((r) => scrape(r.baseUrl))),
      (scrapes) => scrapes.reduce((n, s) => n + (sampleSum(s, 'matchmaker_matches_total', labels) ?? 0), 0) >= 2,
      15_000,
    );
    const sum = (name: string, l: Record<string, string>) => both.reduce((n, s) => n + (sampleSum(s, name, l) ?? 0), 0);
    expect(sum('matchmaker_matches_total', labels)).toBe(2);
    expect(sum('matchmaker_players_matched_total', labels)).toBe(4);
    expect(sum('matchmaker_tickets_created_total', { queue_id: 'ws.count' })).toBe(4);
    // One replica leads the queue, and it is the one that counted.
    const leading = both.map((s) => sampleSum(s, 'matchmaker_queue_leading', { queue_id: 'ws.count' }));
    expect(leading.sort()).toEqual([0, 1]);
    const leader = both.find((s) => sampleSum(s, 'matchmaker_queue_leading', { queue_id: 'ws.count' }) === 1)!;
    expect(sampleSum(leader, 'matchmaker_matches_total', labels)).toBe(2);
    // Each replica counts the requests it answered itself.
    expect(both.map((s, i) => requestsOk(s) - before[i]!)).toEqual([2, 2]);
    // Both follow the queue's log to the same position (its creates and the leader's matches at least).
    const positions = await pollUntil(
      async () =>
        (await Promise.all(replicas.map((r) => scrape(r.baseUrl)))).map((s) =>
          sampleSum(s, 'matchmaker_replication_applied_position', { queue_id: 'ws.count' }),
        ),
      (p) => p[0] !== undefined && p[0] === p[1],
      15_000,
    );
    expect(positions[0]).toBeGreaterThanOrEqual(4);
    // ...under the same term: the leader's claim, a position of the log before its matches.
    const terms = (await Promise.all(replicas.map((r) => scrape(r.baseUrl)))).map((s) =>
      sampleSum(s, 'matchmaker_replication_term', { queue_id: 'ws.count' }),
    );
    expect(terms[0]).toBeGreaterThanOrEqual(1);
    expect(terms[1]).toBe(terms[0]);
    expect(terms[0]).toBeLessThan(positions[0]!);
  });
});
