// The broker sink against a real nats-server (JetStream) started by this file: outcomes arrive on
// <prefix>.<queue_id>.<kind> as binary protobuf, in order, deduplicated by outcome id, and survive NATS
// downtime and a crash of the service; bind mode requires a provisioned stream. Read back the way a
// customer would: a durable pull consumer with explicit acks.
import { randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { create, fromBinary, toBinary, toJson } from '@bufbuild/protobuf';
import { createUser } from '@nats-io/nkeys';
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { headers, type NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/service-config.js';
import { OutcomeSchema, type Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { BrokerConnection } from '../../src/outcomes/broker/connection.js';
import { subjectCovers } from '../../src/nats/subjects.js';
import { BrokerSink } from '../../src/outcomes/sinks/broker-sink.js';
import { party, uuid } from '../support/fixtures.js';
import {
  natsClient,
  OutcomeReader,
  startNatsServer,
  streamMessageCount,
  type ReceivedOutcome,
  type TestNatsServer,
} from '../support/nats.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { removeDirs, startService, type ServiceOptions, type TestService } from '../support/service.js';
import { grpcTransport, httpRequest } from '../support/transports.js';
import type { OutcomeJson } from '../support/outcomes.js';
import { sampleSum, scrape } from '../support/prometheus.js';

/** A 1x1 queue that ticks fast: two tickets make a match.created. */
const DUEL = (sink: string) => duelQueue(50, { outcomes: { sink } });
/** A queue that never ticks; ClearQueuePool removes its tickets, one ticket.removed outcome per ticket. */
const LOBBY = (sink: string) => duelQueue(3600000, { outcomes: { sink, batch_chunk_size: 1 } });

interface DeliveryJson {
  queueId: string;
  sink: string;
  deliveredThrough: string;
  lastRecorded: string;
}

let nats: TestNatsServer;
let nc: NatsConnection;
const services: TestService[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
  nc = await natsClient(nats);
});
afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});
afterEach(async () => {
  for (const s of services.splice(0)) {
    await s.stop();
    removeDirs(s.dataDir, s.queueDir);
  }
  if (!nats.running) await nats.restart();
});

/** Unique stream name and subject prefix per test, so tests never see each other's outcomes. */
function names(): { stream: string; prefix: string } {
  const tag = randomBytes(4).toString('hex');
  return { stream: `OUT_${tag}`, prefix: `t${tag}.outcomes` };
}

function brokerEnv(n: { stream: string; prefix: string }, extra: Record<string, string> = {}): Record<string, string> {
  return { BROKER_URL: nats.url, BROKER_STREAM_OUTCOMES: n.stream, BROKER_SUBJECT_PREFIX_OUTCOMES: n.prefix, ...extra };
}

async function serve(options: ServiceOptions): Promise<TestService> {
  const service = await startService(options);
  services.push(service);
  return service;
}

async function adminOutcomes(service: TestService, queueId: string): Promise<OutcomeJson[]> {
  const res = await httpRequest(service, 'GET', `/admin/v1/outcomes?queue_id=${encodeURIComponent(queueId)}&limit=10000`);
  return res.body.outcomes as OutcomeJson[];
}

async function deliveryOf(service: TestService, queueId: string): Promise<DeliveryJson> {
  const res = await httpRequest(service, 'GET', '/admin/v1/deliveries');
  return (res.body.deliveries as DeliveryJson[]).find((d) => d.queueId === queueId)!;
}

async function matchPair(service: TestService, queueId: string): Promise<void> {
  const api = grpcTransport(service);
  try {
    for (const id of [uuid(), uuid()]) expect((await api.createTicket({ id, queueId, engineInput: party(1) })).ok).toBe(true);
  } finally {
    api.close();
  }
}

/** Adds `count` tickets to the queue and clears it: `count` ticket.removed outcomes (chunk size 1). */
async function removeTickets(service: TestService, queueId: string, count: number): Promise<void> {
  const api = grpcTransport(service);
  try {
    for (let i = 0; i < count; i++) expect((await api.createTicket({ id: uuid(), queueId })).ok).toBe(true);
    expect((await api.clearQueuePool(queueId)).ok).toBe(true);
  } finally {
    api.close();
  }
}

const ids = (received: ReceivedOutcome[]) => received.map((r) => r.outcome.id);

describe('broker sink: publishing', () => {
  const n = names();
  let service: TestService;
  let all: OutcomeReader;
  beforeAll(async () => {
    service = await startService({
      queues: { 'eu.ranked': DUEL('broker'), 'eu.lobby': LOBBY('broker'), 'na.lobby': LOBBY('broker'), 'ws.lobby': LOBBY('websocket') },
      env: brokerEnv(n),
    });
    all = new OutcomeReader(nc, n.stream, 'all', `${n.prefix}.>`);
  });
  afterAll(async () => {
    await service?.stop();
    if (service) removeDirs(service.dataDir, service.queueDir);
  });

  it('publishes match.created and ticket.removed on <prefix>.<queue_id>.<kind> as protobuf decoding to the recorded outcomes', async () => {
    await matchPair(service, 'eu.ranked');
    await removeTickets(service, 'eu.lobby', 2);
    const recorded = await pollUntil(
      async () => [...(await adminOutcomes(service, 'eu.ranked')), ...(await adminOutcomes(service, 'eu.lobby'))],
      (o) => o.length >= 3,
    );
    expect(recorded.map((o) => o.kind).sort()).toEqual(['match.created', 'ticket.removed', 'ticket.removed']);

    const received = await all.read(recorded.length);
    expect(received).toHaveLength(recorded.length);
    for (const expected of recorded) {
      const got = received.find((r) => r.outcome.id === expected.id);
      expect(got, expected.id).toBeDefined();
      expect(got!.subject).toBe(`${n.prefix}.${expected.queueId}.${expected.kind}`);
      expect(got!.contentType).toBe('application/x-protobuf');
      expect(got!.msgId).toBe(expected.id);
      expect(toJson(OutcomeSchema, got!.outcome)).toEqual(expected);
    }
    expect(received.find((r) => r.outcome.kind === 'match.created')!.subject).toBe(`${n.prefix}.eu.ranked.match.created`);
  });

  it("publishes a queue's outcomes in occurrence order", async () => {
    const reader = new OutcomeReader(nc, n.stream, 'order', `${n.prefix}.na.lobby.>`);
    await removeTickets(service, 'na.lobby', 12);
    const recorded = await pollUntil(
      () => adminOutcomes(service, 'na.lobby'),
      (o) => o.length >= 12,
    );
    const received = await reader.read(recorded.length);
    expect(ids(received)).toEqual(recorded.map((o) => o.id));
    const sequences = received.map((r) => r.outcome.producerSequence);
    expect([...sequences].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(sequences);
  });

  it("lets a namespace subscription <prefix>.eu.> receive only that namespace's queues", async () => {
    const eu = new OutcomeReader(nc, n.stream, 'eu', `${n.prefix}.eu.>`);
    await removeTickets(service, 'na.lobby', 1);
    await removeTickets(service, 'eu.lobby', 1);
    const euRecorded = [...(await adminOutcomes(service, 'eu.ranked')), ...(await adminOutcomes(service, 'eu.lobby'))];
    const naRecorded = await adminOutcomes(service, 'na.lobby');
    // Everything recorded so far has been published (the all-subjects consumer sees it) ...
    const everything = await all.read(euRecorded.length + naRecorded.length);
    expect(new Set(ids(everything))).toEqual(new Set([...euRecorded, ...naRecorded].map((o) => o.id)));
    // ... and the namespace consumer got exactly the eu.* ones.
    const received = await eu.read(euRecorded.length);
    expect(new Set(received.map((r) => r.outcome.queueId))).toEqual(new Set(['eu.ranked', 'eu.lobby']));
    expect(new Set(ids(received))).toEqual(new Set(euRecorded.map((o) => o.id)));
  });

  it("publishes only the broker queue's outcomes when another queue uses the websocket sink", async () => {
    await removeTickets(service, 'ws.lobby', 2);
    await removeTickets(service, 'eu.lobby', 1);
    const wsRecorded = await adminOutcomes(service, 'ws.lobby');
    expect(wsRecorded.length).toBeGreaterThanOrEqual(2);
    const last = (await adminOutcomes(service, 'eu.lobby')).at(-1)!;
    // The broker queue's newest outcome (recorded after the websocket queue's) is published ...
    const received = await pollUntil(
      () => all.pull(),
      (r) => ids(r).includes(last.id),
    );
    expect(ids(received)).toContain(last.id);
    // ... and none of the websocket queue's outcomes are.
    expect(received.filter((r) => r.outcome.queueId === 'ws.lobby')).toEqual([]);
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(n.stream, { subjects_filter: `${n.prefix}.ws.>` });
    expect(info.state.subjects ?? {}).toEqual({});
    expect((await deliveryOf(service, 'ws.lobby')).sink).toBe('websocket');
  });

  it("measures a queue's delivery against its own outcomes: caught up while another queue records after it", async () => {
    await removeTickets(service, 'na.lobby', 1);
    const last = (await adminOutcomes(service, 'na.lobby')).at(-1)!;
    await pollUntil(
      () => deliveryOf(service, 'na.lobby'),
      (d) => d.deliveredThrough === last.producerSequence,
    );
    // The websocket queue records later outcomes; the service numbers both queues' outcomes in one sequence.
    await removeTickets(service, 'ws.lobby', 2);
    const wsLast = (await adminOutcomes(service, 'ws.lobby')).at(-1)!;
    expect(BigInt(wsLast.producerSequence)).toBeGreaterThan(BigInt(last.producerSequence));
    const na = await deliveryOf(service, 'na.lobby');
    expect(na).toMatchObject({ deliveredThrough: last.producerSequence, lastRecorded: last.producerSequence });
    expect((await deliveryOf(service, 'ws.lobby')).lastRecorded).toBe(wsLast.producerSequence);
    const samples = await scrape(service.baseUrl);
    const gauge = (name: string, queueId: string) => sampleSum(samples, name, { queue_id: queueId });
    expect(gauge('matchmaker_outcome_recorded_sequence', 'na.lobby')).toBe(Number(last.producerSequence));
    expect(gauge('matchmaker_outcome_delivered_sequence', 'na.lobby')).toBe(Number(last.producerSequence));
    expect(gauge('matchmaker_outcome_recorded_sequence', 'ws.lobby')).toBe(Number(wsLast.producerSequence));
  });
});

describe('broker sink: failures', () => {
  it('delivers every outcome, once and in order, after NATS was down while they were recorded', async () => {
    const n = names();
    const service = await serve({ queues: { 'eu.lobby': LOBBY('broker') }, env: brokerEnv(n) });
    const reader = new OutcomeReader(nc, n.stream, 'c', `${n.prefix}.>`);
    // Connected and delivering.
    await removeTickets(service, 'eu.lobby', 1);
    expect(await reader.read(1)).toHaveLength(1);
    const [firstOutcome] = await adminOutcomes(service, 'eu.lobby');
    await pollUntil(
      () => deliveryOf(service, 'eu.lobby'),
      (d) => d.deliveredThrough === firstOutcome!.producerSequence,
    );

    await nats.kill();
    await removeTickets(service, 'eu.lobby', 5);
    const recorded = await adminOutcomes(service, 'eu.lobby');
    expect(recorded).toHaveLength(6);
    // Not delivered while NATS is away: the cursor stays behind the last recorded outcome.
    await service.waitForLog((l) => l.msg === 'outcome delivery failed; retrying');
    expect((await deliveryOf(service, 'eu.lobby')).deliveredThrough).toBe(recorded[0]!.producerSequence);

    await nats.restart();
    const received = await reader.read(recorded.length, 25_000);
    expect(ids(received)).toEqual(recorded.map((o) => o.id));
    const delivered = await pollUntil(
      () => deliveryOf(service, 'eu.lobby'),
      (d) => d.deliveredThrough === recorded.at(-1)!.producerSequence,
    );
    expect(delivered.deliveredThrough).toBe(recorded.at(-1)!.producerSequence);
    expect(await streamMessageCount(nc, n.stream)).toBe(recorded.length);
  }, 45_000);

  it('delivers the same outcome ids after the service was killed (-9) between recording and delivery', async () => {
    const n = names();
    const queues = { 'eu.lobby': LOBBY('broker') };
    await nats.kill();
    const first = await serve({ queues, env: brokerEnv(n) });
    await removeTickets(first, 'eu.lobby', 3);
    const recorded = await adminOutcomes(first, 'eu.lobby');
    expect(recorded).toHaveLength(3);
    // A delivery was attempted and failed: the outcomes are recorded, not acknowledged.
    await first.waitForLog((l) => l.msg === 'outcome delivery failed; retrying');
    expect((await deliveryOf(first, 'eu.lobby')).deliveredThrough).toBe('0');
    await first.kill();
    services.splice(services.indexOf(first), 1);

    await nats.restart();
    const second = await serve({ queueDir: first.queueDir, dataDir: first.dataDir, env: brokerEnv(n) });
    const reader = new OutcomeReader(nc, n.stream, 'c', `${n.prefix}.>`);
    const received = await reader.read(recorded.length);
    expect(ids(received)).toEqual(recorded.map((o) => o.id));
    await pollUntil(
      () => deliveryOf(second, 'eu.lobby'),
      (d) => d.deliveredThrough === recorded.at(-1)!.producerSequence,
    );
  }, 45_000);

  it('bind mode: a missing stream fails visibly and leaves the outcomes unacknowledged; once provisioned they arrive', async () => {
    const n = names();
    const service = await serve({ queues: { 'eu.lobby': LOBBY('broker') }, env: brokerEnv(n, { BROKER_RESOURCE_MODE: 'bind' }) });
    await service.waitForLog((l) => l.msg === 'outcome broker not ready' && String(l.err).includes('does not exist'));
    await removeTickets(service, 'eu.lobby', 2);
    const failure = await service.waitForLog((l) => l.msg === 'outcome delivery failed; retrying');
    expect(String(failure.err)).toContain(`outcome stream "${n.stream}" does not exist`);
    expect(String(failure.err)).toContain(`${n.prefix}.>`);
    const recorded = await adminOutcomes(service, 'eu.lobby');
    const delivery = await deliveryOf(service, 'eu.lobby');
    expect(delivery.deliveredThrough).toBe('0');
    expect(BigInt(delivery.lastRecorded)).toBeGreaterThanOrEqual(BigInt(recorded.at(-1)!.producerSequence));
    // Bind mode never creates the stream.
    const jsm = await jetstreamManager(nc);
    await expect(jsm.streams.info(n.stream)).rejects.toThrow();

    // Provisioned by hand (as an operator would), the retries succeed.
    await jsm.streams.add({ name: n.stream, subjects: [`${n.prefix}.>`], storage: StorageType.Memory });
    const received = await new OutcomeReader(nc, n.stream, 'c', `${n.prefix}.>`).read(recorded.length, 25_000);
    expect(ids(received)).toEqual(recorded.map((o) => o.id));
    await pollUntil(
      () => deliveryOf(service, 'eu.lobby'),
      (d) => d.deliveredThrough === recorded.at(-1)!.producerSequence,
    );
  }, 45_000);

  it('bind mode: a pre-created stream is used as is', async () => {
    const n = names();
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: n.stream, subjects: [`${n.prefix}.>`], storage: StorageType.Memory, description: 'hand-provisioned' });
    const service = await serve({ queues: { 'eu.ranked': DUEL('broker') }, env: brokerEnv(n, { BROKER_RESOURCE_MODE: 'bind' }) });
    await matchPair(service, 'eu.ranked');
    const received = await new OutcomeReader(nc, n.stream, 'c', `${n.prefix}.>`).read(1);
    expect(received.map((r) => r.subject)).toEqual([`${n.prefix}.eu.ranked.match.created`]);
    const info = await jsm.streams.info(n.stream);
    expect(info.config.description).toBe('hand-provisioned');
    expect(info.config.storage).toBe(StorageType.Memory);
  });
});

describe('broker sink: lazy connection', () => {
  it('never connects to the broker when no queue uses the broker sink', async () => {
    // A plain TCP listener standing in for NATS: it records whether anyone connected.
    const connections: Socket[] = [];
    const listener = createServer((socket) => connections.push(socket));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const port = (listener.address() as { port: number }).port;
    try {
      const service = await serve({
        queues: { 'ws.lobby': LOBBY('websocket') },
        env: { ...brokerEnv(names()), BROKER_URL: `nats://127.0.0.1:${port}` },
      });
      await removeTickets(service, 'ws.lobby', 1);
      expect(await adminOutcomes(service, 'ws.lobby')).toHaveLength(1);
      expect(await service.stop()).toBe(0);
      expect(connections).toHaveLength(0);
      // The listener works: a broker queue would have reached it.
      const probe = await serve({
        queues: { 'eu.lobby': LOBBY('broker') },
        env: { ...brokerEnv(names()), BROKER_URL: `nats://127.0.0.1:${port}` },
      });
      await pollUntil(
        async () => connections.length,
        (count) => count > 0,
      );
      expect(connections.length).toBeGreaterThan(0);
      await probe.kill();
    } finally {
      for (const socket of connections) socket.destroy();
      listener.close();
    }
  });
});

describe('broker sink in process', () => {
  const log = pino({ level: 'silent' });
  const connections: BrokerConnection[] = [];
  afterEach(async () => {
    for (const c of connections.splice(0)) await c.close();
  });
  function connection(n: { stream: string; prefix: string }, env: Record<string, string> = {}): BrokerConnection {
    const c = new BrokerConnection(loadServiceConfig({}, brokerEnv(n, env)), log);
    connections.push(c);
    return c;
  }
  const outcome = (queueId: string, seq: number): Outcome =>
    create(OutcomeSchema, { id: uuid(), kind: 'ticket.removed', queueId, producerId: 'p', producerSequence: BigInt(seq) });

  it('creates the stream with file storage, limits retention and a dedupe window, and drops re-sent outcomes', async () => {
    const n = names();
    const sink = new BrokerSink('eu.lobby', connection(n), log);
    const batch = [outcome('eu.lobby', 1), outcome('eu.lobby', 2), outcome('eu.lobby', 3)];
    await sink.deliver(batch);
    // The dispatcher re-sends a whole batch after a failure: nothing is stored twice.
    await sink.deliver(batch);
    await sink.deliver([batch[1]!, batch[2]!, outcome('eu.lobby', 4)]);
    expect(await streamMessageCount(nc, n.stream)).toBe(4);
    // A customer re-publishing with the same message id is deduplicated too (Nats-Msg-Id is the outcome id).
    const h = headers();
    h.set('Content-Type', 'application/x-protobuf');
    const ack = await jetstream(nc).publish(`${n.prefix}.eu.lobby.ticket.removed`, new Uint8Array(), { msgID: batch[0]!.id, headers: h });
    expect(ack.duplicate).toBe(true);
    expect(await streamMessageCount(nc, n.stream)).toBe(4);

    const info = await (await jetstreamManager(nc)).streams.info(n.stream);
    expect(info.config.subjects).toEqual([`${n.prefix}.>`]);
    expect(info.config.storage).toBe(StorageType.File);
    expect(info.config.retention).toBe('limits');
    expect(info.config.duplicate_window).toBe(2 * 60 * 1e9);
    expect(info.config.max_age).toBe(7 * 24 * 3600 * 1e9);
  });

  it('pipelines a batch: 500 outcomes stored in occurrence order; one stored ahead of an earlier one is reported', async () => {
    const n = names();
    const lines: Record<string, unknown>[] = [];
    const recording = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const sink = new BrokerSink('eu.lobby', connection(n), recording);
    const batch = Array.from({ length: sink.batchSize }, (_, i) => outcome('eu.lobby', i + 1));
    await sink.deliver(batch);
    const sub = await jetstream(nc).consumers.get(n.stream);
    const stored: bigint[] = [];
    for await (const m of await sub.fetch({ max_messages: batch.length })) {
      stored.push(fromBinary(OutcomeSchema, m.data).producerSequence);
      if (stored.length === batch.length) break;
    }
    expect(stored).toEqual(batch.map((o) => o.producerSequence));
    expect(lines.filter((l) => l.level === 50)).toEqual([]);

    // What a publish lost in a fault leaves behind: a later outcome (502) stored before an earlier one (501).
    const [first, second] = [outcome('eu.lobby', 501), outcome('eu.lobby', 502)];
    const h = headers();
    h.set('Content-Type', 'application/x-protobuf');
    await jetstream(nc).publish(`${n.prefix}.eu.lobby.ticket.removed`, toBinary(OutcomeSchema, second), { msgID: second.id, headers: h });
    await sink.deliver([first, second]);
    const errors = lines.filter((l) => l.level === 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ queue: 'eu.lobby', outcome: first.id, later: second.id });
    expect(await streamMessageCount(nc, n.stream)).toBe(batch.length + 2);
  });

  it('create mode refuses an existing stream whose subjects do not cover the prefix', async () => {
    const n = names();
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: n.stream, subjects: [`${n.prefix}.eu.>`], storage: StorageType.Memory });
    const sink = new BrokerSink('eu.lobby', connection(n), log);
    await expect(sink.deliver([outcome('eu.lobby', 1)])).rejects.toThrow(`do not cover "${n.prefix}.>"`);
    expect((await jsm.streams.info(n.stream)).config.subjects).toEqual([`${n.prefix}.eu.>`]);
  });

  it('bind mode refuses a missing stream and one whose subject filter does not cover the prefix', async () => {
    const n = names();
    const sink = new BrokerSink('eu.lobby', connection(n, { BROKER_RESOURCE_MODE: 'bind' }), log);
    await expect(sink.deliver([outcome('eu.lobby', 1)])).rejects.toThrow(`outcome stream "${n.stream}" does not exist`);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: n.stream, subjects: [`${n.prefix}.*.*`], storage: StorageType.Memory });
    await expect(sink.deliver([outcome('eu.lobby', 1)])).rejects.toThrow('do not cover');
    await jsm.streams.update(n.stream, { subjects: [`${n.prefix}.>`] });
    await sink.deliver([outcome('eu.lobby', 1)]);
    expect(await streamMessageCount(nc, n.stream)).toBe(1);
  });

  it('fails deliveries (instead of crashing) while NATS is unreachable, then connects', async () => {
    const n = names();
    await nats.kill();
    const sink = new BrokerSink('eu.lobby', connection(n), log);
    await expect(sink.deliver([outcome('eu.lobby', 1)])).rejects.toThrow(/cannot connect to NATS/);
    await nats.restart();
    await sink.deliver([outcome('eu.lobby', 1)]);
    expect(await streamMessageCount(nc, n.stream)).toBe(1);
  });

  it('authenticates with an nkey seed (BROKER_NKEY)', async () => {
    const user = createUser();
    const seed = new TextDecoder().decode(user.getSeed());
    const secured = await startNatsServer({ config: `authorization { users = [ { nkey: ${user.getPublicKey()} } ] }\n` });
    try {
      const n = names();
      const url = { BROKER_URL: secured.url };
      const good = new BrokerSink('eu.lobby', connection(n, { ...url, BROKER_NKEY: seed }), log);
      await good.deliver([outcome('eu.lobby', 1)]);
      const stranger = new TextDecoder().decode(createUser().getSeed());
      const bad = new BrokerSink('eu.lobby', connection(n, { ...url, BROKER_NKEY: stranger }), log);
      await expect(bad.deliver([outcome('eu.lobby', 2)])).rejects.toThrow(/cannot connect to NATS/);
      const anonymous = new BrokerSink('eu.lobby', connection(n, url), log);
      await expect(anonymous.deliver([outcome('eu.lobby', 2)])).rejects.toThrow(/cannot connect to NATS/);
    } finally {
      for (const c of connections.splice(0)) await c.close();
      await secured.dispose();
    }
  });

  it('matches subject filters the way NATS does', () => {
    expect(subjectCovers('svc.match.outcomes.>', 'svc.match.outcomes.>')).toBe(true);
    expect(subjectCovers('svc.>', 'svc.match.outcomes.>')).toBe(true);
    expect(subjectCovers('>', 'svc.match.outcomes.>')).toBe(true);
    expect(subjectCovers('svc.*.outcomes.>', 'svc.match.outcomes.>')).toBe(true);
    expect(subjectCovers('svc.match.outcomes.*', 'svc.match.outcomes.>')).toBe(false);
    expect(subjectCovers('svc.match.outcomes.eu.>', 'svc.match.outcomes.>')).toBe(false);
    expect(subjectCovers('svc.match.other.>', 'svc.match.outcomes.>')).toBe(false);
    expect(subjectCovers('svc.match.outcomes', 'svc.match.outcomes.>')).toBe(false);
  });
});
