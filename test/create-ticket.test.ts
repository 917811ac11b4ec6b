import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acknowledgedTicketBytes, engineInputOf } from '../src/core/ticket-encoding.js';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { CreateTicketRequestSchema } from '../src/gen/matchmaker/core/v1/service_pb.js';
import { httpRequest, TRANSPORTS, type Transport } from './support/transports.js';
import { party, ticketArb, timestampArb, uuid } from './support/fixtures.js';
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

describe('the ticket as stored', () => {
  it('decodes to the same Ticket whether taken from the gRPC request bytes or encoded afresh', () => {
    fc.assert(
      fc.property(ticketArb, fc.boolean(), timestampArb, (ticket, split, now) => {
        const one = toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket }));
        // The ticket field twice: the decoder merges them, so its bytes cannot be reused as they are.
        const encoded = split ? new Uint8Array([...one, ...one]) : one;
        const decoded = fromBinary(CreateTicketRequestSchema, encoded).ticket!;
        const receivedId = decoded.id;
        decoded.id = receivedId.toLowerCase();
        decoded.createdAt = create(TimestampSchema, now);
        const stored = fromBinary(TicketSchema, acknowledgedTicketBytes(decoded, receivedId, encoded));
        expect(stored).toEqual(fromBinary(TicketSchema, toBinary(TicketSchema, decoded)));
        expect(stored.id).toBe(ticket.id.toLowerCase());
        expect(stored.createdAt).toEqual(decoded.createdAt);
      }),
      { numRuns: 300 },
    );
  });

  it('gives its engine_input back without decoding the rest: absent, present, or given twice', () => {
    const encode = (init: MessageInitShape<typeof TicketSchema>, withInput: boolean) =>
      toBinary(TicketSchema, create(TicketSchema, withInput ? init : { ...init, engineInput: undefined }));
    fc.assert(
      fc.property(ticketArb, fc.boolean(), fc.option(ticketArb), (ticket, withInput, second) => {
        // Two encodings one after the other decode as one merged Ticket: the later engine_input wins.
        const bytes = second ? new Uint8Array([...encode(ticket, withInput), ...encode(second, true)]) : encode(ticket, withInput);
        expect(engineInputOf(bytes)).toEqual(fromBinary(TicketSchema, bytes).engineInput);
      }),
      { numRuns: 300 },
    );
  });
});
