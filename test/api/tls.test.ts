// TLS on both ports (docs/security.md), against the real service over real sockets with throwaway
// certificates (test/support/certificates.ts): gRPC, HTTPS and the WebSocket stream over wss with a client
// that trusts the CA, plaintext refused; mutual TLS; the certificate files reloaded without a restart, a bad
// replacement refused; and the start-up errors.
import { renameSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { credentials, type ChannelCredentials } from '@grpc/grpc-js';
import { MatchmakerClient, websocketConsumer, type WebSocketConsumerOptions } from '@matchmaker/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { loadServiceConfig } from '../../src/config/service-config.js';
import { TestAuthority, type Issued } from '../support/certificates.js';
import { nextDelivery } from '../support/outcome-consumers.js';
import { duelQueue } from '../support/queues.js';
import { serveProcess } from '../support/serve-process.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';

const QUEUES = { 'tls.duel': duelQueue(50) };

interface ClientIdentity {
  ca: Buffer;
  cert?: Buffer;
  key?: Buffer;
}

const dir = tempDir('tls');
/** The files the service is told to read: each test's certificate is moved over them. */
const served = { certFile: join(dir, 'served.pem'), keyFile: join(dir, 'served.key') };
let ca: TestAuthority;
let otherCa: TestAuthority;
let first: Issued;
let client: Issued;
let strangerClient: Issued;

beforeAll(() => {
  ca = new TestAuthority(dir, 'test-ca');
  otherCa = new TestAuthority(dir, 'other-ca');
  first = ca.issue('server-1', 'server');
  client = ca.issue('backend-1', 'client');
  strangerClient = otherCa.issue('stranger-1', 'client');
  serve(first);
});
afterAll(() => removeDirs(dir));

/** Puts `issued` in the served files the way a secret is swapped: each file written aside, then renamed over. */
function serve(issued: Pick<Issued, 'cert' | 'key'>): void {
  for (const [file, bytes] of [
    [served.keyFile, issued.key],
    [served.certFile, issued.cert],
  ] as const) {
    writeFileSync(`${file}.new`, bytes);
    renameSync(`${file}.new`, file);
  }
}

/** The common name and serial of the certificate a new TLS connection to `port` gets. */
function peerCertificate(port: number, alpn: 'h2' | 'http/1.1', identity: ClientIdentity): Promise<{ cn: string; serial: string }> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ALPNProtocols: [alpn], ...identity }, () => {
      const peer = socket.getPeerCertificate();
      socket.end();
      resolve({ cn: String(peer.subject.CN), serial: peer.serialNumber.toUpperCase() });
    });
    socket.once('error', reject);
  });
}

/** GET over HTTPS; rejects when the handshake or the connection fails. */
function httpsGet(port: number, path: string, identity: ClientIdentity): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, agent: false, ...identity }, (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', reject);
    req.end();
  });
}

/** CreateTicket over gRPC with `creds`: 'OK' or the error code. One attempt. */
async function createTicketOverGrpc(service: TestService, creds: ChannelCredentials): Promise<string> {
  const api = new MatchmakerClient({
    address: `127.0.0.1:${service.grpcPort}`,
    credentials: creds,
    retry: { maxAttempts: 1 },
    deadlineMs: 5000,
  });
  try {
    await api.createTicket({ queueId: 'tls.duel', engineInput: { players: [{ playerId: 'solo', mmr: 0.1 }] } });
    return 'OK';
  } catch (err) {
    return String((err as { code?: string }).code);
  } finally {
    api.close();
  }
}

/** Two tickets over gRPC make a match, which arrives on the WebSocket stream over wss. */
async function matchOverBothPorts(
  service: TestService,
  grpcCreds: ChannelCredentials,
  socketOptions: WebSocketConsumerOptions['socketOptions'],
) {
  const api = new MatchmakerClient({ address: `127.0.0.1:${service.grpcPort}`, credentials: grpcCreds });
  const consumer = websocketConsumer({ url: `https://127.0.0.1:${service.httpPort}`, queueId: 'tls.duel', socketOptions });
  try {
    await consumer.ready();
    for (const playerId of ['ann', 'bob'])
      await api.createTicket({ queueId: 'tls.duel', engineInput: { players: [{ playerId, mmr: 0.5 }] } });
    const delivery = await nextDelivery(consumer);
    expect(delivery.outcome.kind).toBe('match.created');
    await delivery.ack();
  } finally {
    await consumer.close();
    api.close();
  }
}

describe('TLS', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService({ queues: QUEUES, env: { TLS_CERT_FILE: served.certFile, TLS_KEY_FILE: served.keyFile } });
  });
  afterAll(async () => {
    await service.stop();
    removeDirs(service.dataDir, service.queueDir);
  });

  it('says so in the listening line', () => {
    expect(service.logs.find((l) => l.msg === 'listening')).toMatchObject({ tls: 'on' });
  });

  it('serves gRPC, HTTPS and the WebSocket stream (wss) to a client that trusts the CA', async () => {
    expect(await httpsGet(service.httpPort, '/readyz', { ca: ca.cert })).toBe(200);
    await matchOverBothPorts(service, credentials.createSsl(ca.cert), { ca: ca.cert });
  });

  it('refuses plaintext on both ports, and a client that does not trust the CA', async () => {
    expect(await createTicketOverGrpc(service, credentials.createInsecure())).toBe('UNAVAILABLE');
    expect(await createTicketOverGrpc(service, credentials.createSsl(otherCa.cert))).toBe('UNAVAILABLE');
    await expect(fetch(`http://127.0.0.1:${service.httpPort}/readyz`)).rejects.toThrow();
    await expect(httpsGet(service.httpPort, '/readyz', { ca: otherCa.cert })).rejects.toThrow(/certificate/);
  });

  it('reloads the certificate files: new connections get the new certificate, a bad replacement is refused', async () => {
    const identity = { ca: ca.cert };
    expect(await peerCertificate(service.grpcPort, 'h2', identity)).toEqual({ cn: 'server-1', serial: first.serial });
    // A channel connected before the reload keeps working.
    const before = new MatchmakerClient({ address: `127.0.0.1:${service.grpcPort}`, credentials: credentials.createSsl(ca.cert) });
    await before.createTicket({ queueId: 'tls.duel', engineInput: { players: [{ playerId: 'early', mmr: 0.9 }] } });

    const second = ca.issue('server-2', 'server');
    serve(second);
    await service.waitForLog((l) => l.msg === 'TLS certificate reloaded' && l.serial === second.serial);
    const now = { cn: 'server-2', serial: second.serial };
    expect(await peerCertificate(service.grpcPort, 'h2', identity)).toEqual(now);
    expect(await peerCertificate(service.httpPort, 'http/1.1', identity)).toEqual(now);
    expect(await createTicketOverGrpc(service, credentials.createSsl(ca.cert))).toBe('OK');
    await before.createTicket({ queueId: 'tls.duel', engineInput: { players: [{ playerId: 'late', mmr: 0.9 }] } });
    before.close();

    // Not a certificate: refused, naming the file; the last good one stays.
    writeFileSync(served.certFile, 'not a certificate\n');
    await service.waitForLog((l) => typeof l.msg === 'string' && l.msg.includes('TLS files refused') && l.msg.includes('tls_cert_file'));
    expect(await peerCertificate(service.grpcPort, 'h2', identity)).toEqual(now);
    expect(await peerCertificate(service.httpPort, 'http/1.1', identity)).toEqual(now);

    // A key that is not the certificate's: refused too.
    serve({ cert: first.cert, key: second.key });
    await service.waitForLog((l) => typeof l.msg === 'string' && l.msg.includes('is not the key of the certificate'));
    expect(await peerCertificate(service.httpPort, 'http/1.1', identity)).toEqual(now);
    expect(await httpsGet(service.httpPort, '/readyz', identity)).toBe(200);
    serve(first);
    await service.waitForLog((l) => l.msg === 'TLS certificate reloaded' && l.serial === first.serial);
  });
});

describe('mutual TLS', () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService({
      queues: QUEUES,
      env: { TLS_CERT_FILE: served.certFile, TLS_KEY_FILE: served.keyFile, TLS_CLIENT_CA_FILE: ca.certFile },
    });
  });
  afterAll(async () => {
    await service.stop();
    removeDirs(service.dataDir, service.queueDir);
  });

  it('says so in the listening line', () => {
    expect(service.logs.find((l) => l.msg === 'listening')).toMatchObject({ tls: 'mutual' });
  });

  it('serves a client with a certificate from the client CA on both ports', async () => {
    const identity = { ca: ca.cert, cert: client.cert, key: client.key };
    expect(await httpsGet(service.httpPort, '/readyz', identity)).toBe(200);
    await matchOverBothPorts(service, credentials.createSsl(ca.cert, client.key, client.cert), identity);
  });

  it('refuses a client without a certificate, or with one from another CA, on both ports', async () => {
    expect(await createTicketOverGrpc(service, credentials.createSsl(ca.cert))).toBe('UNAVAILABLE');
    expect(await createTicketOverGrpc(service, credentials.createSsl(ca.cert, strangerClient.key, strangerClient.cert))).toBe(
      'UNAVAILABLE',
    );
    await expect(httpsGet(service.httpPort, '/readyz', { ca: ca.cert })).rejects.toThrow();
    await expect(
      httpsGet(service.httpPort, '/readyz', { ca: ca.cert, cert: strangerClient.cert, key: strangerClient.key }),
    ).rejects.toThrow();
    const upgrade = await new Promise<string>((resolve) => {
      const ws = new WebSocket(`wss://127.0.0.1:${service.httpPort}/v1/outcomes/stream`, { ca: ca.cert });
      ws.once('open', () => {
        ws.close();
        resolve('open');
      });
      ws.once('error', (err) => resolve(err.message));
    });
    expect(upgrade).not.toBe('open');
  });
});

describe('start-up', () => {
  it('the certificate and the key come together; the client CA only with them', () => {
    expect(() => loadServiceConfig({}, { TLS_CERT_FILE: '/x/cert.pem' })).toThrow(
      /tls_key_file \(env TLS_KEY_FILE\): required with tls_cert_file/,
    );
    expect(() => loadServiceConfig({}, { TLS_KEY_FILE: '/x/key.pem' })).toThrow(
      /tls_cert_file \(env TLS_CERT_FILE\): required with tls_key_file/,
    );
    expect(() => loadServiceConfig({}, { TLS_CLIENT_CA_FILE: '/x/ca.pem' })).toThrow(/tls_client_ca_file \(env TLS_CLIENT_CA_FILE\)/);
  });

  /** Starts a service that must exit non-zero; answers what it printed. */
  async function failedStart(env: Record<string, string>): Promise<string> {
    const queueDir = tempDir('tls-queues');
    const dataDir = tempDir('tls-data');
    writeQueues(queueDir, { 'tls.q': BASIC_QUEUE });
    const child = serveProcess({ queueDir, dataDir, env });
    const code = await child.exited;
    removeDirs(queueDir, dataDir);
    expect(code).not.toBe(0);
    return JSON.stringify(child.logs) + child.stderr();
  }

  it('a file that is missing or not PEM stops the start, naming the file and its setting', async () => {
    const garbage = join(dir, 'garbage.pem');
    writeFileSync(garbage, 'not a certificate\n');
    const badCert = await failedStart({ TLS_CERT_FILE: garbage, TLS_KEY_FILE: first.keyFile });
    expect(badCert).toContain(`${garbage} (tls_cert_file): not a PEM certificate`);
    const missingKey = await failedStart({ TLS_CERT_FILE: first.certFile, TLS_KEY_FILE: join(dir, 'nope.key') });
    expect(missingKey).toContain('nope.key (tls_key_file): no such file');
    const wrongKey = await failedStart({ TLS_CERT_FILE: first.certFile, TLS_KEY_FILE: client.keyFile });
    expect(wrongKey).toContain('(tls_key_file) is not the key of the certificate');
    const badCa = await failedStart({ TLS_CERT_FILE: first.certFile, TLS_KEY_FILE: first.keyFile, TLS_CLIENT_CA_FILE: garbage });
    expect(badCa).toContain(`${garbage} (tls_client_ca_file): not PEM CA certificates`);
  });
});
