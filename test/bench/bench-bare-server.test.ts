// The benchmark's bare grpc-js server (bench/bare-server.ts): the ceiling and the controls that
// bench/RESULTS.md compares the real service against, so it must answer CreateTicket as the service does,
// and --answer-after-ms must really hold each answer back.
import { afterEach, describe, expect, it } from 'vitest';
import { startBareServer, type BareServer } from '../../bench/bare-server.js';
import { uuid } from '../support/fixtures.js';
import { grpcTransport } from '../support/transports.js';

describe('bench bare server', () => {
  let server: BareServer | undefined;
  afterEach(async () => {
    await server?.stop();
    server = undefined;
  });

  async function createTicket(answerAfterMs: number, http2Only = false): Promise<{ sent: string; answered: string; elapsedMs: number }> {
    server = await startBareServer('127.0.0.1', 0, answerAfterMs, http2Only);
    const api = grpcTransport({ grpcPort: server.port });
    try {
      const ticket = { id: uuid(), queueId: 'eu.ranked' };
      await api.createTicket(ticket); // connects
      const started = performance.now();
      const result = await api.createTicket(ticket);
      const elapsedMs = performance.now() - started;
      if (!result.ok) throw new Error(`CreateTicket failed: ${result.code} ${result.message}`);
      return { sent: ticket.id, answered: result.value.ticketId, elapsedMs };
    } finally {
      api.close();
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

  describe('--http2-only (no grpc-js)', () => {
    it('answers a grpc-js client with the ticket id it was sent', async () => {
      const { sent, answered } = await createTicket(0, true);
      expect(answered).toBe(sent);
      expect(server!.stats().calls).toBe(2);
    });

    it('holds each answer back by --answer-after-ms', async () => {
      const { sent, answered, elapsedMs } = await createTicket(300, true);
      expect(answered).toBe(sent);
      expect(elapsedMs).toBeGreaterThanOrEqual(295);
    });
  });
});
