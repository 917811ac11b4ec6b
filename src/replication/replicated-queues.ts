// The queues of a replica in the replicated mode (POOL_REPLICATION_BACKEND=broker). Each queue runs on its
// own replication log (replicated-history.ts) and keeps a local copy of its state and outbox in memory, one
// MemoryStore per queue written in log order: every replica numbers the queue's outcomes alike, so
// producer_sequence is per queue and gap-free whichever replica leads. Leadership of the queues spreads over
// the replicas (leadership-share.ts); only a queue's leader delivers its outcomes, recording its progress in
// the queue's log so that the next leader resumes from it.
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { configHash } from '../config/queue-config.js';
import type { QueueFile } from '../config/queue-files.js';
import type { ConsumerPositions, Outboxes, QueueOutbox } from '../outcomes/outbox.js';
import { derivedUuid } from '../outcomes/outcome-factory.js';
import { MemoryStore } from '../store/memory-store.js';
import type { CheckpointCompression } from './jetstream/checkpoint-objects.js';
import { LeaderLease } from './jetstream/leader-lease.js';
import { LeadershipShare } from './jetstream/leadership-share.js';
import { leaderLeaseKey } from './jetstream/names.js';
import { ReplicationLog } from './jetstream/replication-log.js';
import { ensureQueueLog, planQueueLogs, type ReplicationResources, type ReplicationSettings } from './jetstream/resources.js';
import type { Store } from '../store/store.js';
import type { QueueApplier } from '../queue/queue-history.js';
import type { QueueBacking } from '../queue/queue-registry.js';
import type { QueueRuntime } from '../queue/queue-runtime.js';
import { ReplicatedHistory } from './replicated-history.js';

export interface ReplicatedQueuesOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  settings: ReplicationSettings;
  resources: ReplicationResources;
  /** This replica's id: unique among the replicas (its lease value and presence key). */
  replicaId: string;
  log: Logger;
  /** The queue files in force, for the subjects a new queue's stream must not capture. */
  files: () => ReadonlyMap<string, QueueFile>;
  /** The queue's current runtime, for its leadership and its outbox records. */
  runtime: (queueId: string) => QueueRuntime | undefined;
  /** Whether the connection to the NATS cluster is up now. */
  connected: () => boolean;
  /** The leader checkpoints a queue after this many records (CHECKPOINT_INTERVAL_RECORDS)... */
  checkpointIntervalRecords: number;
  /** ...or this many bytes of log entries (CHECKPOINT_INTERVAL_BYTES)... */
  checkpointIntervalBytes: number;
  /** ...or after this long, if anything was applied since (CHECKPOINT_INTERVAL_SECS). */
  checkpointIntervalMs: number;
  /** How the leader stores a queue's checkpoints (CHECKPOINT_COMPRESSION). */
  checkpointCompression: CheckpointCompression;
}

export class ReplicatedQueues {
  private readonly stores = new Map<string, MemoryStore>();
  private readonly outcomeListeners: ((queueIds: ReadonlySet<string>) => void)[] = [];
  private readonly share: LeadershipShare;
  private readonly divergenceCheck: NodeJS.Timeout;
  /** Queues whose files differ between replicas, as last logged. */
  private readonly diverging = new Set<string>();

  constructor(private readonly options: ReplicatedQueuesOptions) {
    const { resources, replicaId, settings, log } = options;
    // Each replica announces its queue files' hashes with its presence: a rollout's divergence shows.
    const announce = () => ({
      queues: Object.fromEntries([...options.files()].map(([queueId, file]) => [queueId, configHash(file.config)])),
    });
    this.share = new LeadershipShare(resources.kv, replicaId, settings.leaderLeaseMs, log, announce);
    this.share.start();
    this.divergenceCheck = setInterval(() => this.reportDivergence(), settings.leaderLeaseMs);
    this.divergenceCheck.unref();
  }

  /** Logs when replicas start or stop running different versions of a queue's file. */
  private reportDivergence(): void {
    for (const queueId of this.options.files().keys()) {
      const hashes = this.configHashes(queueId);
      const diverges = new Set(Object.values(hashes)).size > 1;
      if (diverges === this.diverging.has(queueId)) continue;
      if (diverges) {
        this.diverging.add(queueId);
        this.options.log.warn({ queue: queueId, hashes }, 'replicas run different versions of the queue file');
      } else {
        this.diverging.delete(queueId);
        this.options.log.info({ queue: queueId }, 'replicas run the same version of the queue file again');
      }
    }
  }

  /**
   * The hash of the queue's file on each present replica (as last announced; absent where a replica has no
   * file for the queue): replicas whose hashes differ are mid-rollout, or misconfigured.
   */
  configHashes(queueId: string): Record<string, string | null> {
    const hashes: Record<string, string | null> = {};
    for (const [replica, state] of this.share.peers) {
      const queues = (state as { queues?: Record<string, string> } | undefined)?.queues;
      hashes[replica] = queues?.[queueId] ?? null;
    }
    return hashes;
  }

  /** Each queue's current local copy. */
  currentStores(): ReadonlyMap<string, Store> {
    return this.stores;
  }

  /** A queue's backing each time its runtime starts: a fresh local copy, rebuilt from the log. */
  backing(queueId: string, file: QueueFile): QueueBacking {
    const { js, jsm, settings, resources, replicaId, log } = this.options;
    const store = new MemoryStore();
    store.onOutcomesCommitted((queueIds) => {
      for (const listener of this.outcomeListeners) listener(queueIds);
    });
    this.stores.set(queueId, store);
    const [plan] = planQueueLogs(settings, [file]);
    const replicationLog = new ReplicationLog(js, jsm, plan!.stream, plan!.subjects, log);
    const lease = new LeaderLease(resources.kv, leaderLeaseKey(queueId), {
      leaseMs: settings.leaderLeaseMs,
      replicaId,
      log,
      share: this.share,
    });
    const provision = async () => {
      const others = planQueueLogs(
        settings,
        [...this.options.files().values()].filter((f) => f.queueId !== queueId),
      );
      const info = await ensureQueueLog(jsm, settings, plan!, others);
      replicationLog.useDirectGets(info.config.allow_direct === true);
      // A stream made again starts its sequences again: its producer is another one.
      store.adoptProducerId(derivedUuid(`${plan!.stream}@${info.created}`, 0));
    };
    return {
      store,
      history: (id: string, applier: QueueApplier) =>
        new ReplicatedHistory(applier, {
          queueId: id,
          replicaId,
          replicationLog: replicationLog,
          lease,
          store,
          log,
          checkpoints: resources.checkpoints,
          checkpointIntervalRecords: this.options.checkpointIntervalRecords,
          checkpointIntervalBytes: this.options.checkpointIntervalBytes,
          checkpointIntervalMs: this.options.checkpointIntervalMs,
          checkpointCompression: this.options.checkpointCompression,
          prepare: provision,
          reachable: this.options.connected,
        }),
    };
  }

  /** Where outcome delivery finds each queue's outbox: its local copy, delivered by its leader. */
  outboxes(): Outboxes {
    const queues = this;
    return {
      of: (queueId): QueueOutbox => ({
        get store() {
          return queues.storeOf(queueId);
        },
        get delivering() {
          return queues.options.runtime(queueId)?.leading ?? false;
        },
        advance: (sequence) => this.running(queueId).recordOutbox({ type: 'delivery.advance', sequence }),
        park: (parked) => this.running(queueId).recordOutbox({ type: 'delivery.park', parked }),
        release: () => this.running(queueId).recordOutbox({ type: 'delivery.release' }),
      }),
      stores: () => this.stores.values(),
      onOutcomesCommitted: (listener) => {
        this.outcomeListeners.push(listener);
      },
    };
  }

  /** Stream consumers' positions: per queue, recorded through the queue's log. */
  consumers(): ConsumerPositions {
    return {
      perQueue: true,
      lastSequence: (queueId) => this.storeOf(queueId).lastSequence(),
      position: (consumer, queueId) => this.storeOf(queueId).consumerPosition(consumer),
      owner: (consumer, queueId) => this.storeOf(queueId).consumerOwner(consumer),
      advance: (consumer, sequence, queueId, owner) =>
        this.running(queueId).recordOutbox({ type: 'consumer.advance', consumer, sequence, ...(owner === undefined ? {} : { owner }) }),
    };
  }

  /** The queue's local copy; an empty one for a queue this replica has none of. */
  private storeOf(queueId: string | undefined): Store {
    return (queueId === undefined ? undefined : this.stores.get(queueId)) ?? EMPTY;
  }

  /** The queue's runtime, through which its outbox records go. */
  private running(queueId: string | undefined): QueueRuntime {
    const queue = queueId === undefined ? undefined : this.options.runtime(queueId);
    if (!queue) throw new Error(`queue "${queueId}" is not running on this replica`);
    return queue;
  }

  async stop(): Promise<void> {
    clearInterval(this.divergenceCheck);
    await this.share.stop();
  }
}

/** Stands in for a queue this replica has no copy of: nothing recorded. */
const EMPTY = new MemoryStore({ producerId: '' });
