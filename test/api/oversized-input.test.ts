// A caller's value, however large, is quoted in an error message only as a short prefix: a 1 MiB ticket or
// queue id is answered promptly, and the calls beside it on the same HTTP/2 connection are not held up.
import { request } from 'node:http';
import { create } from '@bufbuild/protobuf';
import { afterAll, describe, expect, it } from 'vitest';
import { CancelTicketRequestSchema, CreateTicketRequestSchema } from '../../src/gen/matchmaker/core/v1/service_pb.js';
import { party, uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';
import { grpcClient, grpcUnary, httpRequest, type Result } from '../support/transports.js';

const HUGE = 'x'.repeat(1024 * 1024);
/** The longest message we accept for a refusal of a huge value: a short prefix plus the field and the length. */
const MAX_MESSAGE = 300;
/** Generous: the defect stalled the connection for seconds. */
const PROMPT_MS = 2000;

const env = useService({ env: { HTTP_MAX_BODY_BYTES: String(4 * 1024 * 1024) } });

async function timed<T>(promise: Promise<T>): Promise<{ result: T; ms: number }> {
  const start = performance.now();
  const result = await promise;
  return { result, ms: performance.now() - start };
}

describe('oversized ids', () => {
  const client = { current: undefined as ReturnType<typeof grpcClient> | undefined };
  afterAll(() => client.current?.close());

  it('over gRPC, one connection: huge ids are refused promptly with a short message, neighbours answered promptly', async () => {
    const c = (client.current = grpcClient(env.service));
    const ticket = (id: string, queueId = 'test.basic') =>
      create(CreateTicketRequestSchema, { ticket: { id, queueId, engineInput: party(1) } });
    // Warm the connection so the timing below is of the calls, not of connecting.
    expect((await grpcUnary(c, 'CreateTicket', ticket(uuid()))).ok).toBe(true);

    const big = [
      timed(grpcUnary(c, 'CreateTicket', ticket(HUGE))),
      timed(grpcUnary(c, 'CreateTicket', ticket(uuid(), HUGE))),
      timed(grpcUnary(c, 'CancelTicket', create(CancelTicketRequestSchema, { queueId: HUGE, ticketId: uuid() }))),
      timed(grpcUnary(c, 'CancelTicket', create(CancelTicketRequestSchema, { queueId: 'test.basic', ticketId: HUGE }))),
    ];
    const neighbours = Array.from({ length: 20 }, () => timed(grpcUnary(c, 'CreateTicket', ticket(uuid()))));
    const [bigResults, neighbourResults] = await Promise.all([Promise.all(big), Promise.all(neighbours)]);

    const codes = bigResults.map(({ result }) => (result as Result<unknown>).ok || (result as { code: string }).code);
    expect(codes).toEqual(['INVALID_ARGUMENT', 'NOT_FOUND', 'FAILED_PRECONDITION', 'INVALID_ARGUMENT']);
    for (const { result, ms } of bigResults) {
      const failure = result as { message: string };
      expect(failure.message.length).toBeLessThan(MAX_MESSAGE);
      expect(failure.message).toContain(`(${HUGE.length} characters)`);
      expect(ms).toBeLessThan(PROMPT_MS);
    }
    for (const { result, ms } of neighbourResults) {
      expect(result.ok).toBe(true);
      expect(ms).toBeLessThan(PROMPT_MS);
    }
  });

  it('over HTTP: a huge id in the body or a long one in the path is refused promptly with a short message', async () => {
    const cases = [
      { path: '/v1/queues/test.basic/tickets', body: { ticket: { id: HUGE, engineInput: '' } }, status: 400 },
      { path: `/v1/queues/test.basic/tickets`, body: { ticket: { id: uuid(), queueId: HUGE } }, status: 400 },
      { path: `/v1/queues/test.basic/tickets:reactivate`, body: { ticketIds: [HUGE] }, status: 400 },
      { path: `/v1/queues/${'q'.repeat(10_000)}/tickets:reactivate`, body: { ticketIds: [] }, status: 409 },
    ];
    const results = await Promise.all(cases.map((c) => timed(httpRequest(env.service, 'POST', c.path, c.body))));
    results.forEach(({ result, ms }, i) => {
      expect({ i, status: result.status }).toEqual({ i, status: cases[i]!.status });
      expect((result.body.message as string).length).toBeLessThan(MAX_MESSAGE);
      expect(result.body.message).toMatch(/\(\d+ characters\)/);
      expect(ms).toBeLessThan(PROMPT_MS);
    });
  });

  it('on the outcome stream: a long queue_id is refused (400) with a short message', async () => {
    const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(`${env.service.baseUrl}/v1/outcomes/stream?queue_id=${'%20'.repeat(3000)}`, {
        headers: {
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-version': '13',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(400);
    const message = (JSON.parse(body) as { message: string }).message;
    expect(message).toContain('(3000 characters)');
    expect(message.length).toBeLessThan(MAX_MESSAGE);
  });
});
