// GET /metrics: the prom-client exposition. Requests by operation, transport and code; what queues do
// (tickets in and out, matches, waits, match quality, ticks); outcome delivery to a webhook that works and
// to one that refuses; Node's own metrics. Everything through the real service over real sockets.
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { party, uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { metricFamilies, scrape, sampleSum, type Sample } from '../support/prometheus.js';
import { BASIC_QUEUE, startService, type TestService } from '../support/service.js';
import { grpcTransport, httpTransport, type Transport } from '../support/transports.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import type { StreamFrame } from '../support/outcomes.js';
import { WebSocket } from 'ws';

const SECRET = 'whsec-metrics-7d1e';

const webhook = (url: string, maxRetries: number) =>
  duelQueue(50, {
    outcomes: {
      sink: 'webhook',
      batch_chunk_size: 1,
      webhook: { url, secret: SECRET, timeout_ms: 500, max_retries: maxRetries, retry_base_delay_ms: 10, retry_max_delay_ms: 20 },
    },
  });

describe('GET /metrics', () => {
  let service: TestService;
  let receiver: WebhookReceiver;
  let grpc: Transport;
  let http: Transport;

  beforeAll(async () => {
    receiver = await startWebhookReceiver({ secret: SECRET });
    // A port nobody listens on (bound, then released): every delivery to it fails.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const refused = `http://127.0.0.1:${(probe.address() as { port: number }).port}/hook`;
    await new Promise((resolve) => probe.close(resolve));
    service = await startService({
      queues: {
        'test.basic': BASIC_QUEUE,
        'm.duel': webhook(receiver.url, 5),
        'm.refused': webhook(refused, 2),
        'm.ws': duelQueue(50),
        'm.far': duelQueue(50, { ruleset: { max_skill_spread: 0.5 } }),
      },
    });
    grpc = grpcTransport(service);
    http = httpTransport(service);
  });

  afterAll(async () => {
    grpc?.close();
    await service?.stop();
    await receiver?.close();
  });

  it('counts requests by operation, transport and code', async () => {
    for (let i = 0; i < 2; i++)
      expect((await grpc.createTicket({ id: uuid(), queueId: 'test.basic', engineInput: party(1) })).ok).toBe(true);
    const id = uuid();
    expect((await http.createTicket({ id, queueId: 'test.basic', engineInput: party(1) })).ok).toBe(true);
    expect((await http.cancelTicket('test.basic', id)).ok).toBe(true);
    expect((await grpc.createTicket({ id: 'not-a-uuid', queueId: 'test.basic', engineInput: party(1) })).ok).toBe(false);
    expect((await http.createTicket({ id: uuid(), queueId: 'no.such.queue', engineInput: party(1) })).ok).toBe(false);

    const s = await scrape(service.baseUrl);
    const requests = (labels: Record<string, string>) => sampleSum(s, 'matchmaker_requests_total', labels);
    expect(requests({ operation: 'CreateTicket', transport: 'grpc', code: 'OK' })).toBe(2);
    expect(requests({ operation: 'CreateTicket', transport: 'http', code: 'OK' })).toBe(1);
    expect(requests({ operation: 'CancelTicket', transport: 'http', code: 'OK' })).toBe(1);
    expect(requests({ operation: 'CreateTicket', transport: 'grpc', code: 'INVALID_ARGUMENT' })).toBe(1);
    expect(requests({ operation: 'CreateTicket', transport: 'http', code: 'NOT_FOUND' })).toBe(1);
    expect(sampleSum(s, 'matchmaker_request_duration_seconds_count', { operation: 'CreateTicket', transport: 'grpc', code: 'OK' })).toBe(2);
    const inf = sampleSum(s, 'matchmaker_request_duration_seconds_bucket', {
      operation: 'CreateTicket',
      transport: 'grpc',
      code: 'OK',
      le: '+Inf',
    });
    expect(inf).toBe(2);

    expect(sampleSum(s, 'matchmaker_tickets_created_total', { queue_id: 'test.basic' })).toBe(3);
    expect(sampleSum(s, 'matchmaker_tickets_left_total', { queue_id: 'test.basic', exit: 'cancelled' })).toBe(1);
    expect(sampleSum(s, 'matchmaker_pool_tickets', { queue_id: 'test.basic' })).toBe(2);
    expect(sampleSum(s, 'matchmaker_up')).toBe(1);
    expect(sampleSum(s, 'matchmaker_queue_leading', { queue_id: 'test.basic' })).toBe(1);
    // No replication log, embedded: no applied position.
    expect(sampleSum(s, 'matchmaker_replication_applied_position', { queue_id: 'test.basic' })).toBeUndefined();
    expect(sampleSum(s, 'matchmaker_replication_term', { queue_id: 'test.basic' })).toBeUndefined();
  });

  it('reports matches with their waits, skill spread and team imbalance, the ticks, and the delivery lag', async () => {
    // Two players 0.1 apart in mmr: spread 0.1 / mmr_normalization_ref 0.1 = 1; teams of one, so imbalance = spread.
    const created = Date.now();
    for (const mmr of [0.4, 0.5])
      expect((await grpc.createTicket({ id: uuid(), queueId: 'm.duel', engineInput: party(1, mmr) })).ok).toBe(true);
    const s = await pollUntil(
      () => scrape(service.baseUrl),
      (samples) => (sampleSum(samples, 'matchmaker_outcome_delivery_lag_seconds_count', { queue_id: 'm.duel' }) ?? 0) >= 1,
    );
    const waitedSecs = (Date.now() - created) / 1000;
    const duel = { queue_id: 'm.duel', ruleset_id: 'duel' };
    expect(sampleSum(s, 'matchmaker_matches_total', duel)).toBe(1);
    expect(sampleSum(s, 'matchmaker_players_matched_total', duel)).toBe(2);
    expect(sampleSum(s, 'matchmaker_ticket_wait_seconds_count', duel)).toBe(2);
    const waitSum = sampleSum(s, 'matchmaker_ticket_wait_seconds_sum', duel)!;
    expect(waitSum).toBeGreaterThan(0);
    expect(waitSum).toBeLessThanOrEqual(2 * waitedSecs);
    expect(sampleSum(s, 'matchmaker_match_skill_spread_count', duel)).toBe(1);
    expect(sampleSum(s, 'matchmaker_match_skill_spread_sum', duel)).toBeCloseTo(1, 6);
    expect(sampleSum(s, 'matchmaker_match_skill_spread_bucket', { ...duel, le: '0.75' })).toBe(0);
    expect(sampleSum(s, 'matchmaker_match_skill_spread_bucket', { ...duel, le: '1' })).toBe(1);
    expect(sampleSum(s, 'matchmaker_match_team_imbalance_sum', duel)).toBeCloseTo(1, 6);
    expect(sampleSum(s, 'matchmaker_tick_duration_seconds_count', { queue_id: 'm.duel' })).toBeGreaterThanOrEqual(1);
    expect(sampleSum(s, 'matchmaker_engine_duration_seconds_count', { queue_id: 'm.duel' })).toBeGreaterThanOrEqual(1);
    expect(sampleSum(s, 'matchmaker_engine_tickets_examined_total', { queue_id: 'm.duel' })).toBeGreaterThanOrEqual(2);
    expect(sampleSum(s, 'matchmaker_tickets_left_total', { queue_id: 'm.duel' })).toBeUndefined();

    expect(receiver.acknowledged().length).toBeGreaterThanOrEqual(1);
    const lagSum = sampleSum(s, 'matchmaker_outcome_delivery_lag_seconds_sum', { queue_id: 'm.duel', sink: 'webhook' })!;
    expect(lagSum).toBeGreaterThanOrEqual(0);
    expect(lagSum).toBeLessThan(waitedSecs + 1);
    expect(sampleSum(s, 'matchmaker_outcome_delivery_retries_total', { queue_id: 'm.duel' })).toBeUndefined();
  });

  it("counts, per ruleset and rule, the engine's reasons for the candidates it refused", async () => {
    // 0.8 apart: a spread of 8 against max_skill_spread 0.5, tick after tick.
    for (const mmr of [0.1, 0.9])
      expect((await grpc.createTicket({ id: uuid(), queueId: 'm.far', engineInput: party(1, mmr) })).ok).toBe(true);
    const labels = { queue_id: 'm.far', ruleset_id: 'duel' };
    const s = await pollUntil(
      () => scrape(service.baseUrl),
      (samples) => (sampleSum(samples, 'matchmaker_rule_rejections_total', { ...labels, rule: 'skill_spread' }) ?? 0) >= 4,
    );
    expect(sampleSum(s, 'matchmaker_rule_rejections_total', { ...labels, rule: 'skill_spread' })).toBeGreaterThanOrEqual(4);
    for (const rule of ['team_imbalance', 'no_acceptable_host', 'attributes', 'party_size'])
      expect(sampleSum(s, 'matchmaker_rule_rejections_total', { ...labels, rule })).toBeUndefined();
    expect(sampleSum(s, 'matchmaker_matches_total', labels)).toBeUndefined();
    expect(sampleSum(s, 'matchmaker_rule_rejections_total', { queue_id: 'm.duel' })).toBeUndefined();
  });

  it('counts retries and parks of a delivery its sink refuses', async () => {
    for (const mmr of [0.5, 0.5])
      expect((await grpc.createTicket({ id: uuid(), queueId: 'm.refused', engineInput: party(1, mmr) })).ok).toBe(true);
    const s = await pollUntil(
      () => scrape(service.baseUrl),
      (samples) => sampleSum(samples, 'matchmaker_outcome_deliveries_parked', { queue_id: 'm.refused' }) === 1,
    );
    const labels = { queue_id: 'm.refused', sink: 'webhook' };
    expect(sampleSum(s, 'matchmaker_outcome_deliveries_parked', { queue_id: 'm.refused' })).toBe(1);
    expect(sampleSum(s, 'matchmaker_outcome_delivery_retries_total', labels)).toBe(2);
    expect(sampleSum(s, 'matchmaker_outcome_deliveries_parked_total', labels)).toBe(1);
    expect(sampleSum(s, 'matchmaker_outcome_delivery_lag_seconds_count', labels)).toBeUndefined();
  });

  it('reports the delivery lag of outcomes a WebSocket stream consumer acknowledges', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${service.httpPort}/v1/outcomes/stream?queue_id=m.ws&consumer=metrics`);
    const frames: StreamFrame[] = [];
    ws.on('message', (data) => frames.push(JSON.parse(String(data)) as StreamFrame));
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    try {
      for (const mmr of [0.5, 0.5])
        expect((await grpc.createTicket({ id: uuid(), queueId: 'm.ws', engineInput: party(1, mmr) })).ok).toBe(true);
      const outcome = await pollUntil(
        async () => frames.find((f) => f.type === 'outcome'),
        (f) => f !== undefined,
      );
      expect(outcome?.type).toBe('outcome');
      const labels = { queue_id: 'm.ws', sink: 'websocket' };
      // Sent but not acknowledged: no lag yet.
      expect(sampleSum(await scrape(service.baseUrl), 'matchmaker_outcome_delivery_lag_seconds_count', labels)).toBeUndefined();
      ws.send(JSON.stringify({ type: 'ack', offset: (outcome as { offset: string }).offset }));
      await pollUntil(
        async () => frames.some((f) => f.type === 'acked'),
        (acked) => acked,
      );
      const s = await scrape(service.baseUrl);
      expect(sampleSum(s, 'matchmaker_outcome_delivery_lag_seconds_count', labels)).toBe(1);
      expect(sampleSum(s, 'matchmaker_outcome_delivery_lag_seconds_sum', labels)).toBeLessThan(10);
    } finally {
      ws.close();
    }
  });

  it("includes Node's own metrics: event-loop lag, GC pauses by kind, heap and CPU", async () => {
    const res = await fetch(`${service.baseUrl}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const families = metricFamilies(text);
    for (const name of ['nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes', 'process_cpu_seconds_total'])
      expect(families.has(name)).toBe(true);
    expect(families.get('nodejs_gc_duration_seconds')).toBe('histogram');
    const samples: Sample[] = (await scrape(service.baseUrl)).filter((x) => x.name === 'nodejs_eventloop_lag_p99_seconds');
    expect(samples[0]!.value).toBeGreaterThanOrEqual(0);
  });
});
