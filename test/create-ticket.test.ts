import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpRequest, TRANSPORTS, type Transport } from './support/transports.js';
import { party, uuid } from './support/fixtures.js';
import { useService } from './support/service.js';

const env = useService();

const poolSize = async (queueId: string) => {
  const res = await httpRequest(env.service, 'GET', '/admin/v1/queues');
  return (res.body.queues as { queueId: string; activeTickets: number }[]).find((q) => q.queueId === queueId)!.activeTickets;
};

describe.each(TRANSPORTS)('CreateTicket over %s', (_name, connect) => {
  let api: Transport;
  beforeAll(() => {
    api = connect(env.service);
  });
  afterAll(() => api.close());

  it('stores the ticket and answers its id', async () => {
    const id = uuid();
    const metadata = new TextEncoder().encode('correlation-42');
    const res = await api.createTicket({ id, queueId: 'test.basic', engineInput: party(2), metadata, rulesetIds: ['5v5'] });
    expect(res).toEqual({ ok: true, value: expect.objectContaining({ ticketId: id }) });
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    expect(stored.status).toBe(200);
    expect(stored.body.state).toBe('active');
    const ticket = stored.body.ticket as Record<string, unknown>;
    expect(ticket.metadata).toBe(Buffer.from(metadata).toString('base64'));
    expect(ticket.rulesetIds).toEqual(['5v5']);
  });

  it('overwrites created_at with the server time', async () => {
    const id = uuid();
    const before = Date.now();
    const res = await api.createTicket({ id, queueId: 'test.basic', createdAt: { seconds: 1n, nanos: 0 } });
    expect(res.ok).toBe(true);
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    const createdAt = Date.parse((stored.body.ticket as { createdAt: string }).createdAt);
    expect(createdAt).toBeGreaterThanOrEqual(before - 1000);
    expect(createdAt).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('accepts a ticket without engine_input (one player) and compares UUIDs case-insensitively', async () => {
    const id = uuid();
    expect((await api.createTicket({ id: id.toUpperCase(), queueId: 'test.basic' })).ok).toBe(true);
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    expect(stored.status).toBe(200);
  });

  it('is idempotent: concurrent duplicates and a later retry make one pool entry', async () => {
    const before = await poolSize('test.basic');
    const id = uuid();
    const results = await Promise.all(Array.from({ length: 20 }, () => api.createTicket({ id, queueId: 'test.basic', engineInput: party(1) })));
    for (const r of results) expect(r).toEqual({ ok: true, value: expect.objectContaining({ ticketId: id }) });
    const retry = await api.createTicket({ id, queueId: 'test.basic', engineInput: party(3) });
    expect(retry.ok).toBe(true);
    expect(await poolSize('test.basic')).toBe(before + 1);
    // The first write wins: a retry does not replace the stored ticket.
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    expect(stored.body.state).toBe('active');
  });
});

describe('a ticket created over one transport is the same as over the other', () => {
  it('stores identical tickets for identical requests', async () => {
    const [grpcApi, httpApi] = TRANSPORTS.map(([, connect]) => connect(env.service));
    const input = party(3, 0.7);
    const metadata = new Uint8Array([0, 1, 2, 255]);
    const ids = [uuid(), uuid()];
    expect((await grpcApi!.createTicket({ id: ids[0], queueId: 'test.basic', engineInput: input, metadata })).ok).toBe(true);
    expect((await httpApi!.createTicket({ id: ids[1], queueId: 'test.basic', engineInput: input, metadata })).ok).toBe(true);
    const [a, b] = await Promise.all(ids.map((id) => httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`)));
    const strip = (t: Record<string, unknown>) => ({ ...t, id: undefined, createdAt: undefined });
    expect(strip(a!.body.ticket as Record<string, unknown>)).toEqual(strip(b!.body.ticket as Record<string, unknown>));
    grpcApi!.close();
  });

  it('accepts snake_case field names in HTTP bodies', async () => {
    const id = uuid();
    const res = await httpRequest(env.service, 'POST', '/v1/queues/test.basic/tickets', {
      ticket: { id, queue_id: 'test.basic', ruleset_ids: ['5v5'], engine_input: Buffer.from(party(1)).toString('base64') },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ticketId: id });
  });
});
