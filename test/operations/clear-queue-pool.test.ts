import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, TRANSPORTS, type Transport } from '../support/transports.js';
import { uuid } from '../support/fixtures.js';
import { duelQueue } from '../support/queues.js';
import { useService } from '../support/service.js';
import type { OutcomeJson } from '../support/outcomes.js';

const env = useService({
  queues: {
    'test.clear': duelQueue(3600000, { outcomes: { batch_chunk_size: 2 } }),
  },
});

async function outcomesAfter(sequence: bigint): Promise<OutcomeJson[]> {
  const res = await httpRequest(env.service, 'GET', `/admin/v1/outcomes?queue_id=test.clear&after_sequence=${sequence}`);
  return res.body.outcomes as OutcomeJson[];
}

async function lastSequence(): Promise<bigint> {
  const all = (await httpRequest(env.service, 'GET', '/admin/v1/outcomes?limit=10000')).body.outcomes as OutcomeJson[];
  return all.length === 0 ? 0n : BigInt(all[all.length - 1]!.producerSequence);
}

describe.each(TRANSPORTS)('ClearQueuePool over %s', (_name, connect) => {
  let api: Transport;
  beforeAll(() => {
    api = connect(env.service);
  });
  afterAll(() => api.close());

  it('empties tickets and backfill requests, answers the counts and records removal outcomes in chunks', async () => {
    await api.clearQueuePool('test.clear');
    const since = await lastSequence();
    const tickets = [uuid(), uuid(), uuid()];
    for (const id of tickets) expect((await api.createTicket({ id, queueId: 'test.clear' })).ok).toBe(true);
    const backfill = await api.createBackfillRequest({ queueId: 'test.clear', matchId: uuid() });
    expect(backfill.ok).toBe(true);

    const res = await api.clearQueuePool('test.clear');
    expect(res.ok && res.value).toMatchObject({ ticketsCleared: 3n, backfillRequestsCleared: 1n });
    for (const id of tickets) expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/test.clear/tickets/${id}`)).status).toBe(404);

    const outcomes = await outcomesAfter(since);
    const removed = outcomes.filter((o) => o.kind === 'ticket.removed');
    // Three ids in chunks of two: two outcomes of one operation.
    expect(removed).toHaveLength(2);
    expect(removed.flatMap((o) => o.ticketsRemoved!.ticketIds).sort()).toEqual([...tickets].sort());
    expect(new Set(removed.map((o) => o.ticketsRemoved!.batch.operationId)).size).toBe(1);
    expect(removed.map((o) => o.ticketsRemoved!.batch.chunkCount)).toEqual([2, 2]);
    expect(removed.map((o) => o.ticketsRemoved!.batch.chunkIndex ?? 0)).toEqual([0, 1]);
    for (const o of removed) expect(o.ticketsRemoved!.reason).toBe('CLEAR_COMMAND');

    const backfills = outcomes.filter((o) => o.kind === 'backfill.removed');
    expect(backfills).toHaveLength(1);
    expect(backfills[0]!.backfillRequestsRemoved).toMatchObject({
      backfillRequestIds: [backfill.ok && backfill.value.backfillId],
      reason: 'CLEAR_COMMAND',
    });

    // Sequences are gap-free and increasing for this producer.
    const seqs = outcomes.map((o) => BigInt(o.producerSequence));
    for (const [i, s] of seqs.entries()) expect(s).toBe(since + BigInt(i) + 1n);
    expect(new Set(outcomes.map((o) => o.producerId)).size).toBe(1);
  });

  it('answers zero counts and records nothing for an empty pool', async () => {
    await api.clearQueuePool('test.clear');
    const since = await lastSequence();
    const res = await api.clearQueuePool('test.clear');
    expect(res.ok && res.value).toMatchObject({ ticketsCleared: 0n, backfillRequestsCleared: 0n });
    expect(await outcomesAfter(since)).toEqual([]);
  });
});
