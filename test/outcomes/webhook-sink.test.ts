// The webhook outcome sink against a real receiver: headers and signatures, protobuf and JSON bodies, the
// batch layout, retries (500s, a timeout, refused connections), parking and release, order per queue, a
// kill -9 between recording and delivery, and a hot-reloaded switch to the webhook sink.
import { createServer } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutcomeSchema, type Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { resolveWebhookSecret, WebhookSink } from '../../src/outcomes/sinks/webhook-sink.js';
// The service signs; the client package verifies (what a receiver runs), so the two are checked against each other.
import { checkWebhookSignature, verifyWebhookSignature } from '@matchmaker/client';
import { signWebhook, webhookSigningInput } from '../../src/outcomes/webhook-signature.js';
import { party, uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { removeDirs, startService, type TestService } from '../support/service.js';
import { grpcTransport, httpRequest, type Transport } from '../support/transports.js';
import { startWebhookReceiver, type ReceivedRequest, type WebhookReceiver } from '../support/webhook-receiver.js';
import type { OutcomeJson } from '../support/outcomes.js';

const SECRET = 'whsec-literal-4f1c';
const ENV_SECRET = 'whsec-from-env-9a2b';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface WebhookQueue {
  url: string;
  secret?: string;
  encoding?: 'protobuf' | 'json';
  maxRetries?: number;
  batch?: number;
  tickMs?: number;
}

function webhookQueue(q: WebhookQueue): string {
  return duelQueue(q.tickMs ?? 3600000, {
    outcomes: {
      sink: 'webhook',
      batch_chunk_size: 1,
      webhook: {
        url: q.url,
        secret: q.secret ?? SECRET,
        encoding: q.encoding ?? 'protobuf',
        timeout_ms: 500,
        max_retries: q.maxRetries ?? 5,
        retry_base_delay_ms: 20,
        retry_max_delay_ms: 100,
        max_batch_size: q.batch ?? 1,
      },
    },
  });
}

const WEBSOCKET_QUEUE = duelQueue(3600000, { outcomes: { batch_chunk_size: 1 } });

interface DeliveryJson {
  queueId: string;
  sink: string;
  deliveredThrough: string;
  parked?: { sequence: string; attempts: number; lastError: string };
}

async function adminOutcomes(service: TestService, queueId: string): Promise<OutcomeJson[]> {
  const res = await httpRequest(service, 'GET', `/admin/v1/outcomes?queue_id=${queueId}&limit=10000`);
  return res.body.outcomes as OutcomeJson[];
}

async function deliveryOf(service: TestService, queueId: string): Promise<DeliveryJson | undefined> {
  const res = await httpRequest(service, 'GET', '/admin/v1/deliveries');
  return (res.body.deliveries as DeliveryJson[]).find((d) => d.queueId === queueId);
}

async function parkedMetric(service: TestService, queueId: string): Promise<string | undefined> {
  const text = await (await fetch(`${service.baseUrl}/metrics`)).text();
  return text
    .split('\n')
    .find((l) => l.startsWith(`matchmaker_outcome_deliveries_parked{queue_id="${queueId}"} `))
    ?.split(' ')[1];
}

/** Creates `count` tickets (and `backfills` backfill requests) and clears the pool: one removal outcome each. */
async function removeTickets(api: Transport, queueId: string, count: number, backfills = 0): Promise<void> {
  for (let i = 0; i < count; i++) expect((await api.createTicket({ id: uuid(), queueId })).ok).toBe(true);
  for (let i = 0; i < backfills; i++) expect((await api.createBackfillRequest({ queueId, matchId: uuid() })).ok).toBe(true);
  const cleared = await api.clearQueuePool(queueId);
  expect(cleared.ok).toBe(true);
}

const json = (o: Outcome) => toJson(OutcomeSchema, o) as Record<string, JsonValue>;
const ids = (outcomes: readonly { id: string }[]) => outcomes.map((o) => o.id);

/**
 * The dispatcher never sends an outcome before every earlier one of the queue was acknowledged: each request
 * starts at the first outcome not yet acknowledged, and carries consecutive outcomes.
 */
function expectInOrder(requests: readonly ReceivedRequest[], recorded: readonly OutcomeJson[]): void {
  let next = 0;
  for (const r of requests) {
    expect(ids(r.outcomes), `request ${r.index}`).toEqual(ids(recorded.slice(next, next + r.outcomes.length)));
    if (r.acknowledged) next += r.outcomes.length;
  }
}

const eventually = async (attempt: () => Promise<boolean>, timeoutMs?: number) =>
  expect(await pollUntil(attempt, Boolean, timeoutMs)).toBe(true);

describe('webhook signature: the service signs, the client verifies', () => {
  const body = Buffer.from('{"id":"4f2d","kind":"ticket.removed"}');

  it('matches the worked example of docs/outcomes-webhook.md', () => {
    const timestamp = '1767225600';
    expect(webhookSigningInput(timestamp, body).toString('utf8')).toBe('1767225600.{"id":"4f2d","kind":"ticket.removed"}');
    expect(signWebhook({ secret: 'whsec_test', timestamp, body })).toBe(
      'sha256=68ba2335eb4f6bc5d81505aef6881a0d6da78ea029b46b1bbc53416f503da616',
    );
  });

  it('accepts a fresh signature and rejects stale or future timestamps, other bodies, other secrets and malformed headers', () => {
    const now = 1_800_000_000;
    const sign = (timestamp: number, secret = 'k') => signWebhook({ secret, timestamp, body });
    const check = (timestamp: number | string, signature: string, extra: Partial<Parameters<typeof checkWebhookSignature>[0]> = {}) =>
      checkWebhookSignature({ secret: 'k', timestamp: String(timestamp), signature, body, nowSecs: now, toleranceSecs: 300, ...extra });

    expect(
      verifyWebhookSignature({ secret: 'k', timestamp: String(now), signature: sign(now), body, nowSecs: now, toleranceSecs: 300 }),
    ).toBe(true);
    expect(check(now - 300, sign(now - 300))).toEqual({ ok: true });
    expect(check(now - 301, sign(now - 301))).toEqual({ ok: false, reason: 'stale_timestamp' });
    expect(check(now + 301, sign(now + 301))).toEqual({ ok: false, reason: 'stale_timestamp' });
    // The default window is 300 s too.
    expect(checkWebhookSignature({ secret: 'k', timestamp: String(now - 301), signature: sign(now - 301), body, nowSecs: now })).toEqual({
      ok: false,
      reason: 'stale_timestamp',
    });
    // A replayed request re-stamped with a fresh timestamp no longer matches its signature.
    expect(check(now, sign(now - 1000))).toEqual({ ok: false, reason: 'signature_mismatch' });
    expect(check(now, sign(now), { body: Buffer.concat([body, Buffer.from(' ')]) })).toEqual({ ok: false, reason: 'signature_mismatch' });
    expect(check(now, sign(now, 'other'))).toEqual({ ok: false, reason: 'signature_mismatch' });
    expect(check(now, sign(now).toUpperCase().replace('SHA256=', 'sha256='))).toEqual({ ok: true });
    expect(check(now, sign(now).slice(0, -2))).toEqual({ ok: false, reason: 'malformed_signature' });
    expect(check(now, sign(now).replace('sha256=', 'sha1='))).toEqual({ ok: false, reason: 'malformed_signature' });
    expect(check(`${now}.5`, sign(now))).toEqual({ ok: false, reason: 'malformed_timestamp' });
    expect(checkWebhookSignature({ secret: 'k', timestamp: undefined, signature: sign(now), body, nowSecs: now })).toEqual({
      ok: false,
      reason: 'missing_header',
    });
    // Rotation: any of several secrets.
    expect(check(now, sign(now, 'new'), { secret: ['old', 'new'] })).toEqual({ ok: true });
    expect(check(now, sign(now, 'new'), { secret: ['old'] })).toEqual({ ok: false, reason: 'signature_mismatch' });
  });

  it('resolves ${NAME} references in the secret from the environment and reports unset ones', () => {
    expect(resolveWebhookSecret('pre-${A}-${B}', { A: 'x', B: 'y' })).toEqual({ secret: 'pre-x-y' });
    expect(resolveWebhookSecret('plain', {})).toEqual({ secret: 'plain' });
    expect(resolveWebhookSecret('${A}-${MISSING}', { A: 'x' })).toEqual({ error: expect.stringContaining('MISSING') });
    expect(resolveWebhookSecret('${EMPTY}', { EMPTY: '' })).toEqual({ error: expect.stringContaining('EMPTY') });
  });
});

describe('webhook sink, driven directly', () => {
  /** A sink of queue direct.q that tries each delivery once. */
  const directSink = (url: string) =>
    new WebhookSink(
      'direct.q',
      {
        url,
        secret: SECRET,
        encoding: 'protobuf',
        timeout_ms: 500,
        max_retries: 0,
        retry_base_delay_ms: 20,
        retry_max_delay_ms: 100,
        max_batch_size: 1,
      },
      pino({ level: 'silent' }),
    );

  it('re-sends at once on a fresh connection when a kept-alive socket turns out closed, without failing the delivery', async () => {
    const receiver = await startWebhookReceiver({ secret: SECRET });
    // The second request arrives on the kept-alive socket of the first, which the receiver resets unanswered.
    receiver.setDefault((r) => (r.index === 1 ? { destroy: true } : { status: 200 }));
    const sink = directSink(receiver.url);
    try {
      const outcome = (n: number) =>
        create(OutcomeSchema, { id: uuid(), kind: 'ticket.removed', queueId: 'direct.q', producerSequence: BigInt(n) });
      const [a, b] = [outcome(1), outcome(2)];
      await sink.deliver([a]);
      await sink.deliver([b]);
      const requests = receiver.requests;
      expect(requests.map((r) => r.headers['x-svc-outcome-id'])).toEqual([a.id, b.id, b.id]);
      expect(requests[1]!.connection).toBe(requests[0]!.connection);
      expect(requests[2]!.connection).not.toBe(requests[1]!.connection);
      expect(requests[2]!.headers['x-svc-delivery']).not.toBe(requests[1]!.headers['x-svc-delivery']);
      // A reset on a fresh connection is a failed attempt.
      receiver.setDefault({ destroy: true });
      await sink.close();
      await expect(sink.deliver([b])).rejects.toThrow(/connection failed: ECONNRESET/);
    } finally {
      await sink.close();
      await receiver.close();
    }
  });

  it('does not throw at construction on a URL it cannot use: each delivery fails instead, so it parks visibly', async () => {
    const sink = directSink('ftp://127.0.0.1/hook');
    await expect(sink.deliver([create(OutcomeSchema, { id: uuid(), kind: 'ticket.removed' })])).rejects.toThrow(/must be http: or https:/);
    await sink.close();
  });
});

describe('webhook sink', () => {
  const names = ['proto', 'json', 'batch', 'batchjson', 'flaky', 'order', 'park', 'nosecret', 'reload'] as const;
  const rx = {} as Record<(typeof names)[number], WebhookReceiver>;
  let refusedUrl: string;
  let service: TestService;
  let api: Transport;

  beforeAll(async () => {
    for (const name of names) rx[name] = await startWebhookReceiver({ secret: name === 'json' ? ENV_SECRET : SECRET });
    // A port nobody listens on (bound, then released).
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    refusedUrl = `http://127.0.0.1:${(probe.address() as { port: number }).port}/hook`;
    await new Promise((resolve) => probe.close(resolve));

    service = await startService({
      env: { WH_SECRET: ENV_SECRET },
      queues: {
        'wh.proto': webhookQueue({ url: rx.proto.url }),
        'wh.json': webhookQueue({ url: rx.json.url, secret: '${WH_SECRET}', encoding: 'json', tickMs: 50 }),
        'wh.batch': webhookQueue({ url: rx.batch.url, batch: 3 }),
        'wh.batchjson': webhookQueue({ url: rx.batchjson.url, batch: 4, encoding: 'json' }),
        'wh.flaky': webhookQueue({ url: rx.flaky.url, maxRetries: 5 }),
        'wh.order': webhookQueue({ url: rx.order.url, maxRetries: 1000 }),
        'wh.park': webhookQueue({ url: rx.park.url, maxRetries: 2 }),
        'wh.nosecret': webhookQueue({ url: rx.nosecret.url, secret: '${WH_MISSING_SECRET}', maxRetries: 0 }),
        'wh.refused': webhookQueue({ url: refusedUrl, maxRetries: 1 }),
        'wh.reload': WEBSOCKET_QUEUE,
      },
    });
    api = grpcTransport(service);
  });

  afterAll(async () => {
    api?.close();
    if (service) {
      await service.stop();
      removeDirs(service.dataDir, service.queueDir);
    }
    await Promise.all(Object.values(rx).map((r) => r.close()));
  });

  it('POSTs one signed protobuf Outcome per request with every header of the contract, over one kept-alive connection', async () => {
    const before = Math.floor(Date.now() / 1000);
    await removeTickets(api, 'wh.proto', 2);
    const requests = await rx.proto.waitFor((r) => r.filter((x) => x.acknowledged).length >= 2);
    const after = Math.ceil(Date.now() / 1000);
    const recorded = await adminOutcomes(service, 'wh.proto');
    expect(recorded).toHaveLength(2);
    expect(requests).toHaveLength(2);

    requests.forEach((r, i) => {
      const h = r.headers;
      expect(r.method).toBe('POST');
      expect(r.path).toBe('/hook');
      expect(h['content-type']).toBe('application/x-protobuf');
      expect(h['content-length']).toBe(String(r.body.byteLength));
      expect(h['x-svc-delivery']).toMatch(UUID);
      expect(h['x-svc-outcome-id']).toBe(recorded[i]!.id);
      expect(h['x-svc-queue-id']).toBe('wh.proto');
      expect(h['x-svc-kind']).toBe('ticket.removed');
      expect(h['x-svc-message-type']).toBe('matchmaker.outcomes.v1.Outcome');
      expect(h['x-svc-outcome-count']).toBe('1');
      expect(h['x-svc-timestamp']).toMatch(/^\d+$/);
      const timestamp = Number(h['x-svc-timestamp']);
      expect(timestamp).toBeGreaterThanOrEqual(before);
      expect(timestamp).toBeLessThanOrEqual(after);
      expect(h['x-svc-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
      // Verified by the receiver with the helper, and recomputed here from the documented signing input.
      expect(r.verification).toEqual({ ok: true });
      expect(h['x-svc-signature']).toBe(signWebhook({ secret: SECRET, timestamp: String(h['x-svc-timestamp']), body: r.body }));
      // The body is the recorded outcome, byte for byte in meaning.
      expect(r.outcomes).toHaveLength(1);
      expect(json(r.outcomes[0]!)).toEqual(recorded[i]);
    });
    expect(new Set(requests.map((r) => r.headers['x-svc-delivery'])).size).toBe(2);
    expect(requests[1]!.connection).toBe(requests[0]!.connection);
    await eventually(async () => (await deliveryOf(service, 'wh.proto'))?.deliveredThrough === recorded[1]!.producerSequence);
  });

  it('sends canonical protobuf JSON with encoding json, signed with a secret taken from the environment', async () => {
    const [a, b] = [uuid(), uuid()];
    expect((await api.createTicket({ id: a, queueId: 'wh.json', engineInput: party(1) })).ok).toBe(true);
    expect((await api.createTicket({ id: b, queueId: 'wh.json', engineInput: party(1) })).ok).toBe(true);
    const requests = await rx.json.waitFor((r) => r.some((x) => x.acknowledged));
    const recorded = await adminOutcomes(service, 'wh.json');
    expect(recorded.map((o) => o.kind)).toEqual(['match.created']);
    const r = requests[0]!;
    expect(requests).toHaveLength(1);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['x-svc-kind']).toBe('match.created');
    expect(r.headers['x-svc-outcome-id']).toBe(recorded[0]!.id);
    expect(r.headers['x-svc-queue-id']).toBe('wh.json');
    expect(r.headers['x-svc-message-type']).toBe('matchmaker.outcomes.v1.Outcome');
    // The receiver holds the value of WH_SECRET: the reference was resolved, not used literally.
    expect(r.verification).toEqual({ ok: true });
    expect(
      verifyWebhookSignature({
        secret: '${WH_SECRET}',
        timestamp: String(r.headers['x-svc-timestamp']),
        signature: String(r.headers['x-svc-signature']),
        body: r.body,
      }),
    ).toBe(false);
    // The body is exactly the canonical JSON of the outcome (what toJson gives, as the admin route shows it).
    expect(JSON.parse(r.body.toString('utf8'))).toEqual(recorded[0]);
    const match = (recorded[0] as unknown as { matchCreated: { match: { tickets: { id: string }[] } } }).matchCreated.match;
    expect(match.tickets.map((t) => t.id).sort()).toEqual([a, b].sort());
  });

  it('batches consecutive outcomes into one protobuf OutcomeList with the ids and kinds listed in order', async () => {
    // One ClearQueuePool commits its five outcomes at once: a batch of three, then of two.
    await removeTickets(api, 'wh.batch', 4, 1);
    const requests = await rx.batch.waitFor((r) => r.filter((x) => x.acknowledged).flatMap((x) => x.outcomes).length >= 5);
    const recorded = await adminOutcomes(service, 'wh.batch');
    expect(recorded).toHaveLength(5);
    expect(requests.map((r) => r.outcomes.length)).toEqual([3, 2]);
    const chunks = [recorded.slice(0, 3), recorded.slice(3)];
    requests.forEach((r, i) => {
      const expected = chunks[i]!;
      expect(r.verification).toEqual({ ok: true });
      expect(r.headers['content-type']).toBe('application/x-protobuf');
      expect(r.headers['x-svc-message-type']).toBe('matchmaker.outcomes.v1.OutcomeList');
      expect(r.headers['x-svc-outcome-count']).toBe(String(expected.length));
      expect(r.headers['x-svc-outcome-id']).toBe(ids(expected).join(','));
      expect(r.headers['x-svc-kind']).toBe(expected.map((o) => o.kind).join(','));
      expect(r.headers['x-svc-queue-id']).toBe('wh.batch');
      expect(r.outcomes.map(json)).toEqual(expected);
    });
    expect(recorded.map((o) => o.kind)).toEqual([
      'ticket.removed',
      'ticket.removed',
      'ticket.removed',
      'ticket.removed',
      'backfill.removed',
    ]);
  });

  it('batches as {"outcomes":[...]} with encoding json, a list even when one outcome is pending', async () => {
    await removeTickets(api, 'wh.batchjson', 2);
    await rx.batchjson.waitFor((r) => r.filter((x) => x.acknowledged).length >= 1);
    await removeTickets(api, 'wh.batchjson', 1);
    const requests = await rx.batchjson.waitFor((r) => r.filter((x) => x.acknowledged).length >= 2);
    const recorded = await adminOutcomes(service, 'wh.batchjson');
    expect(recorded).toHaveLength(3);
    expect(requests).toHaveLength(2);
    expect(JSON.parse(requests[0]!.body.toString('utf8'))).toEqual({ outcomes: recorded.slice(0, 2) });
    expect(JSON.parse(requests[1]!.body.toString('utf8'))).toEqual({ outcomes: recorded.slice(2) });
    for (const r of requests) {
      expect(r.verification).toEqual({ ok: true });
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['x-svc-message-type']).toBe('matchmaker.outcomes.v1.OutcomeList');
    }
    expect(requests[1]!.headers['x-svc-outcome-count']).toBe('1');
    expect(requests[1]!.headers['x-svc-outcome-id']).toBe(recorded[2]!.id);
  });

  it('retries after 500s and a timeout, then acknowledges every outcome exactly once and in order', async () => {
    rx.flaky.script({ status: 500 }, { status: 503 }, { hang: true });
    await removeTickets(api, 'wh.flaky', 3);
    const requests = await rx.flaky.waitFor((r) => r.filter((x) => x.acknowledged).length >= 3);
    const recorded = await adminOutcomes(service, 'wh.flaky');
    expect(recorded).toHaveLength(3);
    // Three failed attempts of the first outcome, then each outcome once.
    expect(requests.map((r) => r.headers['x-svc-outcome-id'])).toEqual([
      recorded[0]!.id,
      recorded[0]!.id,
      recorded[0]!.id,
      ...ids(recorded),
    ]);
    expect(requests.map((r) => r.acknowledged)).toEqual([false, false, false, true, true, true]);
    expect(ids(rx.flaky.acknowledged())).toEqual(ids(recorded));
    expectInOrder(requests, recorded);
    for (const r of requests) expect(r.verification).toEqual({ ok: true });
    expect(new Set(requests.map((r) => r.headers['x-svc-delivery'])).size).toBe(requests.length);
    // The connection survives a non-2xx answer; a timed-out attempt is aborted and the next one reconnects.
    expect(requests[1]!.connection).toBe(requests[0]!.connection);
    expect(requests[3]!.connection).not.toBe(requests[2]!.connection);
    const warnings = service.logs
      .filter((l) => l.queue === 'wh.flaky' && l.msg === 'outcome delivery failed; retrying')
      .map((l) => String(l.err));
    expect(warnings).toEqual([
      expect.stringContaining('answered 500'),
      expect.stringContaining('answered 503'),
      expect.stringContaining('did not answer within 500 ms'),
    ]);
    await eventually(async () => (await deliveryOf(service, 'wh.flaky'))?.deliveredThrough === recorded[2]!.producerSequence);
  });

  it('keeps occurrence order across many outcomes recorded while deliveries fail intermittently', async () => {
    rx.order.setDefault((r) => (r.index % 3 === 1 ? { status: 500 } : { status: 204 }));
    for (let round = 0; round < 8; round++) await removeTickets(api, 'wh.order', 3);
    const requests = await rx.order.waitFor((r) => r.filter((x) => x.acknowledged).length >= 24, 20_000);
    const recorded = await adminOutcomes(service, 'wh.order');
    expect(recorded).toHaveLength(24);
    expect(ids(rx.order.acknowledged())).toEqual(ids(recorded));
    expectInOrder(requests, recorded);
    expect(requests.filter((r) => !r.acknowledged).length).toBeGreaterThan(0);
    for (const r of requests) expect(r.verification).toEqual({ ok: true });
  });

  it('parks after max_retries, holds back later outcomes, and delivers everything in order once released', async () => {
    rx.park.setDefault({ status: 500 });
    await removeTickets(api, 'wh.park', 1);
    const parked = await pollUntil(
      () => deliveryOf(service, 'wh.park'),
      (d) => d?.parked !== undefined,
    );
    const [first] = await adminOutcomes(service, 'wh.park');
    expect(parked?.sink).toBe('webhook');
    expect(parked?.parked).toMatchObject({
      sequence: first!.producerSequence,
      attempts: 3,
      lastError: expect.stringContaining('answered 500'),
    });
    expect(BigInt(parked!.deliveredThrough)).toBeLessThan(BigInt(first!.producerSequence));
    expect(await parkedMetric(service, 'wh.park')).toBe('1');
    // max_retries 2: the first attempt and two retries.
    expect(rx.park.requests.map((r) => r.headers['x-svc-outcome-id'])).toEqual([first!.id, first!.id, first!.id]);

    await removeTickets(api, 'wh.park', 1);
    const recorded = await adminOutcomes(service, 'wh.park');
    expect(recorded).toHaveLength(2);
    // Parked: neither the first outcome is retried nor the second one sent.
    const leaked = await pollUntil(
      async () => rx.park.requests.length,
      (n) => n > 3,
      500,
    );
    expect(leaked).toBe(3);

    rx.park.setDefault({ status: 200 });
    const released = await httpRequest(service, 'POST', '/admin/v1/queues/wh.park/deliveries:retry');
    expect(released).toMatchObject({ status: 200, body: { released: true } });
    await rx.park.waitFor((r) => r.filter((x) => x.acknowledged).length >= 2);
    expect(ids(rx.park.acknowledged())).toEqual(ids(recorded));
    expectInOrder(rx.park.requests, recorded);
    await eventually(async () => {
      const d = await deliveryOf(service, 'wh.park');
      return d?.parked === undefined && d?.deliveredThrough === recorded[1]!.producerSequence;
    });
    expect(await parkedMetric(service, 'wh.park')).toBe('0');
    const again = await httpRequest(service, 'POST', '/admin/v1/queues/wh.park/deliveries:retry');
    expect(again).toMatchObject({ status: 409, body: { code: 'FAILED_PRECONDITION' } });
  });

  it('parks instead of sending unsigned requests when the secret names an unset environment variable', async () => {
    const logged = await service.waitForLog(
      (l) => l.queue === 'wh.nosecret' && typeof l.msg === 'string' && l.msg.includes('WH_MISSING_SECRET'),
    );
    expect(logged.level).toBe(50);
    await removeTickets(api, 'wh.nosecret', 1);
    const d = await pollUntil(
      () => deliveryOf(service, 'wh.nosecret'),
      (x) => x?.parked !== undefined,
    );
    expect(d?.parked).toMatchObject({ attempts: 1, lastError: expect.stringContaining('WH_MISSING_SECRET') });
    expect(await parkedMetric(service, 'wh.nosecret')).toBe('1');
    expect(rx.nosecret.requests).toHaveLength(0);
  });

  it('treats a refused connection as a failed attempt', async () => {
    await removeTickets(api, 'wh.refused', 1);
    const d = await pollUntil(
      () => deliveryOf(service, 'wh.refused'),
      (x) => x?.parked !== undefined,
    );
    expect(d?.parked).toMatchObject({ attempts: 2, lastError: expect.stringContaining('ECONNREFUSED') });
  });

  it('starts delivering when a hot reload switches the queue from websocket to webhook', async () => {
    expect((await deliveryOf(service, 'wh.reload'))?.sink).toBe('websocket');
    await removeTickets(api, 'wh.reload', 1);
    expect(await adminOutcomes(service, 'wh.reload')).toHaveLength(1);
    expect(rx.reload.requests).toHaveLength(0);

    writeFileSync(join(service.queueDir, 'wh.reload.yaml'), webhookQueue({ url: rx.reload.url }));
    await eventually(async () => (await deliveryOf(service, 'wh.reload'))?.sink === 'webhook');
    await removeTickets(api, 'wh.reload', 1);
    const recorded = await adminOutcomes(service, 'wh.reload');
    expect(recorded).toHaveLength(2);
    // The outcome recorded after the switch arrives; so does the one recorded before it, which no push sink had
    // delivered (the queue's delivery cursor starts at the beginning of the outbox).
    const requests = await rx.reload.waitFor((r) => r.some((x) => x.acknowledged && x.outcomes.some((o) => o.id === recorded[1]!.id)));
    expect(ids(rx.reload.acknowledged())).toEqual(ids(recorded));
    expectInOrder(requests, recorded);
    for (const r of requests) expect(r.verification).toEqual({ ok: true });
  });
});

describe('webhook sink across kill -9', () => {
  let receiver: WebhookReceiver;
  const services: TestService[] = [];
  afterAll(async () => {
    for (const s of services) await s.kill();
    if (services[0]) removeDirs(services[0].dataDir, services[0].queueDir);
    await receiver?.close();
  });

  it('delivers an outcome recorded before the kill, with the same id, after the restart', async () => {
    receiver = await startWebhookReceiver({ secret: SECRET });
    receiver.setDefault({ status: 503 });
    const first = await startService({ queues: { 'wh.crash': webhookQueue({ url: receiver.url, maxRetries: 100_000 }) } });
    services.push(first);
    const api = grpcTransport(first);
    await removeTickets(api, 'wh.crash', 1);
    api.close();
    const [recorded] = await adminOutcomes(first, 'wh.crash');
    expect(recorded).toBeDefined();
    // Recorded and attempted, not acknowledged.
    await receiver.waitFor((r) => r.length >= 1);
    expect(receiver.attemptsFor(recorded!.id).length).toBeGreaterThanOrEqual(1);
    expect(receiver.acknowledged()).toHaveLength(0);
    await first.kill();

    receiver.setDefault({ status: 200 });
    const second = await startService({ queueDir: first.queueDir, dataDir: first.dataDir });
    services.push(second);
    await receiver.waitFor((r) => r.some((x) => x.acknowledged));
    expect(receiver.acknowledged().map(json)).toEqual([recorded]);
    for (const r of receiver.requests) expect(r.verification).toEqual({ ok: true });
    await eventually(async () => (await deliveryOf(second, 'wh.crash'))?.deliveredThrough === recorded!.producerSequence);
  });
});
