// The benchmark's bare grpc-js server (bench/bare-server.ts): the ceiling and the controls that
// bench/RESULTS.md compares the real service against, so it must answer CreateTicket as the service does,
// and --answer-after-ms must really hold each answer back.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from 'vitest';
import { startBareServer, type BareServer } from '../bench/bare-server.js';
import { CreateTicketRequestSchema, CreateTicketResponseSchema } from '../src/gen/matchmaker/core/v1/service_pb.js';
import { uuid } from './support/fixtures.js';
import { rawGrpcClient } from './support/queues.js';

const CREATE_TICKET = '/matchmaker.core.v1.MatchmakerService/CreateTicket';

describe('bench bare server', () => {
  let server: BareServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function createTicket(answerAfterMs: number): Promise<{ sent: string; answered: string; elapsedMs: number }> {
    server = await startBareServer('127.0.0.1', 0, answerAfterMs);
    const client = rawGrpcClient({ grpcPort: server.port });
    try {
      const id = uuid();
      const request = toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket: { id, queueId: 'eu.ranked' } }));
      await client.call(CREATE_TICKET, request); // connects
      const started = performance.now();
      const result = await client.call(CREATE_TICKET, request);
      const elapsedMs = performance.now() - started;
      expect(result.code).toBe(0);
      return { sent: id, answered: fromBinary(CreateTicketResponseSchema, result.response!).ticketId, elapsedMs };
    } finally {
      client.close();
    }
  }

  it('answers CreateTicket with the ticket id it was sent', async () => {
    const { sent, answered } = await createTicket(0);
    expect(answered).toBe(sent);
    expect(server!.stats().calls).toBe(2);
  });

  it('holds each answer back by --answer-after-ms', async () => {
    const { sent, answered, elapsedMs } = await createTicket(300);
    expect(answered).toBe(sent);
    // A timer never fires early by more than the clock's rounding.
    expect(elapsedMs).toBeGreaterThanOrEqual(295);
  });
});
