import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpcTransport, httpRequest, type Transport } from '../support/transports.js';
import { engineInput, party, uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { alike, seedTickets, type SeedTicket } from '../support/seed.js';
import { removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';

const queueFile = (rulesets: string) => `
config:
  tick_interval_ms: 3600000
  rulesets:
${rulesets}
`;
const DUEL = `    - id: duel
      teams: 2
      team_size: 1
`;
const TRIO = `    - id: trio
      teams: 2
      team_size: 3
`;

let service: TestService;
let api: Transport;
beforeAll(async () => {
  service = await startService({ queues: { 'hot.one': queueFile(DUEL) } });
  api = grpcTransport(service);
});
afterAll(async () => {
  api.close();
  await service.stop();
  removeDirs(service.dataDir, service.queueDir);
});

/** Hot reload is asynchronous (file watch + debounce): retry until the condition holds. */
const eventually = async (attempt: () => Promise<boolean>) => expect(await pollUntil(attempt, Boolean)).toBe(true);

describe('queue files are hot-reloaded', () => {
  it('starts a queue whose file appears', async () => {
    expect((await api.createTicket({ id: uuid(), queueId: 'hot.two' })).ok).toBe(false);
    writeFileSync(join(service.queueDir, 'hot.two.yaml'), queueFile(DUEL));
    await eventually(async () => (await api.createTicket({ id: uuid(), queueId: 'hot.two' })).ok);
  });

  it('applies a valid change in place, keeping the pool', async () => {
    const kept = uuid();
    expect((await api.createTicket({ id: kept, queueId: 'hot.one' })).ok).toBe(true);
    writeFileSync(join(service.queueDir, 'hot.one.yaml'), queueFile(DUEL + TRIO));
    await eventually(async () => (await api.createTicket({ id: uuid(), queueId: 'hot.one', rulesetIds: ['trio'] })).ok);
    expect((await httpRequest(service, 'GET', `/admin/v1/queues/hot.one/tickets/${kept}`)).status).toBe(200);
  });

  it('refuses an invalid change with a message naming the file and the path, and keeps the last good config', async () => {
    writeFileSync(join(service.queueDir, 'hot.one.yaml'), queueFile(DUEL + TRIO.replace('team_size: 3', 'team_size: three')));
    const refused = await service.waitForLog(
      (l) => typeof l.msg === 'string' && l.msg.includes('hot.one.yaml') && l.msg.includes('config.rulesets[1].team_size'),
    );
    expect(refused.level).toBe(50);
    // The previous version (with "trio") is still in force.
    expect((await api.createTicket({ id: uuid(), queueId: 'hot.one', rulesetIds: ['trio'] })).ok).toBe(true);

    writeFileSync(join(service.queueDir, 'hot.one.yaml'), 'config: [unclosed');
    await service.waitForLog((l) => typeof l.msg === 'string' && l.msg.includes('hot.one.yaml') && l.msg.includes('not valid YAML'));
    expect((await api.createTicket({ id: uuid(), queueId: 'hot.one', rulesetIds: ['trio'] })).ok).toBe(true);
  });

  it('retires a queue whose file is deleted: writes get QUEUE_RETIRING and the pool is removed with QUEUE_RETIRED', async () => {
    const ids = [uuid(), uuid()];
    for (const id of ids) expect((await api.createTicket({ id, queueId: 'hot.two' })).ok).toBe(true);
    rmSync(join(service.queueDir, 'hot.two.yaml'));
    await eventually(async () => {
      const res = await api.createTicket({ id: uuid(), queueId: 'hot.two' });
      return !res.ok && res.code === 'FAILED_PRECONDITION' && res.reason === 'QUEUE_RETIRING';
    });
    await eventually(async () => {
      const outcomes = (await httpRequest(service, 'GET', '/admin/v1/outcomes?queue_id=hot.two')).body.outcomes as {
        kind: string;
        ticketsRemoved?: { ticketIds: string[]; reason: string };
      }[];
      const removed = outcomes.filter((o) => o.kind === 'ticket.removed' && o.ticketsRemoved!.reason === 'QUEUE_RETIRED');
      return removed.flatMap((o) => o.ticketsRemoved!.ticketIds).filter((id) => ids.includes(id)).length === ids.length;
    });
  });
});

interface SeededQueue {
  queueId: string;
  /** The queue's file. */
  yaml: string;
  tickets: SeedTicket[];
  startTimeoutMs?: number;
}

/** A service of its own, started on a store seeded with one queue's tickets, for `body`; stopped and removed after. */
async function withSeededService(
  { queueId, yaml, tickets, startTimeoutMs }: SeededQueue,
  body: (service: TestService, grpc: Transport, queueDir: string) => Promise<void>,
): Promise<void> {
  const queueDir = tempDir('queues');
  const dataDir = tempDir('data');
  writeQueues(queueDir, { [queueId]: yaml });
  await seedTickets(dataDir, queueId, tickets);
  const service = await startService({ queueDir, dataDir, startTimeoutMs });
  const grpc = grpcTransport(service);
  try {
    await body(service, grpc, queueDir);
  } finally {
    grpc.close();
    await service.stop();
    removeDirs(queueDir, dataDir);
  }
}

describe('a hot reload of a large pool', () => {
  it('rebuilds the pool in slices while answering requests, then matches under the new configuration', { timeout: 120_000 }, async () => {
    const big = (maxLatencyMs: number) => duelQueue(50, maxLatencyMs);
    // 100,000 tickets that never match (host 500 ms away), and b, whose 10 ms host is over the first
    // configuration's 5 ms bound.
    const far = engineInput({ players: [{ playerId: 'far', mmr: 0.9, latencies: { near: 500 } }] });
    const near = engineInput({ players: [{ playerId: 'near', mmr: 0.1, latencies: { near: 10 } }] });
    const [b, c, e] = [uuid(), uuid(), uuid()];
    const seeded = {
      queueId: 'hot.big',
      yaml: big(5),
      tickets: [...alike(100_000, far), { id: b, engineInput: near }],
      startTimeoutMs: 90_000,
    };
    await withSeededService(seeded, async (service, grpc, queueDir) => {
      await service.waitForLog((l) => l.msg === 'pool restored');
      expect((await grpc.createTicket({ id: c, queueId: 'hot.big', engineInput: near })).ok).toBe(true);
      writeFileSync(join(queueDir, 'hot.big.yaml'), big(80));
      await service.waitForLog((l) => l.msg === 'queue config reloaded' && l.queue === 'hot.big');
      // Answered while the pool is rebuilt: c's cancel holds, e joins.
      expect((await grpc.cancelTicket('hot.big', c)).ok).toBe(true);
      expect((await grpc.createTicket({ id: e, queueId: 'hot.big', engineInput: near })).ok).toBe(true);
      const answeredAt = Date.now();
      const rebuilt = await service.waitForLog((l) => l.msg === 'pool rebuilt for the new configuration');
      expect(rebuilt.time as number).toBeGreaterThan(answeredAt);

      const outcomes = async () =>
        (await httpRequest(service, 'GET', '/admin/v1/outcomes?queue_id=hot.big&limit=100')).body.outcomes as {
          kind: string;
          matchCreated?: { match: { tickets: { id: string }[] } };
        }[];
      const list = await pollUntil(outcomes, (l) => l.some((o) => o.kind === 'match.created'), 60_000);
      expect(list.filter((o) => o.kind === 'match.created').map((o) => o.matchCreated!.match.tickets.map((t) => t.id).sort())).toEqual([
        [b, e].sort(),
      ]);
    });
  });

  it('takes out the tickets a changed ruleset no longer admits in slices, answering requests meanwhile', { timeout: 120_000 }, async () => {
    const pairs = (teamSize: number) => queueFile(`    - id: pairs\n      teams: 2\n      team_size: ${teamSize}\n`);
    // 60,000 parties of two, which a team of one no longer admits, and one solo ticket, which it does.
    const PARTIES = 60_000;
    const partyIds = [...alike(PARTIES, party(2))];
    const solo = uuid();
    const seeded = {
      queueId: 'hot.evict',
      yaml: pairs(2),
      tickets: [...partyIds, { id: solo, engineInput: party(1) }],
      startTimeoutMs: 90_000,
    };
    await withSeededService(seeded, async (service, grpc, queueDir) => {
      const activeTickets = async () =>
        ((await httpRequest(service, 'GET', '/admin/v1/queues')).body.queues as { queueId: string; activeTickets: number }[]).find(
          (q) => q.queueId === 'hot.evict',
        )!.activeTickets;
      await service.waitForLog((l) => l.msg === 'pool restored');
      writeFileSync(join(queueDir, 'hot.evict.yaml'), pairs(1));
      // While the removals go on, requests are answered and the pool is seen part-way: a removal that held
      // the event loop would only ever show all 60,001 tickets or the last one.
      const seen = new Set<number>();
      const joined = uuid();
      let created = false;
      let answeredMidway = false;
      const deadline = Date.now() + 60_000;
      for (let count = await activeTickets(); count > (created ? 2 : 1) && Date.now() < deadline; count = await activeTickets()) {
        seen.add(count);
        if (count < PARTIES + 1 && !created) {
          expect((await grpc.createTicket({ id: joined, queueId: 'hot.evict', engineInput: party(1) })).ok).toBe(true);
          created = true;
          answeredMidway = (await activeTickets()) > 2;
        }
      }
      expect([...seen].some((n) => n > 2 && n < PARTIES + 1)).toBe(true);
      expect(answeredMidway).toBe(true);

      // Every party left with its outcome, once (the last slice's commit may still be on its way); the solo
      // ticket and the one that joined stay.
      const removedIds = async () => {
        const removed: string[] = [];
        let after = 0n;
        for (;;) {
          const page = (await httpRequest(service, 'GET', `/admin/v1/outcomes?queue_id=hot.evict&after_sequence=${after}&limit=10000`)).body
            .outcomes as {
            producerSequence: string;
            ticketsRemoved?: { ticketIds: string[]; reason: string };
          }[];
          if (page.length === 0) return removed;
          for (const o of page) if (o.ticketsRemoved?.reason === 'RULESET_PARAMS_CHANGED') removed.push(...o.ticketsRemoved.ticketIds);
          after = BigInt(page.at(-1)!.producerSequence);
        }
      };
      const removed = await pollUntil(removedIds, (ids) => ids.length >= PARTIES);
      expect(removed.length).toBe(PARTIES);
      expect(new Set(removed)).toEqual(new Set(partyIds.map((t) => t.id)));
      expect(await activeTickets()).toBe(2);
      expect((await httpRequest(service, 'GET', `/admin/v1/queues/hot.evict/tickets/${solo}`)).status).toBe(200);
      expect((await httpRequest(service, 'GET', `/admin/v1/queues/hot.evict/tickets/${joined}`)).status).toBe(200);
    });
  });

  it('checks the stored tickets against a queue file that changed while the service was down', { timeout: 60_000 }, async () => {
    // Stored as a service with teams of two had acknowledged them; the file now says teams of one.
    const parties = [...alike(3, party(2))];
    const solo = uuid();
    await withSeededService(
      { queueId: 'hot.down', yaml: queueFile(DUEL), tickets: [...parties, { id: solo, engineInput: party(1) }] },
      async (service) => {
        const removed = await pollUntil(
          async () =>
            (
              (await httpRequest(service, 'GET', '/admin/v1/outcomes?queue_id=hot.down')).body.outcomes as {
                ticketsRemoved?: { ticketIds: string[]; reason: string };
              }[]
            )
              .filter((o) => o.ticketsRemoved?.reason === 'RULESET_PARAMS_CHANGED')
              .flatMap((o) => o.ticketsRemoved!.ticketIds),
          // Each slice's removals are committed on their own: wait for all of them.
          (ids) => ids.length >= parties.length,
        );
        expect(removed.sort()).toEqual(parties.map((t) => t.id).sort());
        expect((await httpRequest(service, 'GET', `/admin/v1/queues/hot.down/tickets/${solo}`)).status).toBe(200);
        for (const { id } of parties)
          expect((await httpRequest(service, 'GET', `/admin/v1/queues/hot.down/tickets/${id}`)).status).toBe(404);
      },
    );
  });
});
