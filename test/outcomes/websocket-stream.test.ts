// The WebSocket outcome stream (docs/outcomes-websocket.md) against the real service and a real `ws` client:
// live push, replay, filters, the websocket-sink restriction, durable consumers across restarts, heartbeats
// and malformed client frames.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { party, uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { removeDirs, startService, tempDir, useService, writeQueues, type TestService } from '../support/service.js';
import { httpRequest, httpTransport, type Transport } from '../support/transports.js';
import type { OutcomeJson, StreamFrame } from '../support/outcomes.js';

/** A queue that never ticks: ClearQueuePool turns each of its tickets into one ticket.removed outcome. */
const clearQueue = (outcomes: Record<string, unknown> = {}) => duelQueue(3600000, { outcomes: { ...outcomes, batch_chunk_size: 1 } });

const QUEUES = {
  // The default sink is websocket; ws.b and other.c say so explicitly.
  'ws.a': clearQueue(),
  'ws.b': clearQueue({ sink: 'websocket' }),
  'other.c': clearQueue({ sink: 'websocket' }),
  // A webhook queue whose endpoint is a closed port: its outcomes stay in the outbox, never on the stream.
  'ws.hook': clearQueue({
    sink: 'webhook',
    webhook: { url: 'http://127.0.0.1:9/outcomes', secret: 'test-secret', timeout_ms: 200, max_retries: 0 },
  }),
  // A fast-ticking 1v1 queue: two tickets become one match.created.
  'ws.match': duelQueue(50),
};

const env = useService({ queues: QUEUES });

type Frame = StreamFrame;

/** A stream connection that records every frame, ping and its close. */
class StreamClient {
  readonly frames: Frame[] = [];
  pings = 0;
  closeCode: number | undefined;
  readonly closed: Promise<number>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.frames.push(JSON.parse(String(data)) as Frame));
    ws.on('ping', () => this.pings++);
    ws.on('error', () => undefined);
    this.closed = new Promise((resolve) => ws.once('close', (code) => resolve((this.closeCode = code))));
  }

  /** Connects and waits for the ready frame. */
  static async open(
    service: TestService,
    query: Record<string, string> = {},
    options: WebSocket.ClientOptions = {},
  ): Promise<StreamClient> {
    const qs = new URLSearchParams(query).toString();
    const client = new StreamClient(new WebSocket(`ws://127.0.0.1:${service.httpPort}/v1/outcomes/stream${qs ? `?${qs}` : ''}`, options));
    await client.until(() => client.ready !== undefined);
    return client;
  }

  get ready(): Extract<Frame, { type: 'ready' }> | undefined {
    return this.frames.find((f): f is Extract<Frame, { type: 'ready' }> => f.type === 'ready');
  }
  get outcomes(): Extract<Frame, { type: 'outcome' }>[] {
    return this.frames.filter((f): f is Extract<Frame, { type: 'outcome' }> => f.type === 'outcome');
  }
  get offsets(): bigint[] {
    return this.outcomes.map((f) => BigInt(f.offset));
  }
  ofType<T extends Frame['type']>(type: T): Extract<Frame, { type: T }>[] {
    return this.frames.filter((f): f is Extract<Frame, { type: T }> => f.type === type);
  }

  /** Polls until `done` holds (or the time is up); then asserts it, so a failure shows what was seen. */
  async until(done: () => boolean, timeoutMs = 10_000): Promise<void> {
    await pollUntil(
      async () => done(),
      (ok) => ok || this.closeCode !== undefined,
      timeoutMs,
      20,
    );
    expect({ done: done(), closeCode: this.closeCode, frames: this.frames.filter((f) => f.type !== 'heartbeat') }).toMatchObject({
      done: true,
    });
  }

  /** Waits until an outcome with this offset or later has arrived. */
  untilOffset(offset: bigint): Promise<void> {
    return this.until(() => this.offsets.some((o) => o >= offset));
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  async ack(offset: bigint): Promise<Extract<Frame, { type: 'acked' }>> {
    const before = this.ofType('acked').length;
    this.send({ type: 'ack', offset: String(offset) });
    await this.until(() => this.ofType('acked').length > before);
    return this.ofType('acked')[before]!;
  }

  async close(): Promise<void> {
    if (this.closeCode === undefined) this.ws.close();
    await this.closed;
  }
}

/** The HTTP status an upgrade request is refused with (0 if it was accepted). */
function upgradeStatus(service: TestService, pathAndQuery: string): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${service.httpPort}${pathAndQuery}`);
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? -1);
      res.resume();
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(0);
      ws.close();
    });
    ws.on('error', () => resolve(-1));
  });
}

async function adminOutcomes(service: TestService, afterSequence: bigint, queueId?: string): Promise<OutcomeJson[]> {
  const q = queueId ? `&queue_id=${queueId}` : '';
  const res = await httpRequest(service, 'GET', `/admin/v1/outcomes?after_sequence=${afterSequence}&limit=10000${q}`);
  expect(res.status).toBe(200);
  return res.body.outcomes as OutcomeJson[];
}

async function lastSequence(service: TestService): Promise<bigint> {
  const metrics = await fetch(`${service.baseUrl}/metrics`).then((r) => r.text());
  return BigInt(/^matchmaker_outcome_last_sequence (\d+)$/m.exec(metrics)![1]!);
}

/** Creates `count` tickets in the queue and clears it: `count` ticket.removed outcomes, in one commit. */
async function removedOutcomes(api: Transport, service: TestService, queueId: string, count: number): Promise<OutcomeJson[]> {
  const since = await lastSequence(service);
  const ids = Array.from({ length: count }, () => uuid());
  for (let i = 0; i < ids.length; i += 50) {
    const results = await Promise.all(ids.slice(i, i + 50).map((id) => api.createTicket({ id, queueId })));
    for (const r of results) expect(r.ok).toBe(true);
  }
  const cleared = await api.clearQueuePool(queueId);
  expect(cleared.ok && cleared.value.ticketsCleared).toBe(BigInt(count));
  const recorded = (await adminOutcomes(service, since, queueId)).filter((o) => o.kind === 'ticket.removed');
  expect(recorded).toHaveLength(count);
  return recorded;
}

const seq = (o: OutcomeJson) => BigInt(o.producerSequence);

describe('WebSocket outcome stream', () => {
  let api: Transport;
  const open: StreamClient[] = [];
  const connect = async (query: Record<string, string> = {}, options: WebSocket.ClientOptions = {}) => {
    const client = await StreamClient.open(env.service, query, options);
    open.push(client);
    return client;
  };
  beforeAll(() => {
    api = httpTransport(env.service);
  });
  afterAll(async () => {
    await Promise.all(open.map((c) => c.close()));
    api.close();
  });

  it('pushes outcomes recorded after connecting, in order, with offset = producer_sequence, as the outbox holds them', async () => {
    const earlier = await removedOutcomes(api, env.service, 'ws.a', 1);
    const client = await connect();
    expect(BigInt(client.ready!.after)).toBeGreaterThanOrEqual(seq(earlier[0]!));

    const removed = await removedOutcomes(api, env.service, 'ws.a', 3);
    const [p1, p2] = [uuid(), uuid()];
    for (const id of [p1, p2]) expect((await api.createTicket({ id, queueId: 'ws.match', engineInput: party(1) })).ok).toBe(true);
    await client.until(() => client.outcomes.some((f) => f.outcome.kind === 'match.created'));

    const recorded = await adminOutcomes(env.service, BigInt(client.ready!.after));
    expect(recorded.map((o) => o.kind)).toEqual(['ticket.removed', 'ticket.removed', 'ticket.removed', 'match.created']);
    expect(recorded.slice(0, 3)).toEqual(removed);
    // Exactly the outbox's outcomes, in canonical protobuf JSON, each under its producer_sequence.
    expect(client.outcomes.map((f) => f.outcome)).toEqual(recorded);
    for (const f of client.outcomes) expect(f.offset).toBe(f.outcome.producerSequence);
    const offsets = client.offsets;
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBeGreaterThan(offsets[i - 1]!);
    expect(offsets.every((o) => o > seq(earlier[0]!))).toBe(true);
  });

  it('replays from from_offset (inclusive) page by page without gaps, then continues live', async () => {
    const removed = await removedOutcomes(api, env.service, 'ws.b', 520);
    const first = seq(removed[0]!);
    // One commit: consecutive sequences.
    for (const [i, o] of removed.entries()) expect(seq(o)).toBe(first + BigInt(i));

    const replay = await connect({ from_offset: String(first), queue_id: 'ws.b' });
    expect(replay.ready!.after).toBe(String(first - 1n));
    await replay.until(() => replay.outcomes.length >= 520);
    expect(replay.outcomes.map((f) => f.outcome)).toEqual(removed);

    const tail = await connect({ from_offset: String(first + 519n), queue_id: 'ws.b' });
    await tail.until(() => tail.outcomes.length >= 1);
    expect(tail.offsets[0]).toBe(first + 519n);

    const [live] = await removedOutcomes(api, env.service, 'ws.b', 1);
    await replay.untilOffset(seq(live!));
    await tail.untilOffset(seq(live!));
    expect(replay.outcomes.slice(520).map((f) => f.outcome)).toEqual([live]);
    expect(tail.offsets).toEqual([first + 519n, seq(live!)]);
  });

  it('filters by exact queue id and by namespace, and streams only queues whose sink is websocket', async () => {
    const exact = await connect({ queue_id: 'ws.a' });
    const namespace = await connect({ queue_id: 'ws.>' });
    const other = await connect({ queue_id: 'other.>' });
    const everything = await connect();
    const hookOnly = await connect({ queue_id: 'ws.hook' });

    const [a] = await removedOutcomes(api, env.service, 'ws.a', 1);
    const [b] = await removedOutcomes(api, env.service, 'ws.b', 1);
    const [hook] = await removedOutcomes(api, env.service, 'ws.hook', 1); // recorded in the outbox ...
    const [c] = await removedOutcomes(api, env.service, 'other.c', 1);
    // Markers recorded last: a stream that has them has seen everything before them it was going to get.
    const [markA] = await removedOutcomes(api, env.service, 'ws.a', 1);
    const [markC] = await removedOutcomes(api, env.service, 'other.c', 1);
    for (const client of [exact, namespace, everything]) await client.untilOffset(seq(markA!));
    for (const client of [other, everything]) await client.untilOffset(seq(markC!));

    const ids = (client: StreamClient) => client.outcomes.map((f) => f.outcome.id);
    expect(ids(exact)).toEqual([a!.id, markA!.id]);
    expect(ids(namespace)).toEqual([a!.id, b!.id, markA!.id]);
    expect(ids(other)).toEqual([c!.id, markC!.id]);
    // ... but never streamed: not to the namespace or unfiltered streams, nor to a stream of that queue alone.
    expect(ids(everything)).toEqual([a!.id, b!.id, c!.id, markA!.id, markC!.id]);
    expect(hookOnly.outcomes).toEqual([]);
    expect(ids(everything)).not.toContain(hook!.id);
  });

  it('keeps independent durable positions for two consumers', async () => {
    const one = await connect({ consumer: 'consumer-one' });
    const two = await connect({ consumer: 'consumer-two' });
    expect(one.ready).toMatchObject({ consumer: 'consumer-one', offsets: 'service' });
    const [o1, o2, o3] = (await removedOutcomes(api, env.service, 'ws.a', 3)).map(seq) as [bigint, bigint, bigint];
    await one.untilOffset(o3);
    await two.untilOffset(o3);

    expect(await one.ack(o1)).toEqual({ type: 'acked', offset: String(o1), consumer: 'consumer-one' });
    expect(await two.ack(o3)).toEqual({ type: 'acked', offset: String(o3), consumer: 'consumer-two' });
    // An ack that goes backwards changes nothing: the answer is the position kept.
    expect(await two.ack(o2)).toMatchObject({ offset: String(o3) });
    await one.close();
    await two.close();

    const [o4] = (await removedOutcomes(api, env.service, 'ws.a', 1)).map(seq) as [bigint];
    const oneAgain = await connect({ consumer: 'consumer-one' });
    const twoAgain = await connect({ consumer: 'consumer-two' });
    expect(oneAgain.ready!.after).toBe(String(o1));
    expect(twoAgain.ready!.after).toBe(String(o3));
    await oneAgain.untilOffset(o4);
    await twoAgain.untilOffset(o4);
    expect(oneAgain.offsets).toEqual([o2, o3, o4]);
    expect(twoAgain.offsets).toEqual([o4]);
  });

  it('answers malformed client frames with an error frame and keeps the connection and the service working', async () => {
    const client = await connect({ queue_id: 'ws.a' });
    const bad: (string | Buffer)[] = [
      'not json',
      '[1,2]',
      'null',
      '{"type":"subscribe"}',
      '{"offset":"1"}',
      '{"type":"ack"}',
      '{"type":"ack","offset":"-1"}',
      '{"type":"ack","offset":"abc"}',
      '{"type":"ack","offset":1.5}',
      `{"type":"ack","offset":"${2n ** 64n}"}`,
      Buffer.from([0xde, 0xad, 0xbe, 0xef]),
    ];
    for (const frame of bad) client.ws.send(frame);
    await client.until(() => client.ofType('error').length >= bad.length);
    for (const e of client.ofType('error'))
      expect(e).toMatchObject({ type: 'error', code: 'INVALID_ARGUMENT', message: expect.any(String) });

    // An ack beyond the last recorded outcome is refused; a valid one on an unnamed stream is accepted (nothing durable).
    const last = await lastSequence(env.service);
    client.send({ type: 'ack', offset: String(last + 1000n) });
    await client.until(() => client.ofType('error').length === bad.length + 1);
    expect(await client.ack(last)).toEqual({ type: 'acked', offset: String(last) });

    const [next] = await removedOutcomes(api, env.service, 'ws.a', 1);
    await client.untilOffset(seq(next!));
    expect(client.closeCode).toBeUndefined();
    expect((await httpRequest(env.service, 'GET', '/livez')).status).toBe(200);
  });

  it('refuses upgrades on other paths (404) and with invalid parameters (400)', async () => {
    expect(await upgradeStatus(env.service, '/v1/outcomes/streams')).toBe(404);
    expect(await upgradeStatus(env.service, '/v1/queues/ws.a/tickets')).toBe(404);
    for (const query of [
      'from_offset=abc',
      'from_offset=-1',
      'queue_id=ws..a',
      'queue_id=ws.>.x',
      'consumer=%20x',
      'cursor=1',
      'queue_id=ws.a&queue_id=ws.b',
    ]) {
      expect({ query, status: await upgradeStatus(env.service, `/v1/outcomes/stream?${query}`) }).toEqual({ query, status: 400 });
    }
    expect(await upgradeStatus(env.service, '/v1/outcomes/stream?queue_id=ws.>&from_offset=0&consumer=ok-name')).toBe(0);
  });
});

describe('heartbeats', () => {
  // A service of its own: a short interval would also cut off the other tests' clients on a loaded machine.
  const HEARTBEAT_MS = 250;
  const own = useService({ queues: { 'ws.a': clearQueue() }, env: { WEBSOCKET_HEARTBEAT_MS: String(HEARTBEAT_MS) } });
  const clients: StreamClient[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
  });

  it('terminates a client that stops answering pings and keeps one that answers', async () => {
    const halfOpen = await StreamClient.open(own.service, {}, { autoPong: false });
    const healthy = await StreamClient.open(own.service);
    clients.push(halfOpen, healthy);
    const code = await Promise.race([halfOpen.closed, new Promise<string>((r) => setTimeout(() => r('still open'), 20 * HEARTBEAT_MS))]);
    expect(code).toBe(1006); // dropped without a close handshake
    expect(halfOpen.pings).toBeGreaterThanOrEqual(1);
    // The answering client outlives several more intervals and sees the application-level heartbeat too.
    const pings = healthy.pings;
    await healthy.until(() => healthy.pings >= pings + 3);
    expect(healthy.closeCode).toBeUndefined();
    expect(healthy.ofType('heartbeat').length).toBeGreaterThanOrEqual(3);
  });
});

describe('durable consumer positions across restarts', () => {
  const queueDir = tempDir('queues');
  const dataDir = tempDir('data');
  writeQueues(queueDir, { 'ws.a': clearQueue() });
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.kill();
    removeDirs(queueDir, dataDir);
  });

  it('resumes after the acknowledged offset after SIGTERM and after kill -9', async () => {
    service = await startService({ queueDir, dataDir });
    let api = httpTransport(service);
    const first = await StreamClient.open(service, { consumer: 'billing' });
    const [o1, o2, o3] = (await removedOutcomes(api, service, 'ws.a', 3)).map(seq) as [bigint, bigint, bigint];
    await first.untilOffset(o3);
    expect(first.offsets).toEqual([o1, o2, o3]);
    expect(await first.ack(o2)).toMatchObject({ offset: String(o2) });

    // Reconnecting without from_offset resumes after the acknowledged offset.
    await first.close();
    const again = await StreamClient.open(service, { consumer: 'billing' });
    await again.untilOffset(o3);
    expect(again.offsets).toEqual([o3]);

    // SIGTERM with a client connected: it is told 1001 (going away) and the service exits cleanly.
    expect(await service.stop()).toBe(0);
    expect(await again.closed).toBe(1001);
    api.close();

    service = await startService({ queueDir, dataDir });
    api = httpTransport(service);
    const afterStop = await StreamClient.open(service, { consumer: 'billing' });
    expect(afterStop.ready!.after).toBe(String(o2));
    await afterStop.untilOffset(o3);
    expect(afterStop.offsets).toEqual([o3]);
    expect(await afterStop.ack(o3)).toMatchObject({ offset: String(o3) });
    // The acked answer comes once the position is durable: kill -9 right after it.
    await service.kill();
    await afterStop.closed;
    api.close();

    service = await startService({ queueDir, dataDir });
    api = httpTransport(service);
    const afterKill = await StreamClient.open(service, { consumer: 'billing' });
    expect(afterKill.ready!.after).toBe(String(o3));
    const [o4] = (await removedOutcomes(api, service, 'ws.a', 1)).map(seq) as [bigint];
    await afterKill.untilOffset(o4);
    expect(afterKill.offsets).toEqual([o4]);
    // from_offset replays regardless of the position, and an older ack does not move it back.
    const replay = await StreamClient.open(service, { consumer: 'billing', from_offset: String(o1) });
    await replay.untilOffset(o4);
    expect(replay.offsets).toEqual([o1, o2, o3, o4]);
    expect(await replay.ack(o1)).toMatchObject({ offset: String(o3) });
    await Promise.all([afterKill.close(), replay.close()]);
    api.close();
  });
});
