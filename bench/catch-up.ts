// Catch-up from a checkpoint, measured (bench/replication.ts runs it): a replica starting against a queue
// whose newest checkpoint holds N active tickets, timed from its process start to the queue's state
// `running` (GET /admin/v1/queues), with the moments its log gives in between.
//
// Making the checkpoint: a seeding replica runs the queue with CHECKPOINT_INTERVAL_RECORDS=1, takes one
// ticket and saves a checkpoint of it (a real one: its log position, term and outbox), and stops. The bench
// then adds N tickets to that checkpoint's state (fresh ids, positions after the last, unmatchable inputs of
// eu.ranked so a restore builds real pool rows) and saves it again under the same position. Filling the log
// through CreateTicket instead would take minutes for 1M tickets on this machine, and the checkpoint would be
// the same kind of object. It is stored as the replicas' leader would store it: compressed as CHECKPOINT_COMPRESSION
// in this process's environment (which the replicas inherit) says, zstd by default.
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { jetstream } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { serviceConfigSchema } from '../src/config/service-config.js';
import { TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { createLogger } from '../src/log.js';
import { encodeCheckpointInSlices } from '../src/replication/wire/checkpoint-codec.js';
import { decodeCheckpoint } from '../src/replication/wire/checkpoint-decode.js';
import { latestCheckpoint, saveCheckpoint } from '../src/replication/jetstream/checkpoint-objects.js';
import { ticketRunOf, ticketsOf } from '../src/queue/queue-snapshot.js';
import type { Child } from './child-process.js';
import { createOneTicket, engineInputPool } from './create-ticket-load.js';
import type { BenchNatsCluster } from './nats-cluster.js';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  errorLines,
  pollFor,
  removeReplicaDirs,
  replicaSpecs,
  replicatedEnv,
  startReplica,
  untilRunning,
  writeQueueDir,
} from './replica-processes.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** The replicated mode's default checkpoint object store (BROKER_OBJECT_STORE_CHECKPOINTS). */
const CHECKPOINT_STORE = 'SVC_MATCH_CHECKPOINTS';
const LEASE_MS = 6000;

export interface CatchUpResult {
  /** Active tickets in the checkpoint (the seeder's one included). */
  tickets: number;
  checkpointBytes: number;
  /** Its size in the object store (compressed or not, as CHECKPOINT_COMPRESSION says). */
  storedBytes: number;
  /** Building and encoding the checkpoint, and saving it in the object store (R3): the bench's side. */
  prepareMs: number;
  saveMs: number;
  /** Process start -> "listening" -> "queue restored from a checkpoint" -> state `running`, ms. */
  listeningMs: number | undefined;
  restoredMs: number | undefined;
  runningMs: number;
  /** -> "pool restored from a checkpoint": its rows built after `running`, so its engine can match. */
  rowsMs: number | undefined;
  errorLines: number;
}

/** The pino `time` of the first line with this message, as ms after `startMs`. */
function lineAt(child: Child, msg: string, startMs: number): number | undefined {
  const line = child.lines.find((l) => l.msg === msg);
  return typeof line?.time === 'number' ? line.time - startMs : undefined;
}

/**
 * Replaces the queue's newest checkpoint (a seeder's, of a ticket or so) by the same checkpoint with
 * `extraTickets` more active tickets (fresh ids, positions after its last, unmatchable inputs of eu.ranked),
 * saved under the same position, compressed as CHECKPOINT_COMPRESSION says. Answers its active tickets, its
 * bytes, their size as stored, and the bench's time to build and encode it and to save it (compression included).
 */
export async function enlargeCheckpoint(
  nc: NatsConnection,
  queueId: string,
  extraTickets: number,
): Promise<{ tickets: number; bytes: Uint8Array; storedBytes: number; prepareMs: number; saveMs: number }> {
  const os = await new Objm(jetstream(nc)).open(CHECKPOINT_STORE, false);
  const found = await latestCheckpoint(os, queueId, createLogger('silent'));
  if (!found) throw new Error(`no checkpoint of ${queueId} in ${CHECKPOINT_STORE}`);
  const prepareStart = performance.now();
  const checkpoint = decodeCheckpoint(found.bytes, queueId);
  const inputs = engineInputPool(4096, 11, true);
  const createdAt = timestampFromMs(Date.now());
  let position = checkpoint.state.nextPosition;
  const active = ticketsOf(checkpoint.state.active);
  for (let i = 0; i < extraTickets; i++) {
    const ticketId = randomUUID();
    const ticket = toBinary(
      TicketSchema,
      create(TicketSchema, { id: ticketId, queueId, createdAt, engineInput: inputs[i % inputs.length]! }),
    );
    active.push({ ticketId, position: position++, ticket });
  }
  checkpoint.state.active = ticketRunOf(active);
  checkpoint.state.nextPosition = position;
  const bytes = await encodeCheckpointInSlices(checkpoint);
  const prepareMs = performance.now() - prepareStart;
  const tickets = active.length;
  active.length = 0;
  const saveStart = performance.now();
  const compression = serviceConfigSchema.shape.checkpoint_compression.parse(process.env.CHECKPOINT_COMPRESSION);
  const stored = await saveCheckpoint(os, queueId, found.seq, bytes, compression);
  return { tickets, bytes, storedBytes: stored.size, prepareMs, saveMs: performance.now() - saveStart };
}

/** Times a replica's start against a checkpoint of `extraTickets` tickets more than the seeder's one. */
export async function runCatchUp(cluster: BenchNatsCluster, extraTickets: number): Promise<CatchUpResult> {
  const queueId = `bench.catchup.n${extraTickets}`;
  const queueDir = writeQueueDir({ [queueId]: readFileSync(join(ROOT, 'queues/eu.ranked.yaml'), 'utf8') });
  const env = replicatedEnv(cluster.urls, LEASE_MS, 'BENCH_COORD_CATCHUP');
  const [seed, fresh] = await replicaSpecs(`cu${extraTickets}`, 2, queueDir, env);
  const problems: Record<string, unknown>[] = [];
  const nc = await cluster.client();
  try {
    // 1. A real checkpoint of one ticket, by a leader taking one after every entry.
    const seeder = await startReplica({ ...seed!, env: { ...env, CHECKPOINT_INTERVAL_RECORDS: '1' } });
    try {
      await untilRunning(seed!.httpPort, queueId);
      await createOneTicket(seed!.grpcPort, queueId);
      await pollFor(
        'the seeding replica saved a checkpoint',
        async () => seeder.lines.find((l) => l.msg === 'checkpoint saved'),
        60_000,
        100,
      );
    } finally {
      await seeder.stop();
      problems.push(...errorLines(seeder));
    }

    // 2. The same checkpoint with `extraTickets` more active tickets, saved under its position.
    const { tickets, bytes, storedBytes, prepareMs, saveMs } = await enlargeCheckpoint(nc, queueId, extraTickets);

    // 3. A fresh replica: process start -> running.
    const startMs = Date.now();
    const child = await startReplica(fresh!);
    try {
      const running = await untilRunning(fresh!.httpPort, queueId, 10 * 60_000);
      const runningMs = Date.now() - startMs;
      // The restore is what was measured only if the replica holds every ticket of the checkpoint.
      if (running.activeTickets !== tickets)
        throw new Error(`the replica holds ${running.activeTickets} active tickets, the checkpoint ${tickets}`);
      const rowsLine = 'pool restored from a checkpoint';
      await pollFor('the pool rows built', async () => child.lines.find((l) => l.msg === rowsLine), 10 * 60_000, 50);
      return {
        tickets,
        checkpointBytes: bytes.length,
        storedBytes,
        prepareMs,
        saveMs,
        listeningMs: lineAt(child, 'listening', startMs),
        restoredMs: lineAt(child, 'queue restored from a checkpoint', startMs),
        runningMs,
        rowsMs: lineAt(child, rowsLine, startMs),
        errorLines: problems.length + errorLines(child).length,
      };
    } finally {
      await child.stop();
    }
  } finally {
    await nc.close();
    removeReplicaDirs([seed!, fresh!]);
    rmSync(queueDir, { recursive: true, force: true });
  }
}
