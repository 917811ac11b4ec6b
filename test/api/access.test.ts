// Bearer tokens with scopes (docs/security.md), against the real service over real sockets: the tokens file
// (by SHA-256, hot-reloaded), signed JWTs verified against a local JWKS file (hot-reloaded), the per-token
// rate limit, the health routes left open, and the audit log of refusals and operator actions. Both
// transports, the gRPC admin service and the WebSocket stream; the audit log's cap on refusal lines is
// checked on Access itself, with a fake clock.
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MatchmakerClient, websocketConsumer } from '@matchmaker/client';
import { create } from '@bufbuild/protobuf';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import WebSocket from 'ws';
import { Access } from '../../src/core/access.js';
import { ExplainTicketRequestSchema, GetQueueStatisticsRequestSchema } from '../../src/gen/matchmaker/admin/v1/admin_pb.js';
import { party, uuid } from '../support/fixtures.js';
import { nextDelivery } from '../support/outcome-consumers.js';
import { deliveries, parkDelivery, parkingQueue, releasedPort } from '../support/parked-delivery.js';
import { duelQueue, healthClient, pollUntil } from '../support/queues.js';
import { serveProcess } from '../support/serve-process.js';
import { startNatsServer, type TestNatsServer } from '../support/nats.js';
import { startReplicaServices } from '../support/replica-services.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';
import {
  grpcAdminClient,
  grpcTransport,
  grpcUnary,
  httpRequest,
  httpTransport,
  type Result,
  type Transport,
} from '../support/transports.js';

const sha256 = (token: string) => createHash('sha256').update(token).digest('hex');
const TOKENS = {
  backend: 'tok-backend-1',
  operator: 'tok-operator-1',
  scraper: 'tok-scraper-1',
  consumer: 'tok-consumer-1',
  otherConsumer: 'tok-consumer-2',
};
const ISSUER = 'https://auth.studio.example';
const AUDIENCE = 'matchmaker';

function tokensYaml(entries: { name: string; token: string; scopes: string[] }[]): string {
  return stringify({ tokens: entries.map((e) => ({ name: e.name, sha256: sha256(e.token), scopes: e.scopes })) });
}

const BASE_ENTRIES = [
  { name: 'backend', token: TOKENS.backend, scopes: ['tickets'] },
  { name: 'operator', token: TOKENS.operator, scopes: ['admin'] },
  { name: 'scraper', token: TOKENS.scraper, scopes: ['metrics'] },
  { name: 'consumer', token: TOKENS.consumer, scopes: ['outcomes'] },
  { name: 'other-consumer', token: TOKENS.otherConsumer, scopes: ['outcomes'] },
];

let service: TestService;
let authDir: string;
let signingKey: CryptoKey;
/** k1, the key of the JWKS file the service starts with. */
let signingJwk: Record<string, unknown>;
const tokensFile = () => join(authDir, 'tokens.yaml');
const jwksFile = () => join(authDir, 'jwks.json');

beforeAll(async () => {
  authDir = tempDir('auth');
  writeFileSync(tokensFile(), tokensYaml(BASE_ENTRIES));
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  signingKey = privateKey;
  signingJwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
  writeFileSync(jwksFile(), JSON.stringify({ keys: [signingJwk] }));
  service = await startService({
    queues: { 'auth.q': BASIC_QUEUE, 'auth.duel': duelQueue(50), 'auth.parked': parkingQueue(await releasedPort()) },
    env: {
      AUTH_TOKENS_FILE: tokensFile(),
      AUTH_JWKS_FILE: jwksFile(),
      AUTH_JWT_ISSUER: ISSUER,
      AUTH_JWT_AUDIENCE: AUDIENCE,
    },
  });
});

afterAll(async () => {
  await service?.stop();
  if (service) removeDirs(service.dataDir, service.queueDir);
  rmSync(authDir, { recursive: true, force: true });
});

const createIn = (api: Transport) => api.createTicket({ id: uuid(), queueId: 'auth.q', engineInput: party(1) });
const codeOf = (r: Result<unknown>) => (r.ok ? 'OK' : r.code);

/** A JWT for the service's issuer and audience, signed by k1 unless `options.key` (with its `kid`) says otherwise. */
function jwt(
  claims: Record<string, unknown>,
  options: { audience?: string; expiresIn?: string; subject?: string; key?: { privateKey: CryptoKey; kid: string } } = {},
) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: options.key?.kid ?? 'k1' })
    .setIssuer(ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setSubject(options.subject ?? 'studio-backend')
    .setIssuedAt()
    .setExpirationTime(options.expiresIn ?? '10m')
    .sign(options.key?.privateKey ?? signingKey);
}

describe.each([
  ['grpc', grpcTransport],
  ['http', httpTransport],
] as const)('bearer tokens over %s', (name, transport) => {
  it('a call without a token, or with an unknown one, is UNAUTHENTICATED (HTTP 401 with WWW-Authenticate: Bearer)', async () => {
    for (const token of [undefined, 'not-a-known-token']) {
      const res = await createIn(transport(service, token));
      expect(res).toMatchObject({ ok: false, code: 'UNAUTHENTICATED', ...(name === 'http' ? { httpStatus: 401 } : {}) });
    }
    if (name === 'http') {
      const res = await httpRequest(service, 'POST', '/v1/queues/auth.q:clear', {});
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(Object.keys(res.body).sort()).toEqual(['code', 'message']);
    }
  });

  it('a known token without the scope is PERMISSION_DENIED (HTTP 403); with it, the call runs', async () => {
    const denied = await createIn(transport(service, TOKENS.operator));
    expect(denied).toMatchObject({ ok: false, code: 'PERMISSION_DENIED', ...(name === 'http' ? { httpStatus: 403 } : {}) });
    expect(denied.ok || denied.message).toContain('tickets');
    expect(codeOf(await createIn(transport(service, TOKENS.backend)))).toBe('OK');
  });

  it('a signed JWT from the configured issuer and audience with the scope in its claim runs', async () => {
    expect(codeOf(await createIn(transport(service, await jwt({ scope: 'tickets outcomes' }))))).toBe('OK');
    // The scopes may be an array too (`scp`-style claims are configured with AUTH_JWT_SCOPES_CLAIM).
    expect(codeOf(await createIn(transport(service, await jwt({ scope: ['tickets'] }))))).toBe('OK');
    expect(codeOf(await createIn(transport(service, await jwt({ scope: 'admin' }))))).toBe('PERMISSION_DENIED');
    expect(codeOf(await createIn(transport(service, await jwt({ scope: 'tickets' }, { audience: 'another-service' }))))).toBe(
      'UNAUTHENTICATED',
    );
    expect(codeOf(await createIn(transport(service, await jwt({ scope: 'tickets' }, { expiresIn: '-5m' }))))).toBe('UNAUTHENTICATED');
    // Signed by a key the JWKS does not hold.
    const stranger = await generateKeyPair('ES256');
    const forged = await new SignJWT({ scope: 'tickets' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setSubject('x')
      .setExpirationTime('10m')
      .sign(stranger.privateKey);
    expect(codeOf(await createIn(transport(service, forged)))).toBe('UNAUTHENTICATED');
  });

  it('ClearQueuePool writes an audit line naming the token', async () => {
    const res = await transport(service, TOKENS.backend).clearQueuePool('auth.q');
    expect(res.ok).toBe(true);
    await service.waitForLog((l) => l.audit === 'clear' && l.by === 'backend' && l.queueId === 'auth.q' && l.transport === name);
  });
});

describe('scopes of the other routes', () => {
  it('health stays open on both ports', async () => {
    expect((await httpRequest(service, 'GET', '/livez')).status).toBe(200);
    expect((await httpRequest(service, 'GET', '/readyz')).status).toBe(200);
    const health = healthClient(service);
    try {
      expect(await health.check('')).toBe('SERVING');
    } finally {
      health.close();
    }
  });

  it('/metrics needs the metrics scope; the admin routes and the dashboard data need admin', async () => {
    expect((await httpRequest(service, 'GET', '/metrics')).status).toBe(401);
    expect((await httpRequest(service, 'GET', '/metrics', undefined, { authorization: `Bearer ${TOKENS.backend}` })).status).toBe(403);
    const metrics = await fetch(`${service.baseUrl}/metrics`, { headers: { authorization: `Bearer ${TOKENS.scraper}` } });
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('matchmaker_');
    for (const path of ['/admin/v1/queues', '/admin/v1/outcomes', '/admin/v1/activity']) {
      expect((await httpRequest(service, 'GET', path)).status).toBe(401);
      expect((await httpRequest(service, 'GET', path, undefined, { authorization: `Bearer ${TOKENS.scraper}` })).status).toBe(403);
      expect((await httpRequest(service, 'GET', path, undefined, { authorization: `Bearer ${TOKENS.operator}` })).status).toBe(200);
    }
    // The page itself holds no data: it loads, and asks for a token.
    const page = await fetch(`${service.baseUrl}/dashboard`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('id="login"');
  });

  it('the WebSocket stream needs the outcomes scope; a refused upgrade without a token says Bearer', async () => {
    /** The upgrade's status, and the WWW-Authenticate header of a refusal. */
    const upgrade = (token?: string) =>
      new Promise<{ status: number; authenticate?: string }>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${service.httpPort}/v1/outcomes/stream`, {
          headers: token ? { authorization: `Bearer ${token}` } : {},
        });
        ws.once('unexpected-response', (_req, res) => {
          const authenticate = res.headers['www-authenticate'];
          resolve({ status: res.statusCode ?? 0, ...(authenticate === undefined ? {} : { authenticate }) });
          res.resume();
        });
        ws.once('message', () => {
          ws.close();
          resolve({ status: 101 });
        });
        ws.once('error', () => undefined);
      });
    expect(await upgrade()).toEqual({ status: 401, authenticate: 'Bearer' });
    expect(await upgrade('not-a-known-token')).toEqual({ status: 401, authenticate: 'Bearer' });
    expect(await upgrade(TOKENS.backend)).toEqual({ status: 403 });
    expect(await upgrade(TOKENS.consumer)).toEqual({ status: 101 });
  });

  it.each([
    ['ExplainTicket', (ticketId: string) => create(ExplainTicketRequestSchema, { queueId: 'auth.q', ticketId })],
    ['GetQueueStatistics', () => create(GetQueueStatisticsRequestSchema, { queueId: 'auth.q' })],
  ] as const)('%s over gRPC needs the admin scope', async (method, request) => {
    const ticketId = uuid();
    const created = await httpTransport(service, TOKENS.backend).createTicket({ id: ticketId, queueId: 'auth.q', engineInput: party(1) });
    expect(codeOf(created)).toBe('OK');
    const admin = grpcAdminClient(service);
    try {
      const call = (token?: string) => grpcUnary(admin, method, request(ticketId), token);
      expect(codeOf(await call())).toBe('UNAUTHENTICATED');
      expect(codeOf(await call('not-a-known-token'))).toBe('UNAUTHENTICATED');
      const denied = await call(TOKENS.backend);
      expect(denied).toMatchObject({ ok: false, code: 'PERMISSION_DENIED' });
      expect(denied.ok || denied.message).toContain('admin');
      expect(codeOf(await call(TOKENS.operator))).toBe('OK');
    } finally {
      admin.close();
    }
  });

  it('refusals are audited with the scope and the peer, and counted in the metrics', async () => {
    await httpRequest(service, 'GET', '/admin/v1/queues', undefined, { authorization: 'Bearer nope' });
    await service.waitForLog(
      (l) => l.audit === 'refused' && l.code === 'UNAUTHENTICATED' && l.scope === 'admin' && typeof l.peer === 'string',
    );
    const metrics = await fetch(`${service.baseUrl}/metrics`, { headers: { authorization: `Bearer ${TOKENS.scraper}` } });
    expect(await metrics.text()).toMatch(/^matchmaker_access_refusals_total\{scope="admin",code="UNAUTHENTICATED"\} [1-9]/m);
  });
});

describe('releasing a parked delivery', () => {
  it('needs the admin scope, and writes an audit line naming the token, the queue and the transport', async () => {
    await parkDelivery(service, 'auth.parked', { tickets: TOKENS.backend, admin: TOKENS.operator });
    const release = (token?: string) =>
      httpRequest(
        service,
        'POST',
        '/admin/v1/queues/auth.parked/deliveries:retry',
        undefined,
        token ? { authorization: `Bearer ${token}` } : {},
      );
    expect((await release()).status).toBe(401);
    expect((await release(TOKENS.backend)).status).toBe(403);
    expect((await deliveries(service, TOKENS.operator)).find((d) => d.queueId === 'auth.parked')?.parked).toBeDefined();
    expect(service.logs.filter((l) => l.audit === 'release')).toEqual([]);

    expect(await release(TOKENS.operator)).toMatchObject({ status: 200, body: { released: true } });
    const line = await service.waitForLog((l) => l.audit === 'release');
    expect(line).toMatchObject({ by: 'operator', queueId: 'auth.parked', transport: 'http', msg: 'audit: release' });
  });
});

/** Opens a stream; answers 'ready', the HTTP status of a refused upgrade, or the close code after an error frame. */
function openStream(target: TestService, token: string, consumer: string, queueId?: string): Promise<string | number> {
  const query = new URLSearchParams({ consumer, ...(queueId === undefined ? {} : { queue_id: queueId }) });
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${target.httpPort}/v1/outcomes/stream?${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type: string; code?: string };
      if (frame.type === 'ready') {
        ws.close();
        resolve('ready');
      }
      if (frame.type === 'error') ws.once('close', (code) => resolve(`${frame.code} ${code}`));
    });
    ws.once('error', () => undefined);
  });
}

describe('owned consumers', () => {
  it('a named consumer belongs to the token that first used it, across a restart', async () => {
    const dir = tempDir('auth-owned');
    writeFileSync(join(dir, 'tokens.yaml'), tokensYaml(BASE_ENTRIES));
    const env = { AUTH_TOKENS_FILE: join(dir, 'tokens.yaml') };
    let first = await startService({ queues: { 'auth.q': BASIC_QUEUE }, env });
    try {
      expect(await openStream(first, TOKENS.consumer, 'backend')).toBe('ready');
      expect(await openStream(first, TOKENS.otherConsumer, 'backend')).toBe(403);
      expect(await openStream(first, TOKENS.consumer, 'backend')).toBe('ready');
      // Two tokens claiming a new name at once: one wins, the other is refused.
      const race = await Promise.all([
        openStream(first, TOKENS.consumer, 'contested'),
        openStream(first, TOKENS.otherConsumer, 'contested'),
      ]);
      expect(race.filter((r) => r === 'ready')).toHaveLength(1);
      expect(race.filter((r) => r === 403 || r === 'PERMISSION_DENIED 1008')).toHaveLength(1);
      await first.stop();
      first = await startService({ queueDir: first.queueDir, dataDir: first.dataDir, env });
      expect(await openStream(first, TOKENS.otherConsumer, 'backend')).toBe(403);
      expect(await openStream(first, TOKENS.consumer, 'backend')).toBe('ready');
    } finally {
      await first.stop();
      removeDirs(first.dataDir, first.queueDir, dir);
    }
  });
});

describe('owned consumers in the replicated mode', () => {
  let nats: TestNatsServer;
  let replicas: TestService[] = [];
  const dirs: string[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    const queueDir = tempDir('auth-rep-queues');
    const dir = tempDir('auth-rep');
    dirs.push(queueDir, dir);
    writeQueues(queueDir, { 'rep.duel': duelQueue(50) });
    writeFileSync(join(dir, 'tokens.yaml'), tokensYaml(BASE_ENTRIES));
    replicas = await startReplicaServices(nats.url, queueDir, ['auth-a', 'auth-b'], {
      env: { AUTH_TOKENS_FILE: join(dir, 'tokens.yaml') },
      adminToken: TOKENS.operator,
    });
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await nats?.dispose();
    removeDirs(...dirs, ...replicas.map((r) => r.dataDir));
  });

  it("the owner recorded in the queue's log holds on every replica; of two replicas claiming at once, one wins", async () => {
    const [a, b] = replicas as [TestService, TestService];
    expect(await openStream(a, TOKENS.consumer, 'rep-backend', 'rep.duel')).toBe('ready');
    expect(
      await pollUntil(
        () => openStream(b, TOKENS.otherConsumer, 'rep-backend', 'rep.duel'),
        (r) => r === 403,
      ),
    ).toBe(403);
    expect(await openStream(b, TOKENS.consumer, 'rep-backend', 'rep.duel')).toBe('ready');
    const race = await Promise.all([
      openStream(a, TOKENS.consumer, 'rep-contested', 'rep.duel'),
      openStream(b, TOKENS.otherConsumer, 'rep-contested', 'rep.duel'),
    ]);
    expect(race.filter((r) => r === 'ready')).toHaveLength(1);
    expect(race.filter((r) => r === 403 || r === 'PERMISSION_DENIED 1008')).toHaveLength(1);
  });
});

describe('the TypeScript client', () => {
  it('sends its access token on every call and on the outcome stream', async () => {
    const address = `127.0.0.1:${service.grpcPort}`;
    const anonymous = new MatchmakerClient({ address, retry: { maxAttempts: 1 } });
    await expect(
      anonymous.createTicket({ queueId: 'auth.duel', engineInput: { players: [{ playerId: 'x', mmr: 0.5 }] } }),
    ).rejects.toMatchObject({
      code: 'UNAUTHENTICATED',
    });
    anonymous.close();

    const client = new MatchmakerClient({ address, accessToken: TOKENS.backend });
    const consumer = websocketConsumer({ url: service.baseUrl, queueId: 'auth.duel', consumer: 'auth-sdk', accessToken: TOKENS.consumer });
    try {
      await consumer.ready();
      for (const playerId of ['ann', 'bob'])
        await client.createTicket({ queueId: 'auth.duel', engineInput: { players: [{ playerId, mmr: 0.5 }] } });
      const delivery = await nextDelivery(consumer);
      expect(delivery.outcome.kind).toBe('match.created');
      await delivery.ack();
    } finally {
      await consumer.close();
      client.close();
    }
  });
});

describe('the tokens file reloads', () => {
  it('a token added to the file is accepted, a removed one refused; a bad file keeps the last good one', async () => {
    const api = httpTransport(service, 'tok-new-1');
    expect(codeOf(await createIn(api))).toBe('UNAUTHENTICATED');
    writeFileSync(tokensFile(), tokensYaml([...BASE_ENTRIES, { name: 'new', token: 'tok-new-1', scopes: ['tickets'] }]));
    expect(
      await pollUntil(
        async () => codeOf(await createIn(api)),
        (c) => c === 'OK',
      ),
    ).toBe('OK');

    writeFileSync(tokensFile(), 'tokens:\n  - name: broken\n    sha256: xyz\n    scopes: [everything]\n');
    await service.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('tokens file refused'));
    expect(codeOf(await createIn(api))).toBe('OK');

    writeFileSync(tokensFile(), tokensYaml(BASE_ENTRIES));
    expect(
      await pollUntil(
        async () => codeOf(await createIn(api)),
        (c) => c === 'UNAUTHENTICATED',
      ),
    ).toBe('UNAUTHENTICATED');
    expect(codeOf(await createIn(httpTransport(service, TOKENS.backend)))).toBe('OK');
  });
});

describe('the JWKS file reloads', () => {
  it('a key added to the file verifies JWTs from then on; once removed, its tokens are refused again', async () => {
    const k2 = { ...(await generateKeyPair('ES256')), kid: 'k2' };
    const api = httpTransport(service, await jwt({ scope: 'tickets' }, { key: k2 }));
    expect(codeOf(await createIn(api))).toBe('UNAUTHENTICATED');

    writeFileSync(jwksFile(), JSON.stringify({ keys: [signingJwk, { ...(await exportJWK(k2.publicKey)), kid: 'k2', alg: 'ES256' }] }));
    expect(
      await pollUntil(
        async () => codeOf(await createIn(api)),
        (c) => c === 'OK',
      ),
    ).toBe('OK');
    await service.waitForLog((l) => l.msg === 'JWKS file reloaded');
    expect(codeOf(await createIn(httpTransport(service, await jwt({ scope: 'tickets' }))))).toBe('OK');

    // Back to k1 alone: the token k2 signed, verified and remembered above, is verified again and refused.
    writeFileSync(jwksFile(), JSON.stringify({ keys: [signingJwk] }));
    expect(
      await pollUntil(
        async () => codeOf(await createIn(api)),
        (c) => c === 'UNAUTHENTICATED',
      ),
    ).toBe('UNAUTHENTICATED');
  });
});

describe('the per-token rate limit', () => {
  let limited: TestService;
  beforeAll(async () => {
    const dir = tempDir('auth-rate');
    writeFileSync(join(dir, 'tokens.yaml'), tokensYaml(BASE_ENTRIES));
    limited = await startService({
      queues: { 'auth.q': BASIC_QUEUE },
      env: { AUTH_TOKENS_FILE: join(dir, 'tokens.yaml'), AUTH_RATE_LIMIT_PER_SEC: '0.5', AUTH_RATE_LIMIT_BURST: '3' },
    });
  });
  afterAll(async () => {
    await limited?.stop();
    if (limited) removeDirs(limited.dataDir, limited.queueDir);
  });

  it.each([
    ['grpc', grpcTransport],
    ['http', httpTransport],
  ] as const)('over %s: past the burst a call is RESOURCE_EXHAUSTED, with Retry-After over HTTP', async (name, transport) => {
    if (name === 'http') {
      // Its own bucket: the operator token, on an admin route (the backend token's is spent over gRPC).
      const get = () => httpRequest(limited, 'GET', '/admin/v1/queues', undefined, { authorization: `Bearer ${TOKENS.operator}` });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await get()).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const refused = await get();
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(refused.body.code).toBe('RESOURCE_EXHAUSTED');
      return;
    }
    const api = transport(limited, TOKENS.backend);
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await createIn(api));
    expect(results.map(codeOf)).toEqual(['OK', 'OK', 'OK', 'RESOURCE_EXHAUSTED']);
    // One call's worth refills in 2 s at 0.5 a second: retry-after, in trailing metadata, rounds it up.
    const refused = results[3]!;
    expect(Number(refused.ok ? undefined : refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(refused.ok ? undefined : refused.retryAfter)).toBeLessThanOrEqual(2);
  });
});

describe('the audit log of refusals', () => {
  it('logs 20 refusals a window of 10 s; the first refusal after the window counts the rest in one line', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const access = new Access(log, { tokens: [{ name: 'backend', sha256: sha256(TOKENS.backend), scopes: ['tickets'] }] });
    const refusedLines = () => lines.filter((l) => l.audit === 'refused');
    const refuse = (authorization: string | undefined, scope: 'tickets' | 'admin', peer: string) =>
      expect(access.authorize(authorization, scope, peer)).rejects.toThrow();
    // Only Date is faked: the window is measured with Date.now(), and the promises must still run.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const start = Date.parse('2030-01-01T00:00:00Z');
      vi.setSystemTime(start);
      for (let i = 0; i < 25; i++) await refuse(undefined, 'tickets', `peer-${i}`);
      vi.setSystemTime(start + 9_999);
      await refuse('Bearer nope', 'tickets', 'peer-25');
      expect(refusedLines()).toHaveLength(20);
      expect(refusedLines().map((l) => l.peer)).toEqual(Array.from({ length: 20 }, (_, i) => `peer-${i}`));
      expect(refusedLines()[0]).toMatchObject({ level: 40, code: 'UNAUTHENTICATED', scope: 'tickets' });
      expect(refusedLines().some((l) => 'suppressed' in l)).toBe(false);

      vi.setSystemTime(start + 10_000);
      await refuse(`Bearer ${TOKENS.backend}`, 'admin', 'peer-26');
      const after = refusedLines().slice(20);
      expect(after).toHaveLength(2);
      expect(after[0]).toMatchObject({ level: 40, suppressed: 6, msg: 'audit: 6 more refusals not logged' });
      expect(after[1]).toMatchObject({ code: 'PERMISSION_DENIED', scope: 'admin', peer: 'peer-26' });

      // The new window logs its own 20 (the one above included) and counts nothing before it is full.
      for (let i = 0; i < 19; i++) await refuse(undefined, 'tickets', `peer-next-${i}`);
      await refuse(undefined, 'tickets', 'peer-over');
      expect(refusedLines().slice(21)).toHaveLength(20);
      expect(refusedLines().at(-1)?.peer).toBe('peer-next-18');
    } finally {
      vi.useRealTimers();
      access.close();
    }
  });
});

describe('the audit log of refusals, after a flood', () => {
  it('counts the refusals left out when the window ends, with no refusal after them', async () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const access = new Access(log, { tokens: [{ name: 'backend', sha256: sha256(TOKENS.backend), scopes: ['tickets'] }] });
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    try {
      vi.setSystemTime(Date.parse('2030-01-01T00:00:00Z'));
      for (let i = 0; i < 23; i++) await expect(access.authorize(undefined, 'tickets', `peer-${i}`)).rejects.toThrow();
      const suppressed = () => lines.filter((l) => 'suppressed' in l);
      vi.advanceTimersByTime(9_999);
      expect(suppressed()).toEqual([]);
      vi.advanceTimersByTime(1);
      expect(suppressed()).toMatchObject([{ audit: 'refused', suppressed: 3, msg: 'audit: 3 more refusals not logged' }]);
      // Once: the next refusal starts a window of its own and counts nothing more.
      await expect(access.authorize(undefined, 'tickets', 'peer-late')).rejects.toThrow();
      expect(suppressed()).toHaveLength(1);
    } finally {
      vi.useRealTimers();
      access.close();
    }
  });
});

describe('start-up', () => {
  /** Starts a service that must exit non-zero; answers what it printed. */
  async function failedStart(env: Record<string, string>): Promise<string> {
    const queueDir = tempDir('auth-queues');
    const dataDir = tempDir('auth-data');
    writeFileSync(join(queueDir, 'auth.q.yaml'), BASIC_QUEUE);
    const child = serveProcess({ queueDir, dataDir, env });
    const code = await child.exited;
    removeDirs(queueDir, dataDir);
    expect(code).not.toBe(0);
    return JSON.stringify(child.logs) + child.stderr();
  }

  it('a tokens file that does not validate stops the start, naming the file and the entry', async () => {
    const dir = tempDir('auth-bad');
    writeFileSync(join(dir, 'tokens.yaml'), 'tokens:\n  - name: a\n    sha256: 1234\n    scopes: [tickets]\n');
    const printed = await failedStart({ AUTH_TOKENS_FILE: join(dir, 'tokens.yaml') });
    expect(printed).toContain('tokens.yaml');
    expect(printed).toContain('tokens[0].sha256');
    rmSync(dir, { recursive: true, force: true });
  });

  it('a JWKS file without an issuer and an audience stops the start', async () => {
    const printed = await failedStart({ AUTH_JWKS_FILE: join(authDir, 'jwks.json'), AUTH_JWT_AUDIENCE: AUDIENCE });
    expect(printed).toContain('auth_jwt_issuer');
  });

  it('without tokens every call is allowed, and the start says so', async () => {
    const open = await startService({ queues: { 'auth.q': BASIC_QUEUE } });
    try {
      expect(codeOf(await createIn(httpTransport(open)))).toBe('OK');
      const warning = await open.waitForLog((l) => l.level === 40 && typeof l.msg === 'string' && l.msg.includes('every call is allowed'));
      expect(warning.msg).toContain('docs/security.md');
    } finally {
      await open.stop();
      removeDirs(open.dataDir, open.queueDir);
    }
  });
});
