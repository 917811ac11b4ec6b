// @matchmaker/client's outcome consumers against the real service and a real nats-server: each of the three
// sinks (WebSocket stream, NATS JetStream durable pull consumer, signed webhook) hands out a match.created made
// through the client, in the one delivery shape; the WebSocket consumer resumes after a lost connection without
// losing what was recorded meanwhile and reassembles a batched removal; the webhook receiver drops a delivery
// the service sent twice and refuses bad signatures and stale timestamps.
import { randomBytes } from 'node:crypto';
import { toBinary } from '@bufbuild/protobuf';
import {
  engineInput,
  MatchmakerClient,
  matchEngineOutput,
  metadataText,
  natsConsumer,
  OutcomeSchema,
  signWebhook,
  webhookReceiver,
  websocketConsumer,
  type Outcome,
  type OutcomeConsumer,
  type OutcomeDelivery,
  type WebhookOutcomeReceiver,
} from '@matchmaker/client';
import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuid } from '../support/fixtures.js';
import { natsClient, startNatsServer, type TestNatsServer } from '../support/nats.js';
import { duelQueue } from '../support/queues.js';
import { removeDirs, startService, type TestService } from '../support/service.js';
import { startTcpProxy } from '../support/tcp-proxy.js';
import { nextDelivery } from '../support/outcome-consumers.js';

const SECRET = 'whsec-client-7d1e';
const tag = randomBytes(4).toString('hex');
const STREAM = `SDK_${tag}`;
const PREFIX = `sdk${tag}.outcomes`;

let nats: TestNatsServer;
let hook: WebhookOutcomeReceiver;
let hookUrl: string;
let service: TestService;
let api: MatchmakerClient;
/** Set by the dedupe test: the next match.created request waits past the queue's timeout_ms before its 2xx. */
let slowNextMatch = false;
const hookAttempts = new Map<string, number>();
const rejections: string[] = [];
const consumers: OutcomeConsumer[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
  hook = webhookReceiver({
    secret: SECRET,
    onReject: (r) => rejections.push(`${r.status} ${r.reason}`),
    beforeAck: async (outcomes) => {
      for (const o of outcomes) hookAttempts.set(o.id, (hookAttempts.get(o.id) ?? 0) + 1);
      if (slowNextMatch && outcomes.some((o) => o.kind === 'match.created')) {
        slowNextMatch = false;
        await new Promise((resolve) => setTimeout(resolve, 900));
      }
    },
  });
  hookUrl = await hook.listen();
  service = await startService({
    queues: {
      'ws.duel': duelQueue(50),
      // Never ticks; ClearQueuePool turns its tickets into ticket.removed outcomes, two ids a chunk.
      'ws.lobby': duelQueue(3600000, { outcomes: { batch_chunk_size: 2 } }),
      'nats.duel': duelQueue(50, { outcomes: { sink: 'broker' } }),
      'hook.duel': duelQueue(50, {
        outcomes: {
          sink: 'webhook',
          webhook: { url: hookUrl, secret: SECRET, timeout_ms: 500, max_retries: 5, retry_base_delay_ms: 20, retry_max_delay_ms: 100 },
        },
      }),
    },
    env: { BROKER_URL: nats.url, BROKER_STREAM_OUTCOMES: STREAM, BROKER_SUBJECT_PREFIX_OUTCOMES: PREFIX },
  });
  api = new MatchmakerClient({ address: `127.0.0.1:${service.grpcPort}` });
});

afterAll(async () => {
  await Promise.all(consumers.map((c) => c.close()));
  api?.close();
  await hook?.close();
  await service?.stop();
  if (service) removeDirs(service.dataDir, service.queueDir);
  await nats?.dispose();
});

function track<T extends OutcomeConsumer>(consumer: T): T {
  consumers.push(consumer);
  return consumer;
}

/** Two players queued through the client in a 1v1 queue: one match.created. */
async function queueDuel(queueId: string): Promise<{ ticketIds: string[]; playerIds: string[] }> {
  const playerIds = [`p-${uuid()}`, `p-${uuid()}`];
  const ticketIds: string[] = [];
  for (const playerId of playerIds) {
    const input = engineInput().player({ playerId, mmr: 0.5, latencies: { 'eu-west': 25 } });
    ticketIds.push((await api.createTicket({ queueId, engineInput: input, metadata: `session:${playerId}` })).ticketId);
  }
  return { ticketIds, playerIds };
}

/** The match.created's players by team (decoded engine output), its ticket ids and their metadata. */
function matchOf(outcome: Outcome) {
  expect(outcome.payload.case).toBe('matchCreated');
  const match = outcome.payload.case === 'matchCreated' ? outcome.payload.value.match! : undefined!;
  return {
    players: matchEngineOutput(match)!
      .teams.flatMap((t) => t.playerIds)
      .sort(),
    ticketIds: match.tickets.map((t) => t.id).sort(),
    metadata: match.tickets.map((t) => metadataText(t)).sort(),
  };
}

function expectMatchOf(outcome: Outcome, queued: { ticketIds: string[]; playerIds: string[] }): void {
  expect(matchOf(outcome)).toEqual({
    players: [...queued.playerIds].sort(),
    ticketIds: [...queued.ticketIds].sort(),
    metadata: queued.playerIds.map((p) => `session:${p}`).sort(),
  });
}

/** `count` tickets created and cleared from ws.lobby: their ids, in the removal outcome(s). */
async function removed(count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push((await api.createTicket({ queueId: 'ws.lobby' })).ticketId);
  expect((await api.clearQueuePool('ws.lobby')).ticketsCleared).toBe(BigInt(count));
  return ids;
}

const removedIds = (d: OutcomeDelivery) => (d.outcome.payload.case === 'ticketsRemoved' ? d.outcome.payload.value.ticketIds : []);

describe('every sink hands out a match.created made through the client', () => {
  it('WebSocket stream (named consumer)', async () => {
    const consumer = track(websocketConsumer({ url: service.baseUrl, queueId: 'ws.duel', consumer: 'sdk-ws' }));
    await consumer.ready();
    const queued = await queueDuel('ws.duel');
    const delivery = await nextDelivery(consumer);
    expect(delivery.outcome.kind).toBe('match.created');
    expectMatchOf(delivery.outcome, queued);
    await delivery.ack(); // resolves once the service confirmed the position
  });

  it('NATS JetStream durable pull consumer, acknowledged and confirmed', async () => {
    const consumer = track(
      natsConsumer({ servers: nats.url, stream: STREAM, subjectPrefix: PREFIX, durable: 'sdk-nats', queueId: 'nats.duel' }),
    );
    const queued = await queueDuel('nats.duel');
    const delivery = await nextDelivery(consumer, 20_000);
    expect(delivery.outcome.kind).toBe('match.created');
    expectMatchOf(delivery.outcome, queued);
    await delivery.ack();
    const nc = await natsClient(nats);
    try {
      const info = await (await jetstreamManager(nc)).consumers.info(STREAM, 'sdk-nats');
      expect(info.config.filter_subject).toBe(`${PREFIX}.nats.duel.>`);
      expect([info.num_ack_pending, info.ack_floor.stream_seq]).toEqual([0, 1]);
    } finally {
      await nc.close();
    }
  });

  it('signed webhook, acknowledged at once and handed out to be processed', async () => {
    const queued = await queueDuel('hook.duel');
    const delivery = await nextDelivery(hook);
    expect(delivery.outcome.kind).toBe('match.created');
    expectMatchOf(delivery.outcome, queued);
    await delivery.ack();
  });
});

describe('WebSocket consumer', () => {
  it('resumes after a lost connection from its last offset: what was recorded meanwhile arrives, once, in order', async () => {
    const proxy = await startTcpProxy(service.httpPort);
    // No consumer name: without the client's own from_offset the service would start at the newest outcome.
    const consumer = track(
      websocketConsumer({ url: `ws://${proxy.address}`, queueId: 'ws.lobby', reconnect: { initialDelayMs: 50, maxDelayMs: 200 } }),
    );
    try {
      await consumer.ready();
      const before = await removed(1);
      const first = await nextDelivery(consumer);
      expect(removedIds(first)).toEqual(before);
      await first.ack();

      proxy.refuse(true);
      proxy.cut();
      const meanwhile = [await removed(1), await removed(1), await removed(1)];
      proxy.refuse(false);
      const received: string[][] = [];
      for (let i = 0; i < meanwhile.length; i++) {
        const d = await nextDelivery(consumer);
        received.push(removedIds(d));
        await d.ack();
      }
      expect(received).toEqual(meanwhile);
      expect(proxy.accepted).toBeGreaterThanOrEqual(2);
      expect([consumer.buffered, consumer.duplicates]).toEqual([0, 0]);
    } finally {
      await consumer.close();
      await proxy.close();
    }
  });

  it('hands out a removal split into chunks as one delivery with every id', async () => {
    const consumer = track(websocketConsumer({ url: service.baseUrl, queueId: 'ws.lobby' }));
    await consumer.ready();
    const ids = await removed(5);
    const delivery = await nextDelivery(consumer);
    expect(delivery.complete).toBe(true);
    expect(delivery.chunks.map((c) => removedIds({ outcome: c } as OutcomeDelivery).length)).toEqual([2, 2, 1]);
    expect(new Set(delivery.chunks.map((c) => c.payload.case === 'ticketsRemoved' && c.payload.value.batch!.operationId)).size).toBe(1);
    expect([...removedIds(delivery)].sort()).toEqual([...ids].sort());
    await delivery.ack();
  });
});

describe('webhook receiver', () => {
  it('hands out once an outcome the service sent again because the first answer came too late', async () => {
    const duplicatesBefore = hook.duplicates;
    slowNextMatch = true;
    const queued = await queueDuel('hook.duel');
    const delivery = await nextDelivery(hook);
    expectMatchOf(delivery.outcome, queued);
    await delivery.ack();
    // The late first attempt finishes after the retry was handed out: it is dropped as a copy.
    await expect.poll(() => hookAttempts.get(delivery.outcome.id), { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    await expect.poll(() => hook.duplicates - duplicatesBefore, { timeout: 5_000 }).toBeGreaterThanOrEqual(1);
    expect(hook.buffered).toBe(0);
  });

  it('refuses a bad signature and a stale timestamp with 401, and accepts the same body signed fresh', async () => {
    const outcome = toBinary(OutcomeSchema, {
      $typeName: 'matchmaker.outcomes.v1.Outcome',
      id: uuid(),
      kind: 'ticket.expired',
      queueId: 'hook.duel',
      producerId: 'hand-made',
      producerSequence: 1n,
      payload: { case: undefined },
    });
    const post = (timestamp: number, signature: string) =>
      fetch(hookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-protobuf', 'x-svc-timestamp': String(timestamp), 'x-svc-signature': signature },
        body: outcome,
      }).then((r) => r.status);
    const now = Math.floor(Date.now() / 1000);
    rejections.length = 0;
    expect(await post(now, signWebhook('another-secret', now, outcome))).toBe(401);
    expect(await post(now - 301, signWebhook(SECRET, now - 301, outcome))).toBe(401);
    expect(rejections).toEqual(['401 signature_mismatch', '401 stale_timestamp']);
    expect(hook.buffered).toBe(0);

    expect(await post(now, signWebhook(SECRET, now, outcome))).toBe(204);
    const delivery = await nextDelivery(hook);
    expect(delivery.outcome).toMatchObject({ kind: 'ticket.expired', producerId: 'hand-made' });
    await delivery.ack();
  });
});
