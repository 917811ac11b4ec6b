// What a broker failure is, as a typed BrokerError kind (never by its text): a missing stream in bind mode,
// a stream whose subjects do not cover the outcome subjects, a stopped server, a stream deleted under a
// connected sink, refused credentials, and invalid settings. Against a real nats-server started here.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { create } from '@bufbuild/protobuf';
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { createUser } from '@nats-io/nkeys';
import { NoRespondersError, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/service-config.js';
import { OutcomeSchema, type Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { createLogger } from '../../src/log.js';
import { BrokerError, findCause, type BrokerErrorKind } from '../../src/nats/broker-error.js';
import { BrokerConnection } from '../../src/outcomes/broker/connection.js';
import { BrokerSink } from '../../src/outcomes/sinks/broker-sink.js';
import { uuid } from '../support/fixtures.js';
import { freePort, natsClient, startNatsServer, streamMessageCount, type TestNatsServer } from '../support/nats.js';
import { pollUntil } from '../support/queues.js';

let nats: TestNatsServer;
let nc: NatsConnection;
beforeAll(async () => {
  nats = await startNatsServer();
  nc = await natsClient(nats);
});
afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});

/** A logger whose lines the test reads back. */
function capturingLogger(): { log: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { log: createLogger('debug', sink), lines };
}

const connections: BrokerConnection[] = [];
afterEach(async () => {
  for (const c of connections.splice(0)) await c.close();
  if (!nats.running) await nats.restart();
});

function setup(env: Record<string, string> = {}) {
  const tag = randomBytes(4).toString('hex');
  const n = { stream: `ERR_${tag}`, prefix: `e${tag}.outcomes` };
  const { log, lines } = capturingLogger();
  const config = loadServiceConfig(
    {},
    { BROKER_URL: nats.url, BROKER_STREAM_OUTCOMES: n.stream, BROKER_SUBJECT_PREFIX_OUTCOMES: n.prefix, ...env },
  );
  const connection = new BrokerConnection(config, log);
  connections.push(connection);
  return { n, connection, sink: new BrokerSink('eu.lobby', connection, log), lines };
}

const outcome = (seq: number): Outcome =>
  create(OutcomeSchema, { id: uuid(), kind: 'ticket.removed', queueId: 'eu.lobby', producerId: 'p', producerSequence: BigInt(seq) });

/** The BrokerError a promise rejects with. */
async function brokerError(promise: Promise<unknown>): Promise<BrokerError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(BrokerError);
  return err as BrokerError;
}

const kindOf = async (promise: Promise<unknown>): Promise<BrokerErrorKind> => (await brokerError(promise)).kind;

describe('broker errors', () => {
  it('bind mode: a missing stream is a stream-missing error naming the stream, at start-up and on delivery', async () => {
    const { n, connection, sink, lines } = setup({ BROKER_RESOURCE_MODE: 'bind' });
    // The sink warmed the connection up: start-up logs the typed failure.
    const notReady = await pollUntil(
      async () => lines().find((l) => l.msg === 'outcome broker not ready'),
      (l) => l !== undefined,
    );
    expect(notReady).toMatchObject({ kind: 'stream-missing', stream: n.stream });
    const err = await brokerError(connection.ready());
    expect(err.kind).toBe('stream-missing');
    expect(err.stream).toBe(n.stream);
    expect(err.message).toContain(`"${n.stream}"`);
    expect(await kindOf(sink.deliver([outcome(1)]))).toBe('stream-missing');
  });

  it('a stream whose subjects do not cover <prefix>.> is a stream-subjects error, in both modes', async () => {
    for (const mode of ['create', 'bind']) {
      const { n, sink } = setup({ BROKER_RESOURCE_MODE: mode });
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: n.stream, subjects: [`${n.prefix}.eu.>`], storage: StorageType.Memory });
      const err = await brokerError(sink.deliver([outcome(1)]));
      expect(err.kind).toBe('stream-subjects');
      expect(err.stream).toBe(n.stream);
      expect(err.subject).toBe(`${n.prefix}.>`);
    }
  });

  it('a delivery to a stopped server is an unreachable error; it delivers again once the server is back', async () => {
    const { n, sink, lines } = setup();
    await sink.deliver([outcome(1)]);
    await nats.kill();
    await pollUntil(
      async () => lines().some((l) => l.msg === 'outcome broker disconnected; reconnecting'),
      (seen) => seen,
    );
    expect(await kindOf(sink.deliver([outcome(2)]))).toBe('unreachable');
    await nats.restart();
    await sink.deliver([outcome(2)]);
    expect(await streamMessageCount(nc, n.stream)).toBe(2);
  }, 30_000);

  it('a server that never answered is an unreachable error', async () => {
    const { sink } = setup({ BROKER_URL: `nats://127.0.0.1:${await freePort()}` });
    const err = await brokerError(sink.deliver([outcome(1)]));
    expect(err.kind).toBe('unreachable');
    expect(err.cause).toBeInstanceOf(Error);
  });

  it('a stream deleted under a connected sink fails the publish (no responders), and create mode recreates it', async () => {
    const { n, sink } = setup();
    await sink.deliver([outcome(1)]);
    await (await jetstreamManager(nc)).streams.delete(n.stream);
    const err = await brokerError(sink.deliver([outcome(2)]));
    expect(err.kind).toBe('publish');
    expect(err.subject).toBe(`${n.prefix}.eu.lobby.ticket.removed`);
    expect(findCause(err, NoRespondersError)).toBeDefined();
    // The failure made the connection check the stream again: the next delivery recreates it.
    await sink.deliver([outcome(2)]);
    expect(await streamMessageCount(nc, n.stream)).toBe(1);
  });

  it('refused credentials are an unauthorized error that does not repeat the password', async () => {
    const secured = await startNatsServer({ config: 'authorization { user: someuser, password: right-pass }\n' });
    try {
      const wrong = setup({ BROKER_URL: `nats://someuser:wrong-pass@127.0.0.1:${secured.port}` });
      const err = await brokerError(wrong.sink.deliver([outcome(1)]));
      expect(err.kind).toBe('unauthorized');
      expect(err.message).not.toContain('wrong-pass');
      expect(err.message).toContain(`nats://someuser:***@127.0.0.1:${secured.port}`);
      const seed = new TextDecoder().decode(createUser().getSeed());
      const nkey = setup({ BROKER_URL: secured.url, BROKER_NKEY: seed });
      expect(await kindOf(nkey.sink.deliver([outcome(1)]))).toBe('unauthorized');
    } finally {
      for (const c of connections.splice(0)) await c.close();
      await secured.dispose();
    }
  });

  it('invalid settings are config errors', async () => {
    const seed = new TextDecoder().decode(createUser().getSeed());
    const cases: Record<string, string>[] = [
      { BROKER_NKEY: seed, BROKER_CREDENTIALS_FILE: '/nonexistent.creds' },
      { BROKER_URL: `nats://u:p@127.0.0.1:${nats.port}`, BROKER_NKEY: seed },
      { BROKER_URL: `nats://u:p@127.0.0.1:${nats.port},nats://v:q@127.0.0.1:${nats.port}` },
      { BROKER_CREDENTIALS_FILE: '/nonexistent.creds' },
      { BROKER_NKEY: 'SUNOTASEED' },
      { BROKER_SUBJECT_PREFIX_OUTCOMES: 'svc.*.outcomes' },
    ];
    for (const env of cases) expect(await kindOf(setup(env).connection.ready()), JSON.stringify(env)).toBe('config');
  });
});
