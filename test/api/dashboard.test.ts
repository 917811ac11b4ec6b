// GET /dashboard in headless Chromium against the real service: the page loads with every queue, shows a
// match created through the API (teams, host, quality) with its charts drawn, each queue's statistics, the
// ticket search (a ticket id typed in, its explanation shown), and its release button releases a parked
// delivery, which then reaches the sink.
import { createServer, type Server } from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTrio, refusedAfter, TARGET_COUNTS, TRIO_QUEUE } from '../support/explain-pool.js';
import { party, uuid } from '../support/fixtures.js';
import { launchChromium } from '../support/browser.js';
import { parkingQueue, releasedPort } from '../support/parked-delivery.js';
import { adminTicket, duelQueue, pollUntil } from '../support/queues.js';
import { startService, type TestService } from '../support/service.js';
import { grpcTransport, httpRequest, type Transport } from '../support/transports.js';

describe('GET /dashboard', () => {
  let service: TestService;
  let api: Transport;
  let browser: Browser;
  let page: Page;
  let sinkPort: number;
  let sink: Server | undefined;
  /** What the page logged as errors ("Refused to ..." for a script or style its CSP refused). */
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    sinkPort = await releasedPort();
    service = await startService({
      queues: {
        'd.duel': duelQueue(50),
        'd.parked': parkingQueue(sinkPort, 50),
        'd.far': duelQueue(50, { ruleset: { max_skill_spread: 0.5 } }),
        'd.trio': TRIO_QUEUE,
      },
    });
    api = grpcTransport(service);
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    page.on('console', (msg) => {
      // A 404 is the ticket search asking a queue that does not hold the ticket.
      if (msg.type() === 'error' && !msg.text().startsWith('Failed to load resource')) consoleErrors.push(msg.text());
    });
    await page.goto(`${service.baseUrl}/dashboard`);
    await page.waitForSelector('section[data-queue="d.parked"]');
    expect(errors).toEqual([]);
  });

  afterAll(async () => {
    await browser?.close();
    api?.close();
    await service?.stop();
    await new Promise((resolve) => (sink ? sink.close(resolve) : resolve(undefined)));
  });

  /** Two players who match at once; answers the match id once the match is committed. */
  async function matchOf(queueId: string): Promise<string> {
    const ids = [uuid(), uuid()];
    for (const id of ids) expect((await api.createTicket({ id, queueId, engineInput: party(1) })).ok).toBe(true);
    const found = await pollUntil(
      () => adminTicket(service, queueId, ids[0]!),
      (r) => r.body.state === 'resolved',
    );
    expect(found.body.state).toBe('resolved');
    return found.body.matchId as string;
  }

  it('lists every queue with its charts drawn', async () => {
    const queues = await page.$$eval('section[data-queue]', (sections) => sections.map((s) => s.getAttribute('data-queue')));
    expect(queues.sort()).toEqual(['d.duel', 'd.far', 'd.parked', 'd.trio']);
    expect(await page.locator('section[data-queue="d.duel"] .chart canvas').count()).toBe(4);
    await expect.poll(() => page.textContent('#status')).toMatch(/4 queue\(s\)/);
  });

  it('shows a match created through the API: its teams, host and quality, and the wait it took', async () => {
    const matchId = await matchOf('d.duel');
    const row = page.locator(`section[data-queue="d.duel"] tr[data-match-id="${matchId}"]`);
    await row.waitFor({ timeout: 10_000 });
    const cells = await row.locator('td').allTextContents();
    expect(cells[1]).toBe(matchId.slice(0, 8));
    expect(cells[2]).toBe('duel');
    expect(cells[3]).toMatch(/^p-[0-9a-f-]{36} {2}vs {2}p-[0-9a-f-]{36}$/);
    expect(cells[4]).toBe('eu-west');
    expect(Number(cells[5])).toBeGreaterThanOrEqual(0);
    expect(cells[7]).toMatch(/^\d+\.\d s$/);
    // The headline figures follow: a match this minute, and a wait measured.
    const figures = await page.locator('section[data-queue="d.duel"] .figure b').allTextContents();
    expect(Number(figures[2])).toBeGreaterThan(0);
    expect(figures[3]).toMatch(/^\d+\.\d \/ \d+\.\d$/);
  });

  it('shows which rule refused the candidates of a queue whose players do not match', async () => {
    for (const mmr of [0.1, 0.9])
      expect((await api.createTicket({ id: uuid(), queueId: 'd.far', engineInput: party(1, mmr) })).ok).toBe(true);
    const row = page.locator('section[data-queue="d.far"] tr[data-rule="skill_spread"]');
    await row.waitFor({ timeout: 10_000 });
    const cells = await row.locator('td').allTextContents();
    expect(cells.slice(0, 2)).toEqual(['duel', 'skill_spread']);
    expect(Number(cells[2])).toBeGreaterThan(0);
    expect(await page.locator('section[data-queue="d.far"] tr[data-rule]').count()).toBe(1);
  });

  it("explains a ticket typed into the search, and shows each queue's statistics", async () => {
    const trio = await createTrio('d.trio', async (ticket) => expect((await api.createTicket(ticket)).ok).toBe(true));
    // Once a tick over the whole pool has recorded its refusal (the page asks once per search).
    const createdMs = Date.now();
    await pollUntil(
      () => httpRequest(service, 'GET', `/admin/v1/queues/d.trio/tickets/${trio.target}:explain`),
      (r) => refusedAfter(r.body as never, createdMs),
    );
    await page.fill('#search-ticket', trio.target);
    await page.click('#search-form button[type="submit"]');
    const box = page.locator(`#explain[data-ticket="${trio.target}"]`);
    await box.waitFor({ timeout: 10_000 });
    expect(await box.getAttribute('data-state')).toBe('active');
    expect(await box.locator('[data-field="last-refusal"] b').textContent()).toMatch(/^skill_spread \(tick at /);
    const row = box.locator('tr[data-ruleset="trio"]');
    const count = (key: string) => row.locator(`td[data-count="${key}"]`).textContent();
    for (const [key, n] of Object.entries(TARGET_COUNTS)) if (key !== 'playersNeeded') expect(Number(await count(key)), key).toBe(n);
    expect(await count('all')).toBe('0');
    expect(await row.locator('td').nth(2).textContent()).toMatch(/^at 3600\.0 s waited/);

    // A ticket no queue holds: the answer says so.
    await page.fill('#search-ticket', uuid());
    await page.click('#search-form button[type="submit"]');
    await page.locator('#explain[data-error="404"]').waitFor({ timeout: 10_000 });
    expect(await page.textContent('#explain .error')).toMatch(/is not in queue/);

    // The statistics of the queue: six tickets and eight players waiting, nothing matched yet.
    const stats = page.locator('section[data-queue="d.trio"] table.stats tr[data-ruleset="(queue)"] td');
    await expect.poll(async () => (await stats.allTextContents()).slice(0, 3), { timeout: 10_000 }).toEqual(['whole queue', '6', '8']);
    expect((await stats.allTextContents()).at(-1)).toBe('too little history');
    expect(await page.locator('section[data-queue="d.trio"] table.stats tr[data-ruleset="trio"]').count()).toBe(1);
  });

  it('releases a parked delivery with its button, and the outcome then reaches the sink', async () => {
    await matchOf('d.parked');
    const parkedRow = page.locator('#parked tr[data-queue="d.parked"]');
    await parkedRow.waitFor({ timeout: 15_000 });
    expect(await parkedRow.locator('td').nth(1).textContent()).toBe('webhook');

    const received: string[] = [];
    sink = createServer((req, res) => {
      received.push(req.headers['x-svc-message-type'] as string);
      req.resume();
      req.on('end', () => res.writeHead(200).end());
    });
    await new Promise<void>((resolve) => sink!.listen(sinkPort, '127.0.0.1', resolve));

    await parkedRow.locator('button.release').click();
    await page.locator('#parked.none').waitFor({ state: 'attached', timeout: 10_000 });
    const deliveries = await pollUntil(
      () => httpRequest(service, 'GET', '/admin/v1/deliveries'),
      (r) => (r.body.deliveries as { queueId: string; parked?: unknown }[]).every((d) => !d.parked),
    );
    expect(
      (deliveries.body.deliveries as { queueId: string; parked?: unknown }[]).find((d) => d.queueId === 'd.parked')?.parked,
    ).toBeUndefined();
    await pollUntil(
      async () => received.length,
      (n) => n > 0,
    );
    expect(received.length).toBeGreaterThan(0);
  });

  it('breaks no rule of its Content-Security-Policy while drawing and acting', () => {
    expect(consoleErrors).toEqual([]);
  });
});
