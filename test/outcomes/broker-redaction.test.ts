// Broker credentials never reach the log: a password in BROKER_URL (user:pass@, one of a list, or a token),
// an nkey seed, or anything an error echoes is masked, while the lines still name the host and port. The
// service is run for real against an unreachable address and against a nats-server that requires a
// password; the logger is also checked on its own.
import { Writable } from 'node:stream';
import { createUser } from '@nats-io/nkeys';
import { connect } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, redactSecrets } from '../../src/log.js';
import { uuid } from '../support/fixtures.js';
import { freePort, OutcomeReader, startNatsServer, type TestNatsServer } from '../support/nats.js';
import { pollUntil } from '../support/queues.js';
import { removeDirs, startService, type TestService } from '../support/service.js';
import { grpcTransport } from '../support/transports.js';

const SECRET = 's3cr3t-pass';
const LOBBY = `
config:
  tick_interval_ms: 3600000
  outcomes:
    sink: broker
  rulesets:
    - id: duel
      teams: 2
      team_size: 1
`;

const services: { service: TestService; stderr: () => string }[] = [];
afterEach(async () => {
  for (const { service } of services.splice(0)) {
    await service.stop();
    removeDirs(service.dataDir, service.queueDir);
  }
});

async function serve(brokerUrl: string): Promise<{ service: TestService; text: () => string }> {
  const service = await startService({
    queues: { 'eu.lobby': LOBBY },
    env: { BROKER_URL: brokerUrl, BROKER_STREAM_OUTCOMES: 'REDACTION' },
  });
  let stderr = '';
  service.process.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  services.push({ service, stderr: () => stderr });
  // Everything the service printed: every stdout line (parsed, so re-serialized) and stderr.
  const text = () => [...service.logs.map((l) => JSON.stringify(l)), stderr].join('\n');
  return { service, text };
}

/** One ticket.removed outcome, so the dispatcher tries (and fails) to publish. */
async function recordOutcome(service: TestService): Promise<void> {
  const api = grpcTransport(service);
  try {
    expect((await api.createTicket({ id: uuid(), queueId: 'eu.lobby' })).ok).toBe(true);
    expect((await api.clearQueuePool('eu.lobby')).ok).toBe(true);
  } finally {
    api.close();
  }
}

const failures = (service: TestService) => service.logs.filter((l) => l.msg === 'outcome delivery failed; retrying');

/** Waits until the service has logged at least three failed deliveries (their lines are what is checked). */
async function untilFailures(service: TestService): Promise<void> {
  expect(
    await pollUntil(
      async () => failures(service).length,
      (n) => n >= 3,
      20_000,
    ),
  ).toBeGreaterThanOrEqual(3);
}

describe('broker credentials in the log', () => {
  it('masks the password of every URL in BROKER_URL while NATS is unreachable, keeping host and port', async () => {
    const [p1, p2] = [await freePort(), await freePort()];
    const { service, text } = await serve(`nats://someuser:${SECRET}@127.0.0.1:${p1}, nats://someuser:${SECRET}@127.0.0.1:${p2}`);
    const notReady = await service.waitForLog((l) => l.msg === 'outcome broker not ready');
    await recordOutcome(service);
    await untilFailures(service);
    expect(text()).not.toContain(SECRET);
    expect(String(notReady.url)).toContain(`nats://someuser:***@127.0.0.1:${p1}`);
    expect(String(notReady.url)).toContain(`nats://someuser:***@127.0.0.1:${p2}`);
    for (const line of failures(service)) expect(String(line.err)).toContain(`nats://someuser:***@127.0.0.1:${p1}`);
  }, 45_000);

  describe('against a nats-server that requires a password', () => {
    let nats: TestNatsServer;
    beforeAll(async () => {
      nats = await startNatsServer({ config: 'authorization { user: someuser, password: right-pass }\n' });
    });
    afterAll(async () => {
      await nats?.dispose();
    });

    it('masks a wrong password in every line', async () => {
      const { service, text } = await serve(`nats://someuser:${SECRET}@127.0.0.1:${nats.port}`);
      const notReady = await service.waitForLog((l) => l.msg === 'outcome broker not ready');
      expect(String(notReady.err)).toContain('Authorization Violation');
      await recordOutcome(service);
      await untilFailures(service);
      expect(text()).not.toContain(SECRET);
      expect(String(failures(service)[0]!.err)).toContain(`nats://someuser:***@127.0.0.1:${nats.port}`);
    }, 45_000);

    it('authenticates with the user and password of BROKER_URL, and never logs the password', async () => {
      const { service, text } = await serve(`nats://someuser:right-pass@127.0.0.1:${nats.port}`);
      await service.waitForLog((l) => l.msg === 'connected to the outcome broker');
      await recordOutcome(service);
      // The test's own client needs the password too.
      const reader = await connect({ servers: `127.0.0.1:${nats.port}`, user: 'someuser', pass: 'right-pass' });
      try {
        expect(await new OutcomeReader(reader, 'REDACTION', 'c', 'svc.match.outcomes.>').read(1)).toHaveLength(1);
      } finally {
        await reader.close();
      }
      expect(text()).not.toContain('right-pass');
    }, 45_000);
  });
});

describe('the logger', () => {
  function capture(): { log: ReturnType<typeof createLogger>; text: () => string } {
    const chunks: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk.toString());
        done();
      },
    });
    return { log: createLogger('info', sink), text: () => chunks.join('') };
  }

  it('masks userinfo of URLs, tokens and nkey seeds in fields, messages and error causes', () => {
    const seed = new TextDecoder().decode(createUser().getSeed());
    const { log, text } = capture();
    const cause = new Error(`dial nats://admin:hunter2@10.0.0.1:4222 failed`);
    log.error(
      { url: 'nats://a:pw-one@n1:4222,nats://tok-two@n2:4222', err: new Error('cannot connect', { cause }) },
      'broker at nats://b:pw-three@n3:4222',
    );
    log.warn({ nested: { seed }, token: 'tok-four', password: 'pw-five' }, `seed ${seed}`);
    const out = text();
    for (const secret of ['pw-one', 'tok-two', 'hunter2', 'pw-three', seed, 'tok-four', 'pw-five']) expect(out).not.toContain(secret);
    expect(out).toContain('nats://a:***@n1:4222');
    expect(out).toContain('nats://***@n2:4222');
    expect(out).toContain('nats://admin:***@10.0.0.1:4222');
    expect(out).toContain('nats://b:***@n3:4222');
    for (const line of out.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('leaves text without credentials alone', () => {
    expect(redactSecrets('nats://127.0.0.1:4222,tls://n2:4222 user@example.com')).toBe(
      'nats://127.0.0.1:4222,tls://n2:4222 user@example.com',
    );
    expect(redactSecrets('nats://u:p@ss@h:1')).toBe('nats://u:***@h:1');
  });
});
