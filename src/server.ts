// Composes the service: servers first (so probes answer NOT_SERVING / UNAVAILABLE while starting), then
// the store and the queues, then serving. stop() is the SIGTERM path.
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import { openListeners } from './api/listeners.js';
import { Dashboard } from './api/dashboard/dashboard.js';
import { ServiceMetrics } from './api/metrics/service-metrics.js';
import { scanQueueDirectory, watchQueueDirectory, type DirectoryScan, type QueueFile } from './config/queue-files.js';
import type { ServiceConfig } from './config/service-config.js';
import { Access } from './core/access.js';
import { MatchmakerCore } from './core/matchmaker-core.js';
import { Operator } from './core/operator.js';
import type { OpenedService } from './core/service-parts.js';
import { OutcomeFeed } from './core/outcome-feed.js';
import { engineVersion, useEngineThreads } from './engine/native.js';
import { QueueRegistry } from './queue/queue-registry.js';
import { fanOut } from './queue/queue-telemetry.js';
import { OutcomeDelivery } from './outcomes/delivery.js';
import { openEmbeddedMode } from './modes/embedded.js';
import { openReplicatedMode } from './modes/replicated.js';
import { BrokerConnection } from './outcomes/broker/connection.js';
import { sinkFactory } from './outcomes/sinks/index.js';
import { MatchmakerAdminService } from './gen/matchmaker/admin/v1/admin_pb.js';
import { MatchmakerService } from './gen/matchmaker/core/v1/service_pb.js';

export interface RunningService {
  grpcPort: number;
  httpPort: number;
  stop(): Promise<void>;
}

const HEALTH_SERVICES = ['', MatchmakerService.typeName, MatchmakerAdminService.typeName];

export async function startService(config: ServiceConfig, log: Logger): Promise<RunningService> {
  // Before any queue makes its engine, which takes the threads in force then.
  const engineThreads = useEngineThreads(config.engine_threads);
  const core = new MatchmakerCore();
  const health = new HealthImplementation();
  const setHealth = (status: 'SERVING' | 'NOT_SERVING') => {
    for (const s of HEALTH_SERVICES) health.setStatus(s, status);
  };
  setHealth('NOT_SERVING');

  let opened: OpenedService | undefined;
  const operator = new Operator(core, () => opened);
  const metrics = new ServiceMetrics(() => operator.metricsSnapshot());
  const dashboard = new Dashboard(operator);
  const telemetry = fanOut(metrics.queues, dashboard.activity);
  const feed = new OutcomeFeed(() => opened);
  const access = await Access.open(config, log, (scope, code) => metrics.accessRefused(scope, code));
  const listeners = await openListeners(config, { core, operator, health, metrics, dashboard, feed, access, log });
  const { grpcPort, httpPort } = listeners;

  let registry: QueueRegistry | undefined;
  let files: ReadonlyMap<string, QueueFile> | undefined;
  const mode =
    config.pool_replication_backend === 'broker'
      ? // The queue files are read first: their streams are made sure of before anything is served.
        await openReplicatedMode(
          config,
          log,
          () => registry?.current ?? (files ??= scanQueueDirectory(config.queue_config_dir).queues),
          (queueId) => registry?.get(queueId),
        )
      : await openEmbeddedMode(config, log, { grpcPort, httpPort });
  const { store, outboxes } = mode;
  registry = new QueueRegistry(store, log, { ...(mode.backing ? { backing: mode.backing } : {}), telemetry });
  const queues = registry;
  const broker = new BrokerConnection(config, log);
  const delivery = new OutcomeDelivery(outboxes, sinkFactory({ broker, log }), log, config.outcome_retention_secs * 1000, metrics.delivery);
  // Every queue known this run, retired ones included: their last outcomes still go out.
  const follow = (scan: DirectoryScan) => {
    queues.applyScan(scan);
    return delivery.configure(new Map(queues.all().map((q) => [q.queueId, q.config.outcomes])));
  };
  opened = {
    store,
    registry: queues,
    delivery,
    consumers: mode.consumers,
    ...(mode.configHashes ? { configHashes: mode.configHashes } : {}),
  };
  await follow(scanQueueDirectory(config.queue_config_dir));
  const dormant = queues.dormantQueueIds();
  if (dormant.length > 0) log.warn({ queues: dormant }, 'stored tickets of queues with no queue file are kept until the file returns');
  const watcher = watchQueueDirectory(config.queue_config_dir, config.config_reload_debounce_ms, () => {
    try {
      follow(scanQueueDirectory(config.queue_config_dir, queues.current)).catch((err: unknown) =>
        log.error({ err }, 'outcome sinks could not follow the queue directory'),
      );
    } catch (err) {
      log.error({ err }, 'queue directory could not be read; configuration unchanged');
    }
  });

  core.serve(queues);
  setHealth('SERVING');
  // Per queue too (service name `queue/<queue_id>`): a replica catching up with a queue's log, or cut off
  // from its broker, does not serve that queue.
  const updateQueueHealth = () => {
    for (const q of queues.all()) health.setStatus(`queue/${q.queueId}`, q.serving ? 'SERVING' : 'NOT_SERVING');
  };
  updateQueueHealth();
  const queueHealth = setInterval(updateQueueHealth, QUEUE_HEALTH_EVERY_MS);
  queueHealth.unref();
  log.info(
    {
      grpcPort,
      httpPort,
      tls: listeners.tls,
      queues: [...queues.current.keys()],
      engine: engineVersion(),
      engineThreads,
      ...mode.describe,
    },
    'listening',
  );

  let stopping: Promise<void> | undefined;
  // docs/operations.md (Shutdown) describes these steps and what bounds each.
  const stop = () =>
    (stopping ??= (async () => {
      const phases = phaseTimer();
      clearInterval(queueHealth);
      setHealth('NOT_SERVING');
      for (const q of queues.all()) health.setStatus(`queue/${q.queueId}`, 'NOT_SERVING');
      const drained = core.stopAccepting();
      log.info({ drainMs: config.shutdown_drain_ms }, 'shutting down: new requests get UNAVAILABLE');
      await sleep(config.shutdown_drain_ms);
      phases.mark('drain');
      const finished = await Promise.race([drained.then(() => true), sleep(config.shutdown_timeout_ms).then(() => false)]);
      if (!finished) log.warn('shutdown timeout: closing with requests still in flight');
      phases.mark('inFlight');
      watcher.close();
      access.close();
      // No call reaches the core any more: what the servers still hold are answers being written, calls that
      // will only get UNAVAILABLE, and clients that keep their connections busy (or idle, or half-sent). They
      // get CLOSE_GRACE_MS, then their connections are cut. Stream sockets are connections of the HTTP server
      // too: close them with it.
      await listeners.close(CLOSE_GRACE_MS);
      phases.mark('transports');
      await queues.stopAll();
      phases.mark('queues');
      await delivery.stop();
      await broker.close();
      phases.mark('delivery');
      await mode.stop();
      phases.mark('store');
      dashboard.stop();
      log.info({ phasesMs: phases.durations }, 'stopped');
    })());
  return { grpcPort, httpPort, stop };
}

/** How often each queue's health status is brought up to date. */
const QUEUE_HEALTH_EVERY_MS = 500;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** After the core has drained, how long the servers get to finish their answers before connections are cut. */
const CLOSE_GRACE_MS = 500;

/** Milliseconds spent in each named step since the previous one. */
function phaseTimer() {
  let last = performance.now();
  const durations: Record<string, number> = {};
  return {
    durations,
    mark(phase: string) {
      const now = performance.now();
      durations[phase] = Math.round(now - last);
      last = now;
    },
  };
}
