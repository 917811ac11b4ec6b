// tinybench micro-benchmarks of the CreateTicket path inside one process, to split the per-request cost
// the load test sees into pieces: request decode, engine_input parse, Ticket encode, the core's whole
// createTicket (validation, parse, pool insert) on the in-memory store (commits cost no disk), what the
// metrics add per request, and one durable lmdb commit on this disk.
//
// The service's internals change often, so they are reached through loose types: a change there makes
// this part fail at run time (reported, and the load phases still run) instead of breaking the build.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { Bench } from 'tinybench';
import { ServiceMetrics } from '../src/api/metrics/service-metrics.js';
import { scanQueueDirectory } from '../src/config/queue-files.js';
import { MatchmakerCore } from '../src/core/matchmaker-core.js';
import { parseTicketEngineInput } from '../src/engine/engine-input.js';
import { TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { CreateTicketRequestSchema } from '../src/gen/matchmaker/core/v1/service_pb.js';
import { createLogger } from '../src/log.js';
import { QueueRegistry } from '../src/queue/queue-registry.js';
import { LmdbStore } from '../src/store/lmdb-store.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { engineInputPool } from './create-ticket-load.js';

type LooseRegistry = { applyScan(scan: unknown): void; get(queueId: string): unknown; stopAll?(): unknown };

export interface MicroRow {
  task: string;
  meanUs: number;
  p50Us: number;
  p99Us: number;
  opsPerSec: number;
  samples: number;
  error?: string;
}

export async function runMicro(queuesDir: string, queueId: string, timeMs = 500): Promise<MicroRow[]> {
  const log = createLogger('silent');
  const registry = new (QueueRegistry as unknown as new (store: unknown, log: unknown) => LooseRegistry)(
    new MemoryStore({ producerId: 'bench' }),
    log,
  );
  registry.applyScan(scanQueueDirectory(queuesDir));
  if (!registry.get(queueId)) throw new Error(`queue ${queueId} not found in ${queuesDir}`);
  const core = new MatchmakerCore();
  core.serve(registry as never);

  const inputs = engineInputPool(1024);
  let i = 0;
  const nextInput = () => inputs[i++ % inputs.length]!;
  const encodedRequests = inputs.map((engineInput) =>
    toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket: { id: randomUUID(), queueId, engineInput } })),
  );
  const ticketBytes = () =>
    toBinary(TicketSchema, create(TicketSchema, { id: randomUUID(), queueId, engineInput: nextInput(), createdAt: timestampNow() }));

  // The service's own store, writing one ticket-sized record per commit.
  const dataDir = mkdtempSync(join(tmpdir(), 'mm-bench-micro-'));
  const store = new LmdbStore({ path: dataDir, onFatal: () => undefined });
  let position = 0;

  // What /metrics adds to each CreateTicket: the request counted and timed, the ticket counted.
  const metrics = new ServiceMetrics(() => ({ serving: true }));

  const bench = new Bench({ name: 'CreateTicket path, in process', time: timeMs, warmupTime: 100 });
  bench
    .add('decode CreateTicketRequest (fromBinary)', () => {
      fromBinary(CreateTicketRequestSchema, encodedRequests[i++ % encodedRequests.length]!);
    })
    .add('parseTicketEngineInput', () => {
      parseTicketEngineInput(nextInput(), 'x', 'ticket.engine_input');
    })
    .add('encode Ticket (toBinary)', () => {
      ticketBytes();
    })
    .add('core.createTicket, memory store (validate, parse, pool insert)', async () => {
      await core.createTicket(create(CreateTicketRequestSchema, { ticket: { id: randomUUID(), queueId, engineInput: nextInput() } }));
    })
    .add('metrics: a CreateTicket counted and timed, its ticket counted (prom-client)', () => {
      metrics.observeRequest('CreateTicket', 'grpc', 'OK', 0.0004);
      metrics.queues.ticketsCreated(queueId, 1);
    })
    .add('lmdb durable commit of 1 ticket, one at a time', async () => {
      await store.commit([
        { type: 'ticket.put', ticket: { queueId, ticketId: randomUUID(), position: ++position, ticket: ticketBytes(), state: 'active' } },
      ]);
    });
  try {
    await bench.run();
  } finally {
    await registry.stopAll?.();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  return bench.tasks.map((t) => {
    const r = t.result;
    if (r.state !== 'completed') {
      const error = r.state === 'errored' ? String((r as { error?: unknown }).error) : r.state;
      return { task: t.name, meanUs: NaN, p50Us: NaN, p99Us: NaN, opsPerSec: NaN, samples: 0, error };
    }
    return {
      task: t.name,
      meanUs: r.latency.mean * 1000,
      p50Us: r.latency.p50 * 1000,
      p99Us: r.latency.p99 * 1000,
      opsPerSec: r.throughput.mean,
      samples: r.latency.samplesCount,
    };
  });
}
