// Requests keep flowing while a long tick runs on another thread, and a ticket cancelled during a tick is
// never matched. A large pool that can never match (no acceptable host) makes every tick take a while.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { queueFileSchema } from '../../src/config/queue-config.js';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { parseTicketEngineInput } from '../../src/engine/engine-input.js';
import { createLogger } from '../../src/log.js';
import { QueueRuntime } from '../../src/queue/queue-runtime.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { engineInput, uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { alike, seedTickets } from '../support/seed.js';
import { removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';
import { grpcTransport, httpRequest, type Transport } from '../support/transports.js';

const QUEUE = duelQueue(10, 80);
const BACKGROUND = 200_000;

let service: TestService;
let api: Transport;
beforeAll(async () => {
  const queueDir = tempDir('queues');
  const dataDir = tempDir('data');
  writeQueues(queueDir, { 'tick.busy': QUEUE });
  // Seed the store directly: tickets whose only host is 500 ms away never match.
  const far = engineInput({ players: [{ playerId: 'far', mmr: 0.5, latencies: { far: 500 } }] });
  await seedTickets(dataDir, 'tick.busy', alike(BACKGROUND, far));
  service = await startService({ queueDir, dataDir, env: { LOG_LEVEL: 'debug' }, startTimeoutMs: 90_000 });
  api = grpcTransport(service);
}, 120_000);
afterAll(async () => {
  api?.close();
  await service?.stop();
  if (service) removeDirs(service.dataDir, service.queueDir);
});

describe('ticks run off the event loop', () => {
  it('never matches a ticket cancelled during a tick, and matches the others exactly once', { timeout: 120_000 }, async () => {
    const near = (name: string) => engineInput({ players: [{ playerId: name, mmr: 0.5, latencies: { near: 10 } }] });
    const cancelled: string[] = [];
    const kept: string[] = [];
    for (let i = 0; i < 300; i++) {
      const [a, b] = [uuid(), uuid()];
      expect((await api.createTicket({ id: a, queueId: 'tick.busy', engineInput: near(`a${i}`) })).ok).toBe(true);
      expect((await api.createTicket({ id: b, queueId: 'tick.busy', engineInput: near(`b${i}`) })).ok).toBe(true);
      // Cancel a little later, at a random point of the next tick interval (10 ms), so some cancels land
      // while the tick holding a and b runs. Ticks of the background pool take a few ms on a fast machine,
      // so a wider spread (40 ms) made that rare enough for the test to fail now and then.
      await new Promise((r) => setTimeout(r, Math.random() * 12));
      const res = await api.cancelTicket('tick.busy', a);
      (res.ok ? cancelled : kept).push(a);
      kept.push(b);
    }
    // Let the last ticks finish, then look at every match.
    await new Promise((r) => setTimeout(r, 500));
    const outcomes = (await httpRequest(service, 'GET', '/admin/v1/outcomes?queue_id=tick.busy&limit=10000')).body.outcomes as {
      matchCreated?: { match: { tickets: { id: string }[] } };
    }[];
    const matched = outcomes.flatMap((o) => o.matchCreated?.match.tickets.map((t) => t.id) ?? []);
    expect(new Set(matched).size).toBe(matched.length);
    for (const id of cancelled) expect(matched).not.toContain(id);
    // Ticks were long (the background pool), and cancels did land during them: the dropped-match path ran.
    const ticks = service.logs.filter((l) => l.msg === 'tick').map((l) => l.ms as number);
    expect(Math.max(...ticks)).toBeGreaterThan(5);
    expect(service.logs.some((l) => l.msg === 'match dropped: one of its tickets left the pool during the tick')).toBe(true);
    expect(matched.length).toBeGreaterThan(0);
  });
});

describe('a ticket matched before its own commit is durable', () => {
  it('is matched with its bytes from memory, and its match is recorded after its create', { timeout: 30_000 }, async () => {
    // Every commit settles 300 ms late, in order: the 10 ms tick matches the two tickets while their create
    // commits are still in flight, so the store cannot answer for them yet.
    const store = new MemoryStore({ commitDelayMs: 300 });
    const config = queueFileSchema.parse(parse(duelQueue(10))).config;
    const runtime = new QueueRuntime('tick.held', config, store, createLogger('silent'));
    runtime.start();
    try {
      const created = ['first', 'second'].map((name) => {
        const input = parseTicketEngineInput(engineInput({ players: [{ playerId: name, mmr: 0.5 }] }), name, 'engine_input');
        const ticket = create(TicketSchema, {
          id: uuid(),
          queueId: 'tick.held',
          createdAt: timestampNow(),
          metadata: new TextEncoder().encode(name),
        });
        return { ticket, done: runtime.createTicket(ticket, toBinary(TicketSchema, ticket), input) };
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(runtime.activeTicketCount).toBe(0); // matched already, with both creates still in flight
      await Promise.all(created.map((c) => c.done));
      await store.whenDurable();
      const [outcome] = store.queueOutcomes('tick.held', 0n, 10);
      expect(outcome?.payload.case).toBe('matchCreated');
      const tickets = outcome!.payload.case === 'matchCreated' ? (outcome!.payload.value.match?.tickets ?? []) : [];
      expect(tickets.map((t) => new TextDecoder().decode(t.metadata)).sort()).toEqual(['first', 'second']);
      for (const { ticket } of created) expect(runtime.lookupTicket(ticket.id)?.state).toBe('resolved');
    } finally {
      await runtime.stop();
      await store.close();
    }
  });
});

describe('a tick that forms many matches', () => {
  it('resolves every one of them, across many time slices, each ticket in exactly one match', { timeout: 120_000 }, async () => {
    const queueDir = tempDir('queues');
    const dataDir = tempDir('data');
    writeQueues(queueDir, { 'tick.many': duelQueue(200, 80) });
    // 40,000 tickets that all fit 1v1 matches: the first tick after the restart forms 20,000 of them.
    const tickets = Array.from({ length: 40_000 }, (_, i) => ({
      id: uuid(),
      engineInput: engineInput({ players: [{ playerId: `p${i}`, mmr: (i % 1000) / 1000, latencies: { near: 10 } }] }),
    }));
    await seedTickets(dataDir, 'tick.many', tickets);
    const ids = tickets.map((t) => t.id);
    const service = await startService({ queueDir, dataDir, env: { LOG_LEVEL: 'debug' }, startTimeoutMs: 90_000 });
    try {
      const firstTick = await pollUntil(
        async () => service.logs.find((l) => l.msg === 'tick'),
        (l) => l !== undefined,
        60_000,
      );
      expect(firstTick!.matches).toBe(20_000);
      // The admin listing answers at most 10,000 outcomes a page.
      const matched: string[] = [];
      for (let after = '0'; ; ) {
        const page = (await httpRequest(service, 'GET', `/admin/v1/outcomes?queue_id=tick.many&limit=10000&after_sequence=${after}`)).body
          .outcomes as {
          producerSequence: string;
          matchCreated?: { match: { tickets: { id: string }[] } };
        }[];
        if (page.length === 0) break;
        matched.push(...page.flatMap((o) => o.matchCreated?.match.tickets.map((t) => t.id) ?? []));
        after = page.at(-1)!.producerSequence;
      }
      expect(matched.length).toBe(40_000);
      expect(new Set(matched)).toEqual(new Set(ids));
    } finally {
      await service.stop();
      removeDirs(queueDir, dataDir);
    }
  });
});
