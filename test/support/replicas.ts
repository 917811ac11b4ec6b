// Replicas of one queue in this process, each with its own NATS connection and its own store, following
// one replication log: the replicated mode's protocol without the service around it.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { parse } from 'yaml';
import { queueFileSchema } from '../../src/config/queue-config.js';
import { parseTicketEngineInput } from '../../src/engine/engine-input.js';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import type { Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { createLogger } from '../../src/log.js';
import { QueueRuntime } from '../../src/queue/queue-runtime.js';
import { ReplicatedHistory } from '../../src/replication/replicated-history.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { LeaderLease } from '../../src/replication/jetstream/leader-lease.js';
import { ReplicationLog, type LogSubjects } from '../../src/replication/jetstream/replication-log.js';
import { engineInput, uuid } from './fixtures.js';

const log = createLogger('silent');

/** A queue's log: its stream and subjects. */
export interface QueueLog {
  queueId: string;
  stream: string;
  subjects: LogSubjects;
}

export interface Replica {
  name: string;
  runtime: QueueRuntime;
  store: MemoryStore;
  history: ReplicatedHistory;
  log: ReplicationLog;
  nc: NatsConnection;
  /** A graceful stop: the lease is released. */
  stop(): Promise<void>;
}

export interface ReplicaOptions {
  name: string;
  queue: QueueLog;
  /** The queue file (YAML). */
  yaml: string;
  /** A connection of this replica's own. */
  nc: NatsConnection;
  /** The coordination bucket, opened on `nc`. */
  kv: KV;
  leaseMs: number;
  /** ReplicatedHistory's applyTimeoutMs. */
  applyTimeoutMs?: number;
  /** ReplicatedHistory's checkpoint options: the object store, opened on `nc`, and the intervals. */
  checkpoints?: { objects: ObjectStore; intervalRecords?: number; intervalBytes?: number; intervalMs?: number };
}

/** Starts a replica and resolves once it has caught up with the log. */
export async function startReplica(options: ReplicaOptions): Promise<Replica> {
  const { name, queue, nc, kv } = options;
  const replicationLog = new ReplicationLog(jetstream(nc), await jetstreamManager(nc), queue.stream, queue.subjects, log);
  const lease = new LeaderLease(kv, `leader.${queue.queueId}`, { leaseMs: options.leaseMs, replicaId: name, log });
  const store = new MemoryStore({ producerId: `producer-${queue.queueId}` });
  let history: ReplicatedHistory | undefined;
  const config = queueFileSchema.parse(parse(options.yaml)).config;
  const runtime = new QueueRuntime(queue.queueId, config, store, log, (queueId, applier) => {
    history = new ReplicatedHistory(applier, {
      queueId,
      replicaId: name,
      replicationLog: replicationLog,
      lease,
      store,
      log,
      applyTimeoutMs: options.applyTimeoutMs,
      checkpoints: options.checkpoints?.objects,
      checkpointIntervalRecords: options.checkpoints?.intervalRecords,
      checkpointIntervalBytes: options.checkpoints?.intervalBytes,
      checkpointIntervalMs: options.checkpoints?.intervalMs,
    });
    return history;
  });
  runtime.start();
  await until(`${name} caught up`, () => runtime.lifecycle === 'running', 20_000);
  return {
    name,
    runtime,
    store,
    history: history!,
    log: replicationLog,
    nc,
    async stop() {
      await runtime.stop();
      await nc.close();
    },
  };
}

export async function until(what: string, done: () => boolean, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!done()) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A one-player ticket through `replica`; resolves when the replica answered. */
export function createTicket(replica: Replica, id = uuid(), mmr = 0.5): Promise<void> {
  const ticket = create(TicketSchema, {
    id,
    queueId: replica.runtime.queueId,
    createdAt: timestampNow(),
    engineInput: engineInput({ players: [{ playerId: `p-${id}`, mmr }] }),
  });
  return replica.runtime.createTicket(
    ticket,
    toBinary(TicketSchema, ticket),
    parseTicketEngineInput(ticket.engineInput, id, 'engine_input'),
  );
}

export const matchesOf = (replica: Replica): Outcome[] =>
  replica.store.queueOutcomes(replica.runtime.queueId, 0n, 100_000).filter((o) => o.kind === 'match.created');
export const matchedIds = (o: Outcome): string[] =>
  o.payload.case === 'matchCreated' ? o.payload.value.match!.tickets.map((t) => t.id) : [];
export const leaderOf = (group: readonly Replica[]): Replica | undefined => group.find((r) => r.history.leading);
