// The replicated mode's start-up (POOL_REPLICATION_BACKEND=broker): connect to the NATS cluster, make sure
// of the replication resources, and hand the queue registry a backing per queue (replicated-queues.ts).
// Until NATS answers, the service stays NOT_SERVING and retries; a resource that is missing (bind mode) or
// does not fit is a start-up error naming it, and the process exits.
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { QueueFile } from '../config/queue-files.js';
import type { ServiceConfig } from '../config/service-config.js';
import { connectionOptions } from '../nats/connection-options.js';
import { describeError } from '../nats/broker-error.js';
import type { QueueRuntime } from '../queue/queue-runtime.js';
import { ReplicatedQueues } from '../replication/replicated-queues.js';
import { QueueStores } from '../store/queue-stores.js';
import type { ServiceMode } from './service-mode.js';
import { ReplicationResourceError } from '../replication/jetstream/errors.js';
import { ensureReplicationResources, replicationSettings, type ReplicationResources } from '../replication/jetstream/resources.js';

const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 5_000;
/** How long one JetStream API request or append waits for its answer. */
const REQUEST_TIMEOUT_MS = 5_000;

/**
 * Connects and makes sure of the resources for the queues of `files`. Retries while NATS is unreachable;
 * throws a ReplicationResourceError for a resource that is missing or misconfigured.
 */
export async function openReplicatedMode(
  config: ServiceConfig,
  log: Logger,
  files: () => ReadonlyMap<string, QueueFile>,
  runtime: (queueId: string) => QueueRuntime | undefined,
): Promise<ServiceMode> {
  const link = new Link();
  const nc = await connectUntilReachable(config, log, link);
  const settings = replicationSettings(config, REQUEST_TIMEOUT_MS);
  let resources: ReplicationResources | undefined;
  for (let retryInMs = RETRY_FIRST_MS; !resources; retryInMs = Math.min(retryInMs * 2, RETRY_MAX_MS)) {
    try {
      resources = await ensureReplicationResources(nc, settings, files().values());
    } catch (err) {
      // A resource that is missing or does not fit needs an operator: say which, and stop.
      if (!(err instanceof ReplicationResourceError) || err.kind !== 'jetstream') throw err;
      log.error({ err: describeError(err), retryInMs }, 'JetStream not ready for the replicated mode; retrying');
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
    }
  }
  const js = jetstream(nc, { timeout: REQUEST_TIMEOUT_MS });
  const jsm = await js.jetstreamManager();
  const queues = new ReplicatedQueues({
    js,
    jsm,
    settings,
    resources,
    replicaId: config.replica_id,
    log,
    files,
    runtime,
    connected: () => link.up,
    checkpointIntervalRecords: config.checkpoint_interval_records,
    checkpointIntervalBytes: config.checkpoint_interval_bytes,
    checkpointIntervalMs: config.checkpoint_interval_secs * 1000,
    checkpointCompression: config.checkpoint_compression,
  });
  log.info({ replica: config.replica_id, queues: resources.queues.size }, 'replicated mode: resources ready');
  const store = new QueueStores(() => queues.currentStores());
  return {
    store,
    backing: (queueId, file) => queues.backing(queueId, file),
    outboxes: queues.outboxes(),
    consumers: queues.consumers(),
    configHashes: (queueId) => queues.configHashes(queueId),
    describe: { replica: config.replica_id, mode: 'replicated' },
    async stop() {
      link.stop();
      await queues.stop();
      await nc.drain().catch(() => undefined);
      await store.close();
    },
  };
}

async function connectUntilReachable(config: ServiceConfig, log: Logger, link: Link): Promise<NatsConnection> {
  const target = connectionOptions(config, {
    name: `matchmaker-replica-${config.replica_id}`,
    reconnectTimeWaitMs: 500,
    requestTimeoutMs: REQUEST_TIMEOUT_MS,
  });
  for (let retryInMs = RETRY_FIRST_MS; ; retryInMs = Math.min(retryInMs * 2, RETRY_MAX_MS)) {
    try {
      const nc = await connect(target.options);
      log.info({ url: target.display, server: nc.getServer() }, 'connected to the NATS cluster of the replicated mode');
      link.watch(nc, log);
      return nc;
    } catch (err) {
      log.error({ url: target.display, err: describeError(err), retryInMs }, 'NATS unreachable: not ready, retrying');
      await new Promise((resolve) => setTimeout(resolve, retryInMs));
    }
  }
}

/** How often the connection is proved with a round trip to the server, and how old a proof may be. */
const LINK_CHECK_MS = 1_000;
const LINK_PROOF_MS = 4_000;
/**
 * A server that has not answered a round trip for this long, while this process kept time (its event
 * loop was not held up), is taken as hung: the client leaves it for another node. A hung node keeps its
 * connections open, so without this the client would notice only by its pings (10 to 15 s), and the
 * replica would take no request meanwhile.
 */
const LINK_SILENT_MS = 3_000;

/**
 * Whether the connection to the cluster is up: down at once on a disconnect, and up again once a round
 * trip (PING/PONG) has come back since, so that a missed status event cannot leave a replica refusing
 * requests on a connection that works. A server that stays silent is left (see LINK_SILENT_MS).
 */
class Link {
  private provedAt = performance.now();
  /** Since when the connection is up (the last connect or reconnect), and the last check's time. */
  private connectedAt = performance.now();
  private checkedAt = performance.now();
  private timer: NodeJS.Timeout | undefined;

  get up(): boolean {
    return performance.now() - this.provedAt < LINK_PROOF_MS;
  }

  watch(nc: NatsConnection, log: Logger): void {
    let connected = true;
    this.timer = setInterval(() => {
      const now = performance.now();
      // A check that comes late (the event loop was held up) proves nothing about the server: answers may
      // be waiting unread. Only a silence measured while this process kept time counts.
      const punctual = now - this.checkedAt < LINK_CHECK_MS * 1.5;
      this.checkedAt = now;
      const silentMs = now - Math.max(this.provedAt, this.connectedAt);
      if (connected && punctual && silentMs >= LINK_SILENT_MS) {
        log.warn({ server: nc.getServer(), silentMs: Math.round(silentMs) }, 'replication: NATS server silent; moving to another node');
        this.connectedAt = now;
        nc.reconnect().catch(() => undefined);
        return;
      }
      nc.flush().then(
        () => {
          this.provedAt = performance.now();
        },
        () => undefined,
      );
    }, LINK_CHECK_MS);
    this.timer.unref();
    void (async () => {
      try {
        for await (const s of nc.status()) {
          if (s.type === 'disconnect') {
            connected = false;
            this.provedAt = Number.NEGATIVE_INFINITY;
            log.warn({ server: s.server }, 'replication: NATS disconnected; queues unavailable until it reconnects');
          } else if (s.type === 'reconnect') {
            connected = true;
            this.connectedAt = performance.now();
            log.info({ server: s.server }, 'replication: NATS reconnected');
          }
        }
      } catch {
        // ends with the connection
      }
    })();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
