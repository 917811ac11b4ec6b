import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, TRANSPORTS, type Transport } from '../support/transports.js';
import { party, uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';

const env = useService();

describe.each(TRANSPORTS)('CancelTicket over %s', (_name, connect) => {
  let api: Transport;
  beforeAll(() => {
    api = connect(env.service);
  });
  afterAll(() => api.close());

  it('removes an active ticket from the pool', async () => {
    const id = uuid();
    expect((await api.createTicket({ id, queueId: 'test.basic', engineInput: party(1) })).ok).toBe(true);
    const res = await api.cancelTicket('test.basic', id);
    expect(res.ok).toBe(true);
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    expect(stored.status).toBe(404);
  });

  it('succeeds again for a ticket that is no longer in the pool (a retried cancel is safe)', async () => {
    const id = uuid();
    expect((await api.createTicket({ id, queueId: 'test.basic' })).ok).toBe(true);
    expect((await api.cancelTicket('test.basic', id)).ok).toBe(true);
    expect((await api.cancelTicket('test.basic', id)).ok).toBe(true);
    expect((await api.cancelTicket('test.basic', uuid())).ok).toBe(true);
  });

  it('leaves other tickets in place', async () => {
    const keep = uuid();
    const drop = uuid();
    await api.createTicket({ id: keep, queueId: 'test.basic' });
    await api.createTicket({ id: drop, queueId: 'test.basic' });
    await api.cancelTicket('test.basic', drop);
    expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${keep}`)).status).toBe(200);
  });

  it('a ticket can be created again after it was cancelled', async () => {
    const id = uuid();
    await api.createTicket({ id, queueId: 'test.basic' });
    await api.cancelTicket('test.basic', id);
    expect((await api.createTicket({ id, queueId: 'test.basic' })).ok).toBe(true);
    expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`)).body.state).toBe('active');
  });
});
