import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TRANSPORTS, type Transport } from '../support/transports.js';
import { uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';

const env = useService();

describe.each(TRANSPORTS)('ReactivateTickets over %s', (_name, connect) => {
  let api: Transport;
  beforeAll(() => {
    api = connect(env.service);
  });
  afterAll(() => api.close());

  it('lists ids that are not resolved tickets of the queue in failed_ticket_ids', async () => {
    const unknown = [uuid(), uuid()];
    const res = await api.reactivateTickets('test.basic', unknown);
    expect(res.ok).toBe(true);
    if (res.ok) expect([...res.value.failedTicketIds].sort()).toEqual([...unknown].sort());
  });

  it('does not fail a ticket that is already active', async () => {
    const id = uuid();
    await api.createTicket({ id, queueId: 'test.basic' });
    const gone = uuid();
    const res = await api.reactivateTickets('test.basic', [id, gone]);
    expect(res.ok && res.value.failedTicketIds).toEqual([gone]);
  });

  it('answers an empty list for an empty request', async () => {
    const res = await api.reactivateTickets('test.basic', []);
    expect(res.ok && res.value.failedTicketIds).toEqual([]);
  });
});
