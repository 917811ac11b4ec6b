// Browser-safe HTTP (docs/security.md): a page on another site cannot make a visitor's browser change or
// read anything here. A form or text/plain POST gets 415, a request or WebSocket upgrade from a foreign
// Origin 403, a Host not in HTTP_ALLOWED_HOSTS 403 (DNS rebinding), and the dashboard sends its CSP and
// frame headers, asks for a token in a login form and sends it with its actions. Real service, real sockets,
// headless Chromium.
import { createHash } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { stringify } from 'yaml';
import { launchChromium } from '../support/browser.js';
import { party, uuid } from '../support/fixtures.js';
import { deliveries, parkDelivery, parkingQueue, releasedPort } from '../support/parked-delivery.js';
import { adminTicket, pollUntil } from '../support/queues.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, type TestService } from '../support/service.js';
import { grpcTransport } from '../support/transports.js';

const ALLOWED_ORIGIN = 'https://console.studio.example';

let service: TestService;

beforeAll(async () => {
  service = await startService({
    queues: { 'web.q': BASIC_QUEUE },
    env: { HTTP_ALLOWED_ORIGINS: `${ALLOWED_ORIGIN}/`, HTTP_ALLOWED_HOSTS: '127.0.0.1,localhost' },
  });
});

afterAll(async () => {
  await service?.stop();
  if (service) removeDirs(service.dataDir, service.queueDir);
});

/** A raw request, so any Host, Origin and Content-Type can be sent. */
function send(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
  target: TestService = service,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: target.httpPort, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function waitingTicket(): Promise<string> {
  const id = uuid();
  const api = grpcTransport(service);
  expect((await api.createTicket({ id, queueId: 'web.q', engineInput: party(1) })).ok).toBe(true);
  api.close();
  return id;
}

describe('state-changing requests take JSON only', () => {
  it('a form POST to :clear (what a cross-site <form> sends) is 415 and clears nothing', async () => {
    const id = await waitingTicket();
    for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/plain']) {
      const res = await send('POST', '/v1/queues/web.q:clear', { 'content-type': type }, '');
      expect(res.status, type).toBe(415);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'INVALID_ARGUMENT' });
      expect(res.headers['x-svc-reason']).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
    expect((await adminTicket(service, 'web.q', id)).body.state).toBe('active');
  });

  it('a text/plain body that is valid JSON creates nothing', async () => {
    const id = uuid();
    const body = JSON.stringify({ ticket: { id, engineInput: Buffer.from(party(1)).toString('base64') } });
    const res = await send('POST', '/v1/queues/web.q/tickets', { 'content-type': 'text/plain' }, body);
    expect(res.status).toBe(415);
    expect((await adminTicket(service, 'web.q', id)).status).toBe(404);
    const json = await send('POST', '/v1/queues/web.q/tickets', { 'content-type': 'application/json; charset=utf-8' }, body);
    expect(json.status).toBe(200);
  });

  it('a parked delivery is released by a JSON POST only', async () => {
    const res = await send('POST', '/admin/v1/queues/web.q/deliveries:retry', { 'content-type': 'text/plain' }, 'x');
    expect(res.status).toBe(415);
  });
});

describe('Origin and Host', () => {
  it("a request from a foreign Origin is 403; the service's own and the listed ones are served", async () => {
    const own = `http://127.0.0.1:${service.httpPort}`;
    const host = `127.0.0.1:${service.httpPort}`;
    for (const [origin, status] of [
      ['https://evil.example', 403],
      ['null', 403],
      [`http://127.0.0.1:${service.httpPort + 1}`, 403],
      [own, 200],
      [ALLOWED_ORIGIN, 200],
    ] as const) {
      expect((await send('GET', '/admin/v1/outcomes', { origin, host })).status, origin).toBe(status);
    }
    const id = await waitingTicket();
    const refused = await send(
      'POST',
      '/v1/queues/web.q:clear',
      { origin: 'https://evil.example', 'content-type': 'application/json' },
      '{}',
    );
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).code).toBe('PERMISSION_DENIED');
    expect((await adminTicket(service, 'web.q', id)).body.state).toBe('active');
  });

  it('a Host not in HTTP_ALLOWED_HOSTS is 403 (DNS rebinding), while the health probes answer any Host', async () => {
    const rebound = { host: `rebound.evil.example:${service.httpPort}` };
    expect((await send('GET', '/admin/v1/outcomes', rebound)).status).toBe(403);
    expect((await send('GET', '/metrics', rebound)).status).toBe(403);
    expect((await send('GET', '/livez', rebound)).status).toBe(200);
    expect((await send('GET', '/readyz', rebound)).status).toBe(200);
    expect((await send('GET', '/admin/v1/outcomes', { host: `localhost:${service.httpPort}` })).status).toBe(200);
  });

  it('a WebSocket upgrade from a foreign Origin is refused with 403', async () => {
    const upgrade = (origin: string) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(`ws://127.0.0.1:${service.httpPort}/v1/outcomes/stream`, { origin });
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('message', () => {
          ws.close();
          resolve(101);
        });
        ws.once('error', () => undefined);
      });
    expect(await upgrade('https://evil.example')).toBe(403);
    expect(await upgrade(`http://127.0.0.1:${service.httpPort}`)).toBe(101);
  });
});

describe('the dashboard', () => {
  it('sends a CSP without unsafe-inline, X-Frame-Options: DENY and nosniff', async () => {
    const res = await send('GET', '/dashboard', {});
    expect(res.status).toBe(200);
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    expect(csp).not.toContain('unsafe');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect((await send('GET', '/admin/v1/queues', {})).headers['x-content-type-options']).toBe('nosniff');
  });

  describe('with bearer tokens', () => {
    let secured: TestService;
    let browser: Browser;
    let dir: string;
    let sinkPort: number;
    let sink: Server | undefined;
    const token = 'tok-dashboard-operator';
    /** Creates and clears tickets, to park a delivery. */
    const backendToken = 'tok-dashboard-backend';

    beforeAll(async () => {
      dir = tempDir('dash-auth');
      const sha256 = (t: string) => createHash('sha256').update(t).digest('hex');
      writeFileSync(
        join(dir, 'tokens.yaml'),
        stringify({
          tokens: [
            { name: 'ops', sha256: sha256(token), scopes: ['admin'] },
            { name: 'backend', sha256: sha256(backendToken), scopes: ['tickets'] },
          ],
        }),
      );
      sinkPort = await releasedPort();
      secured = await startService({
        queues: { 'web.secured': BASIC_QUEUE, 'web.parked': parkingQueue(sinkPort) },
        env: { AUTH_TOKENS_FILE: join(dir, 'tokens.yaml') },
      });
      browser = await launchChromium();
    });

    afterAll(async () => {
      await new Promise((resolve) => (sink ? sink.close(resolve) : resolve(undefined)));
      await browser?.close();
      await secured?.stop();
      if (secured) removeDirs(secured.dataDir, secured.queueDir);
      rmSync(dir, { recursive: true, force: true });
    });

    it('asks for a token, keeps it in session storage and shows the queues with it, breaking no CSP rule', async () => {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (err) => problems.push(err.message));
      page.on('console', (msg) => {
        if (msg.type() === 'error' && !/status of 401/.test(msg.text())) problems.push(msg.text());
      });
      await page.goto(`${secured.baseUrl}/dashboard`);
      await page.locator('#login').waitFor({ state: 'visible' });
      expect(await page.locator('section[data-queue]').count()).toBe(0);
      await page.fill('#login-token', token);
      await page.click('#login-form button');
      await page.waitForSelector('section[data-queue="web.secured"]');
      expect(await page.locator('#login').isVisible()).toBe(false);
      expect(await page.evaluate(() => sessionStorage.getItem('matchmaker.token'))).toBe(token);
      expect(await page.evaluate(() => document.cookie)).toBe('');
      expect(problems).toEqual([]);
      await page.close();
    });

    it('releases a parked delivery with its button, sending the token', async () => {
      await parkDelivery(secured, 'web.parked', { tickets: backendToken, admin: token });
      const page = await browser.newPage();
      await page.goto(`${secured.baseUrl}/dashboard`);
      await page.fill('#login-token', token);
      await page.click('#login-form button');
      const row = page.locator('#parked tr[data-queue="web.parked"]');
      await row.waitFor({ timeout: 15_000 });

      // A receiver from now on, so the released outcome is delivered rather than parked again.
      let received = 0;
      sink = createServer((req, res) => {
        received += 1;
        req.resume();
        req.on('end', () => res.writeHead(200).end());
      });
      await new Promise<void>((resolve) => sink!.listen(sinkPort, '127.0.0.1', resolve));

      const [released] = await Promise.all([
        page.waitForResponse((res) => res.url().endsWith('/admin/v1/queues/web.parked/deliveries:retry')),
        row.locator('button.release').click(),
      ]);
      expect(released.status()).toBe(200);
      expect(await released.request().headerValue('authorization')).toBe(`Bearer ${token}`);
      await secured.waitForLog((l) => l.audit === 'release' && l.by === 'ops' && l.queueId === 'web.parked' && l.transport === 'http');
      expect(
        await pollUntil(
          async () => received,
          (n) => n > 0,
        ),
      ).toBeGreaterThan(0);
      const after = await pollUntil(
        async () => (await deliveries(secured, token)).find((d) => d.queueId === 'web.parked'),
        (d) => d !== undefined && d.parked === undefined,
      );
      expect(after).toBeDefined();
      expect(after?.parked).toBeUndefined();
      await page.close();
    });
  });
});
