// Requests that do not decode: malformed HTTP bodies and paths, bodies over the HTTP limit, and raw bytes
// over gRPC that are not the request message. Each is refused with INVALID_ARGUMENT (never INTERNAL),
// names what is wrong, and leaves the service answering with nothing lost.
import { Agent, request as httpRequestRaw } from 'node:http';
import { create, toBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateTicketRequestSchema } from '../../src/gen/matchmaker/core/v1/service_pb.js';
import { grpcTransport, httpRequest, httpTransport, type HttpResult, type Transport } from '../support/transports.js';
import { party, uuid } from '../support/fixtures.js';
import { removeDirs, startService, type TestService } from '../support/service.js';
import { adminTicket, rawGrpcClient } from '../support/queues.js';

let service: TestService;
/** The same service with HTTP_MAX_BODY_BYTES=2048. */
let small: TestService;
beforeAll(async () => {
  [service, small] = await Promise.all([startService(), startService({ env: { HTTP_MAX_BODY_BYTES: '2048' } })]);
}, 60_000);
afterAll(async () => {
  await Promise.all([service?.stop(), small?.stop()]);
  for (const s of [service, small]) if (s) removeDirs(s.dataDir, s.queueDir);
});

const TICKETS = '/v1/queues/test.basic/tickets';
const M = '/matchmaker.core.v1.MatchmakerService';

/** A body sent as raw text, so that it can be anything at all. */
function send(svc: TestService, method: string, path: string, body?: string): Promise<HttpResult> {
  return httpRequest(svc, method, path, body);
}

function expectStatus(res: HttpResult, status: number, code: string, ...names: RegExp[]): void {
  expect({ status: res.status, code: res.body.code }).toEqual({ status, code });
  expect(typeof res.body.message).toBe('string');
  for (const n of names) expect(res.body.message).toMatch(n);
}

/** The service still takes a valid ticket and shows it. */
async function expectStillServing(svc: TestService): Promise<void> {
  const id = uuid();
  const res = await httpRequest(svc, 'POST', TICKETS, { ticket: { id, engineInput: Buffer.from(party(1)).toString('base64') } });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ ticketId: id });
  expect((await adminTicket(svc, 'test.basic', id)).status).toBe(200);
}

const sentinels: string[] = [];
beforeAll(async () => {
  // Tickets created before every refused request; the last test checks they are all still there.
  for (const [, connect] of [
    ['grpc', grpcTransport],
    ['http', httpTransport],
  ] as const) {
    const api = connect(service);
    const id = uuid();
    expect((await api.createTicket({ id, queueId: 'test.basic', engineInput: party(2) })).ok).toBe(true);
    sentinels.push(id);
    api.close();
  }
});

describe('malformed HTTP bodies give 400 INVALID_ARGUMENT naming the field, never 500', () => {
  const U = 'd5b3a8c2-0f5e-4e7a-9b61-2c3d4e5f6a7b';
  const cases: [string, string, string, RegExp][] = [
    ['invalid JSON', TICKETS, `{"ticket": {"id": "${U}", `, /JSON/],
    ['a JSON array', TICKETS, '[]', /CreateTicketRequest/],
    ['JSON null', TICKETS, 'null', /CreateTicketRequest/],
    ['a JSON string', TICKETS, '"ticket"', /CreateTicketRequest/],
    ['ticket as a string', TICKETS, '{"ticket": "x"}', /ticket/i],
    ['ticket.id as a number', TICKETS, '{"ticket": {"id": 5}}', /Ticket\.id\b|ticket\.id\b/],
    ['rulesetIds as a string', TICKETS, `{"ticket": {"id": "${U}", "rulesetIds": "x"}}`, /ruleset_?ids/i],
    ['ruleset_ids holding a number', TICKETS, `{"ticket": {"id": "${U}", "ruleset_ids": [1]}}`, /ruleset_?ids/i],
    ['engineInput not base64', TICKETS, `{"ticket": {"id": "${U}", "engineInput": "!!not*base64!!"}}`, /engine_?input/i],
    ['metadata cut short in base64', TICKETS, `{"ticket": {"id": "${U}", "metadata": "QUJD?"}}`, /metadata/],
    ['metadata as a number', TICKETS, `{"ticket": {"id": "${U}", "metadata": 5}}`, /metadata/],
    ['createdAt not a timestamp', TICKETS, `{"ticket": {"id": "${U}", "createdAt": "yesterday"}}`, /created_?at/i],
    ['an unknown field in the ticket', TICKETS, `{"ticket": {"id": "${U}", "bogus": 1}}`, /bogus/],
    ['an unknown top-level field', TICKETS, `{"tiket": {"id": "${U}"}}`, /tiket/],
    [
      'slotsRequested negative',
      '/v1/queues/test.basic/backfills',
      `{"backfillRequest": {"matchId": "${U}", "slotsRequested": -1}}`,
      /slots_?requested/i,
    ],
    [
      'slotsRequested a word',
      '/v1/queues/test.basic/backfills',
      `{"backfillRequest": {"matchId": "${U}", "slotsRequested": "many"}}`,
      /slots_?requested/i,
    ],
    [
      'backfill engineInput not base64',
      '/v1/queues/test.basic/backfills',
      `{"backfillRequest": {"matchId": "${U}", "engineInput": "@@@@"}}`,
      /engine_?input/i,
    ],
    ['ticketIds as a string', '/v1/queues/test.basic/tickets:reactivate', '{"ticketIds": "x"}', /ticket_?ids/i],
    ['backfillIds holding a number', '/v1/queues/test.basic/backfills:cancel', '{"backfillIds": [1]}', /backfill_?ids/i],
    ['an unknown field on cancel-backfills', '/v1/queues/test.basic/backfills:cancel', '{"backfillIds": [], "force": true}', /force/],
  ];

  it.each(cases)('%s', async (_what, path, body, names) => {
    const res = await send(service, 'POST', path, body);
    expectStatus(res, 400, 'INVALID_ARGUMENT', names);
    expect((await adminTicket(service, 'test.basic', U)).status).toBe(404);
    await expectStillServing(service);
  });

  it('a malformed body on DELETE (CancelTicket) leaves the ticket in the pool', async () => {
    const id = sentinels[0]!;
    const res = await send(service, 'DELETE', `${TICKETS}/${id}`, '{"ticketId": 7}');
    expectStatus(res, 400, 'INVALID_ARGUMENT', /ticket_?id/i);
    expect((await adminTicket(service, 'test.basic', id)).status).toBe(200);
  });

  it('a path segment that is not valid percent-encoding', async () => {
    const res = await send(service, 'POST', '/v1/queues/%E0%A4%A/tickets', `{"ticket": {"id": "${uuid()}"}}`);
    expectStatus(res, 400, 'INVALID_ARGUMENT', /path|percent/i);
    await expectStillServing(service);
  });
});

/** POSTs over one kept-alive connection (node:http, one socket), one after the other: their answers or socket errors. */
async function onOneConnection(svc: TestService, ...bodies: string[]) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const post = (body: string) =>
    new Promise<{ status?: number; connection?: string; body?: Record<string, unknown>; error?: string }>((resolve) => {
      const req = httpRequestRaw(
        {
          host: '127.0.0.1',
          port: svc.httpPort,
          method: 'POST',
          path: TICKETS,
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () =>
            resolve({ status: res.statusCode, connection: res.headers.connection, body: JSON.parse(text) as Record<string, unknown> }),
          );
        },
      );
      req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
      req.end(body);
    });
  try {
    const answers = [];
    for (const body of bodies) {
      const started = Date.now();
      answers.push({ ...(await post(body)), ms: Date.now() - started });
    }
    return answers;
  } finally {
    agent.destroy();
  }
}

describe('HTTP body limit (HTTP_MAX_BODY_BYTES=2048)', () => {
  const bodyOf = (id: string, metadataBytes: number) =>
    JSON.stringify({ ticket: { id, metadata: Buffer.alloc(metadataBytes, 1).toString('base64') } });

  it('a body under the limit is accepted', async () => {
    const id = uuid();
    const body = bodyOf(id, 1000);
    expect(Buffer.byteLength(body)).toBeLessThan(2048);
    const res = await send(small, 'POST', TICKETS, body);
    expect(res.status).toBe(200);
  });

  it.each([
    ['just over the limit', 1600],
    ['far over the limit (many chunks)', 512 * 1024],
  ])('a body %s gives 400 INVALID_ARGUMENT, stores nothing, and the service answers afterwards', async (_what, metadataBytes) => {
    const id = uuid();
    const body = bodyOf(id, metadataBytes);
    expect(Buffer.byteLength(body)).toBeGreaterThan(2048);
    // A connection of its own, so that this asserts the answer, not what happens to the connection after it.
    const [res] = await onOneConnection(small, body);
    if (!res) throw new Error('no answer');
    expect({ status: res.status, code: res.body?.code }).toEqual({ status: 400, code: 'INVALID_ARGUMENT' });
    expect(res.body?.message).toMatch(/body/);
    expect(res.body?.message).toMatch(/2048/);
    expect((await adminTicket(small, 'test.basic', id)).status).toBe(404);
    await expectStillServing(small);
  });

  it.each([
    ['just over the limit', 1600],
    ['far over the limit (many chunks)', 512 * 1024],
  ])(
    'after the 400 for a body %s, a kept-alive connection is either closed with Connection: close or still usable',
    async (_what, metadataBytes) => {
      const next = uuid();
      const [first, second] = await onOneConnection(small, bodyOf(uuid(), metadataBytes), JSON.stringify({ ticket: { id: next } }));
      if (!first || !second) throw new Error('no answer');
      expect(first.status).toBe(400);
      if (first.connection?.toLowerCase() !== 'close') {
        // The server advertised keep-alive: the next request on that connection must be answered (promptly).
        expect({ advertised: first.connection, next: second.error ?? second.status }).toEqual({ advertised: first.connection, next: 200 });
        expect(second.ms).toBeLessThan(4_000);
      }
    },
  );
});

describe('a body field that contradicts the path', () => {
  it('CreateTicket: ticket.queue_id differs from the path queue', async () => {
    const id = uuid();
    const res = await send(service, 'POST', TICKETS, JSON.stringify({ ticket: { id, queueId: 'test.other' } }));
    expectStatus(res, 400, 'INVALID_ARGUMENT', /ticket\.queue_id/, /test\.other/);
    expect((await adminTicket(service, 'test.basic', id)).status).toBe(404);
    // Repeating the path's value is fine.
    const same = await send(service, 'POST', TICKETS, JSON.stringify({ ticket: { id, queue_id: 'test.basic' } }));
    expect(same.status).toBe(200);
  });

  it('CreateBackfillRequest: backfill_request.queue_id differs from the path queue', async () => {
    const res = await send(
      service,
      'POST',
      '/v1/queues/test.basic/backfills',
      JSON.stringify({ backfillRequest: { queueId: 'test.other', matchId: uuid() } }),
    );
    expectStatus(res, 400, 'INVALID_ARGUMENT', /backfill_request\.queue_id/);
  });

  it('ReactivateTickets and CancelBackfillRequests: queue_id differs from the path queue', async () => {
    const a = await send(
      service,
      'POST',
      '/v1/queues/test.basic/tickets:reactivate',
      JSON.stringify({ queueId: 'test.other', ticketIds: [uuid()] }),
    );
    expectStatus(a, 400, 'INVALID_ARGUMENT', /queue_id/);
    const b = await send(
      service,
      'POST',
      '/v1/queues/test.basic/backfills:cancel',
      JSON.stringify({ queue_id: 'test.other', backfillIds: [] }),
    );
    expectStatus(b, 400, 'INVALID_ARGUMENT', /queue_id/);
  });

  it('CancelTicket: ticket_id in the body differs from the path and the ticket stays', async () => {
    const id = sentinels[1]!;
    const res = await send(service, 'DELETE', `${TICKETS}/${id}`, JSON.stringify({ ticketId: uuid() }));
    expectStatus(res, 400, 'INVALID_ARGUMENT', /ticket_id/);
    expect((await adminTicket(service, 'test.basic', id)).status).toBe(200);
  });
});

describe('unknown routes and wrong methods', () => {
  it.each([
    ['GET', '/nothing'],
    ['POST', '/v2/queues/test.basic/tickets'],
    ['POST', '/v1/queues/test.basic/tickets/extra/segment'],
    ['POST', '/v1/queues/test.basic/matches'],
    ['GET', '/admin/v1/nothing'],
  ])('%s %s gives 404 with a JSON {code, message} body', async (method, path) => {
    const res = await send(service, method, path, method === 'GET' ? undefined : '{}');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body.code).toBe('NOT_FOUND');
    expect(res.body.message).toEqual(expect.any(String));
    expect(res.body.message).toContain(path);
  });

  it.each([
    ['GET', TICKETS],
    ['PUT', TICKETS],
    ['DELETE', TICKETS],
    ['PATCH', `${TICKETS}/d5b3a8c2-0f5e-4e7a-9b61-2c3d4e5f6a7b`],
    ['POST', `${TICKETS}/d5b3a8c2-0f5e-4e7a-9b61-2c3d4e5f6a7b`],
    ['GET', '/v1/queues/test.basic:clear'],
    ['DELETE', '/v1/queues/test.basic/backfills'],
  ])('%s %s (a known route) gives 405', async (method, path) => {
    const res = await send(service, method, path, method === 'GET' ? undefined : '{}');
    expect(res.status).toBe(405);
    expect(res.body.code).toEqual(expect.any(String));
    expect(res.body.message).toEqual(expect.any(String));
    await expectStillServing(service);
  });

  it("a GET on a ticket's route quotes the whole path, the id to its last character", async () => {
    const path = `${TICKETS}/d5b3a8c2-0f5e-4e7a-9b61-2c3d4e5f6a7b`;
    const res = await send(service, 'GET', path);
    expect(res.status).toBe(405);
    expect(res.body.message).toContain(JSON.stringify(path));
  });
});

describe('malformed bytes over gRPC give INVALID_ARGUMENT naming the request message', () => {
  let raw: ReturnType<typeof rawGrpcClient>;
  let api: Transport;
  beforeAll(() => {
    raw = rawGrpcClient(service);
    api = grpcTransport(service);
  });
  afterAll(() => {
    raw.close();
    api.close();
  });

  it.each([
    ['CreateTicket', 'CreateTicketRequest', [0x0a, 0xff]],
    ['CreateTicket', 'CreateTicketRequest', [0x0a, 0x02, 0x0a]],
    ['CreateTicket', 'CreateTicketRequest', [0x0f, 0x00]],
    ['CreateTicket', 'CreateTicketRequest', [0x0a, 0x03, 0x0a, 0x05, 0x41]],
    ['CancelTicket', 'CancelTicketRequest', [0x0a, 0xff]],
    ['ReactivateTickets', 'ReactivateTicketsRequest', [0x12, 0x04, 0x61]],
    ['CreateBackfillRequest', 'CreateBackfillRequestRequest', [0x0a, 0xff]],
    ['CancelBackfillRequests', 'CancelBackfillRequestsRequest', [0x12, 0xff, 0xff]],
  ])('%s with bytes that are not a %s (%j)', async (method, typeName, bytes) => {
    const res = await raw.call(`${M}/${method}`, new Uint8Array(bytes));
    expect({ code: res.code }).toEqual({ code: 3 });
    expect(res.details).toContain(typeName);
    // Still serving, over the same transport.
    const id = uuid();
    expect(await api.createTicket({ id, queueId: 'test.basic' })).toEqual({ ok: true, value: expect.objectContaining({ ticketId: id }) });
  });

  it('the same raw client gets an answer for well-formed bytes (so the refusals above are about the bytes)', async () => {
    const id = uuid();
    const res = await raw.call(
      `${M}/CreateTicket`,
      toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket: { id, queueId: 'test.basic' } })),
    );
    expect(res.code).toBe(0);
    expect((await adminTicket(service, 'test.basic', id)).status).toBe(200);
  });
});

describe('ClearQueuePool: every failure is NOT_FOUND, malformed requests included', () => {
  it('over HTTP: invalid JSON, an unknown field, a contradicting queue_id give 404 NOT_FOUND', async () => {
    for (const body of ['{"queueId": ', '{"queueId": "test.basic", "all": true}', '{"queueId": "test.other"}']) {
      const res = await send(service, 'POST', '/v1/queues/test.basic:clear', body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 404, code: 'NOT_FOUND' });
    }
    for (const id of sentinels) expect((await adminTicket(service, 'test.basic', id)).status).toBe(200);
  });

  it('over gRPC: bytes that are not a ClearQueuePoolRequest give NOT_FOUND', async () => {
    const raw = rawGrpcClient(service);
    try {
      const res = await raw.call(`${M}/ClearQueuePool`, new Uint8Array([0x0a, 0xff]));
      expect(res.code).toBe(5);
    } finally {
      raw.close();
    }
    for (const id of sentinels) expect((await adminTicket(service, 'test.basic', id)).status).toBe(200);
  });
});

it('loses nothing: tickets created before the refused requests are all still active', async () => {
  expect(sentinels).toHaveLength(2);
  for (const id of sentinels) {
    const stored = await adminTicket(service, 'test.basic', id);
    expect(stored.status).toBe(200);
    expect(stored.body.state).toBe('active');
  }
});
