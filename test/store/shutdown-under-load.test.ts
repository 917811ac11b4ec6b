// SIGTERM with SHUTDOWN_DRAIN_MS=0 while clients keep calling on kept-alive connections (gRPC and HTTP),
// and two calls are stuck half-sent: the process exits promptly (the servers' close is bounded), and every
// call that was answered OK is durable after a restart.
import { Agent, request } from 'node:http';
import { connect as http2Connect } from 'node:http2';
import { connect } from 'node:net';
import { create } from '@bufbuild/protobuf';
import { credentials } from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { CreateTicketRequestSchema } from '../../src/gen/matchmaker/core/v1/service_pb.js';
import { party, uuid } from '../support/fixtures.js';
import { removeDirs, startService, type TestService } from '../support/service.js';
import { grpcUnary, MatchmakerClient } from '../support/transports.js';

/** The bound on SIGTERM-to-exit we promise under load (docs/operations.md). */
const EXIT_WITHIN_MS = 2000;
const QUEUE = 'test.basic';
/** Concurrent calls each gRPC client keeps going on its one connection. */
const CALLS_PER_CONNECTION = 8;

interface Load {
  acked: string[];
  calls: number;
  stop(): Promise<void>;
}

/** `clients` loops calling CreateTicket as fast as answers come, retrying on any failure. */
function grpcLoad(service: TestService, clients: number): Load {
  const acked: string[] = [];
  let running = true;
  let calls = 0;
  const loops = Array.from({ length: clients }, async () => {
    // A connection of its own per client (no shared subchannel), kept alive for the whole run.
    const client = new MatchmakerClient(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure(), {
      'grpc.use_local_subchannel_pool': 1,
      'grpc.initial_reconnect_backoff_ms': 50,
      'grpc.max_reconnect_backoff_ms': 100,
    });
    await Promise.all(
      Array.from({ length: CALLS_PER_CONNECTION }, async () => {
        while (running) {
          const id = uuid();
          calls++;
          const result = await grpcUnary(
            client,
            'CreateTicket',
            create(CreateTicketRequestSchema, { ticket: { id, queueId: QUEUE, engineInput: party(1) } }),
          );
          if (result.ok) acked.push(id);
          else await new Promise((r) => setTimeout(r, 5));
        }
      }),
    );
    client.close();
  });
  return {
    acked,
    get calls() {
      return calls;
    },
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

function httpLoad(service: TestService, clients: number): Load {
  const acked: string[] = [];
  let running = true;
  let calls = 0;
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const post = (id: string) =>
    new Promise<number>((resolve) => {
      const body = JSON.stringify({ ticket: { id, engineInput: Buffer.from(party(1)).toString('base64') } });
      const req = request(
        `${service.baseUrl}/v1/queues/${QUEUE}/tickets`,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
          res.on('error', () => resolve(0));
        },
      );
      req.on('error', () => resolve(0));
      req.end(body);
    });
  const loops = Array.from({ length: clients }, async () => {
    while (running) {
      const id = uuid();
      calls++;
      if ((await post(id)) === 200) acked.push(id);
      else await new Promise((r) => setTimeout(r, 5));
    }
  });
  return {
    acked,
    get calls() {
      return calls;
    },
    stop: async () => {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

describe('SIGTERM under load', () => {
  const dirs: string[] = [];
  afterAll(() => removeDirs(...dirs));

  it(`exits within ${EXIT_WITHIN_MS} ms with SHUTDOWN_DRAIN_MS=0, and every acknowledged ticket is durable`, async () => {
    const service = await startService({ env: { SHUTDOWN_DRAIN_MS: '0' } });
    dirs.push(service.dataDir, service.queueDir);
    const loads = [grpcLoad(service, 3), httpLoad(service, 2)];
    await new Promise((r) => setTimeout(r, 1000));
    const before = loads.map((l) => l.acked.length);
    expect(before.every((n) => n > 0)).toBe(true);

    // Two calls that never finish sending: an HTTP body and a gRPC request message, both cut short.
    const stuckHttp = connect(service.httpPort, '127.0.0.1');
    stuckHttp.on('error', () => undefined);
    stuckHttp.write(
      `POST /v1/queues/${QUEUE}/tickets HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{`,
    );
    const h2 = http2Connect(`http://127.0.0.1:${service.grpcPort}`);
    h2.on('error', () => undefined);
    const stuckGrpc = h2.request({
      ':method': 'POST',
      ':path': '/matchmaker.core.v1.MatchmakerService/CreateTicket',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    stuckGrpc.on('error', () => undefined);
    stuckGrpc.write(Buffer.from([0, 0, 0, 1, 0])); // announces 256 bytes, sends none of them
    await new Promise((r) => setTimeout(r, 200));

    const start = performance.now();
    const exitCode = await Promise.race([
      service.stop(),
      new Promise<string>((r) => setTimeout(() => r('still running after 10 s'), 10_000)),
    ]);
    const exitMs = performance.now() - start;
    if (typeof exitCode === 'string') await service.kill(); // never leave it behind
    console.log(
      'EXIT MS',
      exitMs,
      loads.map((l) => [l.calls, l.acked.length]),
      service.logs.slice(-8).map((l) => `${l.time} ${l.msg}`),
    );
    await Promise.all(loads.map((l) => l.stop()));
    stuckHttp.destroy();
    h2.destroy();
    expect({ exitCode, exitMs: exitMs < EXIT_WITHIN_MS ? 'in time' : exitMs }).toEqual({ exitCode: 0, exitMs: 'in time' });

    const acked = loads.flatMap((l) => l.acked);
    const restarted = await startService({ queueDir: service.queueDir, dataDir: service.dataDir });
    try {
      const missing: string[] = [];
      for (const id of acked) {
        const res = await fetch(`${restarted.baseUrl}/admin/v1/queues/${QUEUE}/tickets/${id}`);
        await res.arrayBuffer();
        if (res.status !== 200) missing.push(id);
      }
      expect({ acked: acked.length, missing }).toEqual({ acked: acked.length, missing: [] });
    } finally {
      await restarted.stop();
    }
  }, 60_000);
});
