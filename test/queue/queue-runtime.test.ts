// The core and the queue runtime in process, on the in-memory store: the lifecycle moves of the spec's
// state table, answered by the same code the servers call, in milliseconds. The transports are tested over
// real sockets elsewhere; these pin down what the core and the runtime decide.
import { create } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CancelTicketRequestSchema,
  ClearQueuePoolRequestSchema,
  CreateTicketRequestSchema,
  ReactivateTicketsRequestSchema,
} from '../../src/gen/matchmaker/core/v1/service_pb.js';
import type { Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { ServiceError } from '../../src/errors.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { party, uuid } from '../support/fixtures.js';
import { inProcessService, type InProcessService } from '../support/in-process.js';
import { BASIC_QUEUE } from '../support/service.js';
import { duelQueue } from '../support/queues.js';

const services: InProcessService[] = [];
afterEach(async () => {
  await Promise.all(services.splice(0).map((s) => s.stop()));
});

function start(queues: Record<string, string>, store?: MemoryStore): InProcessService {
  const service = inProcessService(queues, store);
  services.push(service);
  return service;
}

const createTicket = (s: InProcessService, queueId: string, id = uuid(), players = 1) =>
  s.core.createTicket(create(CreateTicketRequestSchema, { ticket: { id, queueId, engineInput: party(players) } }));
const cancelTicket = (s: InProcessService, queueId: string, ticketId: string) =>
  s.core.cancelTicket(create(CancelTicketRequestSchema, { queueId, ticketId }));

/** Resolves once the store holds an outcome of the queue that `match` accepts. */
async function outcome(s: InProcessService, queueId: string, match: (o: Outcome) => boolean, timeoutMs = 5_000): Promise<Outcome> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const found = s.store.queueOutcomes(queueId, 0n, 10_000).find(match);
    if (found) return found;
    if (Date.now() > until) throw new Error(`no such outcome of ${queueId} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The ticket ids of a match.created outcome. */
const matchedTicketIds = (o: Outcome) => (o.payload.case === 'matchCreated' ? o.payload.value.match!.tickets.map((t) => t.id) : []);

const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'OK',
    (err: unknown) => (err instanceof ServiceError ? err.code : `not a ServiceError: ${String(err)}`),
  );

describe('the core and the queue runtime, in process', () => {
  it('answers CreateTicket only once its commit is durable, and makes one pool entry per id', async () => {
    const store = new MemoryStore({ commitDelayMs: 40 });
    const s = start({ 'rt.basic': BASIC_QUEUE }, store);
    const id = uuid();
    let answered = false;
    const first = createTicket(s, 'rt.basic', id).then(() => (answered = true));
    const retry = createTicket(s, 'rt.basic', id.toUpperCase());
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(answered).toBe(false);
    expect(store.loadQueue('rt.basic').tickets).toEqual([]);
    await Promise.all([first, retry]);
    expect([...store.loadQueue('rt.basic').tickets].map((t) => t.ticketId)).toEqual([id]);
    expect(s.registry.get('rt.basic')!.activeTicketCount).toBe(1);
  });

  it('matches on a tick; a later cancel fails with FAILED_PRECONDITION and the match outcome stays', async () => {
    const s = start({ 'rt.duel': duelQueue(10) });
    const [a, b] = [uuid(), uuid()];
    await createTicket(s, 'rt.duel', a);
    await createTicket(s, 'rt.duel', b);
    const matched = await outcome(s, 'rt.duel', (o) => o.kind === 'match.created');
    const ids = matchedTicketIds(matched);
    expect(ids.sort()).toEqual([a, b].sort());
    expect(await codeOf(cancelTicket(s, 'rt.duel', a))).toBe('FAILED_PRECONDITION');
    expect(s.registry.get('rt.duel')!.resolvedTicketCount).toBe(2);
  });

  it('never matches a ticket after its cancel succeeded', async () => {
    const s = start({ 'rt.duel': duelQueue(10) });
    const cancelled = uuid();
    await createTicket(s, 'rt.duel', cancelled);
    await cancelTicket(s, 'rt.duel', cancelled);
    const [b, c] = [uuid(), uuid()];
    await createTicket(s, 'rt.duel', b);
    await createTicket(s, 'rt.duel', c);
    const matched = await outcome(s, 'rt.duel', (o) => o.kind === 'match.created');
    const ids = matchedTicketIds(matched);
    expect(ids.sort()).toEqual([b, c].sort());
  });

  it('reactivates a resolved ticket and fails an unknown one', async () => {
    const s = start({ 'rt.duel': duelQueue(10) });
    const [a, b] = [uuid(), uuid()];
    await createTicket(s, 'rt.duel', a);
    await createTicket(s, 'rt.duel', b);
    await outcome(s, 'rt.duel', (o) => o.kind === 'match.created');
    // Alone in a duel queue, the reactivated ticket waits in the pool.
    const unknown = uuid();
    const answer = await s.core.reactivateTickets(
      create(ReactivateTicketsRequestSchema, { queueId: 'rt.duel', ticketIds: [a, unknown, a] }),
    );
    expect(answer.failedTicketIds).toEqual([unknown]);
    expect(s.registry.get('rt.duel')!.activeTicketCount).toBe(1);
    expect(s.registry.get('rt.duel')!.lookupTicket(a)?.state).toBe('active');
  });

  it('clears the pool with ticket.removed CLEAR_COMMAND outcomes, batched by batch_chunk_size', async () => {
    const queue = `${BASIC_QUEUE}  outcomes:\n    batch_chunk_size: 2\n`;
    const s = start({ 'rt.clear': queue });
    const ids = [uuid(), uuid(), uuid()];
    for (const id of ids) await createTicket(s, 'rt.clear', id);
    const answer = await s.core.clearQueuePool(create(ClearQueuePoolRequestSchema, { queueId: 'rt.clear' }));
    expect(answer.ticketsCleared).toBe(3n);
    const removed = s.store.queueOutcomes('rt.clear', 0n, 10).filter((o) => o.kind === 'ticket.removed');
    const batches = removed.map((o) => (o.payload.case === 'ticketsRemoved' ? o.payload.value : undefined)!);
    expect(batches.flatMap((b) => b.ticketIds)).toEqual(ids);
    expect(batches.map((b) => [b.batch!.chunkIndex, b.batch!.chunkCount])).toEqual([
      [0, 2],
      [1, 2],
    ]);
    expect(new Set(batches.map((b) => b.batch!.operationId)).size).toBe(1);
    expect(s.registry.get('rt.clear')!.activeTicketCount).toBe(0);
  });

  it('restores active and resolved tickets on a restart over the same store', async () => {
    const store = new MemoryStore();
    const first = start({ 'rt.duel': duelQueue(10), 'rt.basic': BASIC_QUEUE }, store);
    await createTicket(first, 'rt.duel', uuid());
    await createTicket(first, 'rt.duel', uuid());
    await outcome(first, 'rt.duel', (o) => o.kind === 'match.created');
    const waiting = uuid();
    await createTicket(first, 'rt.basic', waiting);
    await first.stop();
    const second = start({ 'rt.duel': duelQueue(10), 'rt.basic': BASIC_QUEUE }, store);
    expect(second.registry.get('rt.duel')!.resolvedTicketCount).toBe(2);
    expect(second.registry.get('rt.basic')!.lookupTicket(waiting)?.state).toBe('active');
    // The same id again is the same ticket, not a second entry.
    await createTicket(second, 'rt.basic', waiting);
    expect(second.registry.get('rt.basic')!.activeTicketCount).toBe(1);
  });

  it('removes, on a hot reload, the parties a smaller team no longer admits, with RULESET_PARAMS_CHANGED', async () => {
    const s = start({ 'rt.reload': duelQueue(3_600_000, { ruleset: { team_size: 2 } }) });
    const [pair, solo] = [uuid(), uuid()];
    await createTicket(s, 'rt.reload', pair, 2);
    await createTicket(s, 'rt.reload', solo, 1);
    s.setQueues({ 'rt.reload': duelQueue(3_600_000) });
    const removed = await outcome(s, 'rt.reload', (o) => o.kind === 'ticket.removed');
    expect(removed.payload.case === 'ticketsRemoved' && removed.payload.value.ticketIds).toEqual([pair]);
    expect(s.registry.get('rt.reload')!.lookupTicket(solo)?.state).toBe('active');
    expect(s.registry.get('rt.reload')!.lookupTicket(pair)).toBeUndefined();
  });

  it('answers with the spec’s error codes', async () => {
    const s = start({ 'rt.basic': BASIC_QUEUE });
    expect(await codeOf(s.core.createTicket(create(CreateTicketRequestSchema, { ticket: { id: 'nope', queueId: 'rt.basic' } })))).toBe(
      'INVALID_ARGUMENT',
    );
    expect(await codeOf(createTicket(s, 'rt.none'))).toBe('NOT_FOUND');
    expect(await codeOf(createTicket(s, 'rt.basic', uuid(), 6))).toBe('FAILED_PRECONDITION');
    expect(await codeOf(cancelTicket(s, 'rt.none', uuid()))).toBe('FAILED_PRECONDITION');
    expect(await codeOf(cancelTicket(s, 'rt.basic', uuid()))).toBe('OK');
    expect(await codeOf(s.core.clearQueuePool(create(ClearQueuePoolRequestSchema, { queueId: 'rt.none' })))).toBe('NOT_FOUND');
    s.setQueues({});
    expect(await codeOf(createTicket(s, 'rt.basic'))).toBe('FAILED_PRECONDITION');
  });
});
