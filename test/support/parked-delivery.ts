// A parked delivery to release: a queue whose webhook sink points at a port nobody listens on, so its first
// outcome fails twice (one retry, a few ms apart) and parks. A test that wants the released outcome to
// arrive listens on that port before it releases.
import { createServer } from 'node:http';
import { expect } from 'vitest';
import { party, uuid } from './fixtures.js';
import { duelQueue, pollUntil } from './queues.js';
import type { TestService } from './service.js';
import { grpcTransport, httpRequest } from './transports.js';

/** A delivery as GET /admin/v1/deliveries lists it. */
export interface ParkedDeliveryJson {
  queueId: string;
  sink: string;
  parked?: { sequence: string; attempts: number; lastError: string };
}

/** A port bound and released: nobody listens there until the test does. */
export async function releasedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A 1v1 queue (ruleset "duel") whose outcomes go to a webhook on `sinkPort`, one outcome a request. */
export function parkingQueue(sinkPort: number, tickIntervalMs = 3_600_000): string {
  return duelQueue(tickIntervalMs, {
    outcomes: {
      sink: 'webhook',
      batch_chunk_size: 1,
      webhook: {
        url: `http://127.0.0.1:${sinkPort}/hook`,
        secret: 'whsec-parked-delivery',
        timeout_ms: 500,
        max_retries: 1,
        retry_base_delay_ms: 10,
        retry_max_delay_ms: 20,
      },
    },
  });
}

/** The deliveries the service lists; `token` for a service with tokens (the `admin` scope). */
export async function deliveries(service: TestService, token?: string): Promise<ParkedDeliveryJson[]> {
  const res = await httpRequest(service, 'GET', '/admin/v1/deliveries', undefined, token ? { authorization: `Bearer ${token}` } : {});
  expect(res.status).toBe(200);
  return res.body.deliveries as ParkedDeliveryJson[];
}

/**
 * Parks a delivery of `queueId` (a parkingQueue nobody listens for): one ticket created and cleared gives
 * one outcome. `tokens` for a service with tokens: `tickets` to create and clear, `admin` to read deliveries.
 */
export async function parkDelivery(
  service: TestService,
  queueId: string,
  tokens: { tickets?: string; admin?: string } = {},
): Promise<void> {
  const api = grpcTransport(service, tokens.tickets);
  try {
    expect((await api.createTicket({ id: uuid(), queueId, engineInput: party(1) })).ok).toBe(true);
    expect((await api.clearQueuePool(queueId)).ok).toBe(true);
  } finally {
    api.close();
  }
  const parked = await pollUntil(
    async () => (await deliveries(service, tokens.admin)).find((d) => d.queueId === queueId),
    (d) => d?.parked !== undefined,
  );
  expect(parked?.parked).toBeDefined();
}
