import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, TRANSPORTS, type Transport } from '../support/transports.js';
import { party, uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';

const env = useService();

const backfillCount = async () => {
  const res = await httpRequest(env.service, 'GET', '/admin/v1/queues');
  return (res.body.queues as { queueId: string; backfillRequests: number }[]).find((q) => q.queueId === 'test.basic')!.backfillRequests;
};

describe.each(TRANSPORTS)('backfill requests over %s', (_name, connect) => {
  let api: Transport;
  beforeAll(async () => {
    api = connect(env.service);
    await api.clearQueuePool('test.basic');
  });
  afterAll(() => api.close());

  it('CreateBackfillRequest generates an id when none is given', async () => {
    const res = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid(), slotsRequested: 2, engineInput: party(3) });
    expect(res.ok).toBe(true);
    if (res.ok) expect(res.value.backfillId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('keeps a caller-supplied id', async () => {
    const id = uuid();
    const res = await api.createBackfillRequest({ id, queueId: 'test.basic', matchId: uuid() });
    expect(res.ok && res.value.backfillId).toBe(id);
  });

  it('replaces the open request of the same match', async () => {
    await api.clearQueuePool('test.basic');
    const matchId = uuid();
    const first = await api.createBackfillRequest({ queueId: 'test.basic', matchId, slotsRequested: 3 });
    const second = await api.createBackfillRequest({ queueId: 'test.basic', matchId, slotsRequested: 1 });
    expect(first.ok && second.ok).toBe(true);
    expect(await backfillCount()).toBe(1);
    if (!first.ok || !second.ok) return;
    // The replaced request is gone: cancelling it reports it as failed, the new one cancels.
    const cancel = await api.cancelBackfillRequests('test.basic', [first.value.backfillId, second.value.backfillId]);
    expect(cancel.ok && cancel.value.failedBackfillIds).toEqual([first.value.backfillId]);
    expect(await backfillCount()).toBe(0);
  });

  it('CancelBackfillRequests removes the listed requests and reports unknown ids', async () => {
    await api.clearQueuePool('test.basic');
    const a = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid() });
    const b = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid() });
    if (!a.ok || !b.ok) throw new Error('create failed');
    const unknown = uuid();
    const res = await api.cancelBackfillRequests('test.basic', [a.value.backfillId, unknown]);
    expect(res.ok && res.value.failedBackfillIds).toEqual([unknown]);
    expect(await backfillCount()).toBe(1);
  });

  it('treats slots_requested 0 as 1', async () => {
    const res = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid(), slotsRequested: 0 });
    expect(res.ok).toBe(true);
  });
});
