// The embedded mode's start-up (the default): one process, its queues and outcomes in one lmdb store in the
// data directory. Start-up waits until the store can commit; a commit that fails later stops the process.
import type { Logger } from 'pino';
import type { ServiceConfig } from '../config/service-config.js';
import { storeConsumers, storeOutboxes } from '../outcomes/outbox.js';
import { codeOf } from '../store/data-dir.js';
import { LmdbStore } from '../store/lmdb-store.js';
import type { Store } from '../store/store.js';
import type { ServiceMode } from './service-mode.js';

/** Where the service listens, for the log lines of a store that cannot commit yet. */
export interface ServiceAddress {
  grpcPort: number;
  httpPort: number;
}

export async function openEmbeddedMode(config: ServiceConfig, log: Logger, address: ServiceAddress): Promise<ServiceMode> {
  const store = new LmdbStore({ path: config.data_dir, onFatal: (err) => storeFailed(log, config.data_dir, err) });
  await untilWritable(store, { dataDir: config.data_dir, ...address }, log);
  return {
    store,
    outboxes: storeOutboxes(store),
    consumers: storeConsumers(store),
    describe: { producerId: store.producerId },
    stop: () => store.close(),
  };
}

/** A commit to the embedded store failed: the durable state is behind memory, so the process stops. */
export function storeFailed(log: Logger, dataDir: string, err: unknown): never {
  log.fatal({ dataDir, code: codeOf(err), err }, 'store commit failed: stopping so that a restart reloads the durable state');
  process.exit(1);
}

const PROBE_RETRY_FIRST_MS = 500;
const PROBE_RETRY_MAX_MS = 5_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Start-up waits here until the store can commit (a full disk: lmdb opens and reads, then fails the first
 * write). Until then nothing is loaded, health stays NOT_SERVING, `/readyz` 503 and every call UNAVAILABLE;
 * the probe is retried with backoff, so the service turns ready on its own once space is back.
 */
async function untilWritable(store: Store, where: { dataDir: string } & ServiceAddress, log: Logger): Promise<void> {
  for (let retryInMs = PROBE_RETRY_FIRST_MS, failures = 0; ; retryInMs = Math.min(retryInMs * 2, PROBE_RETRY_MAX_MS)) {
    try {
      await store.probeWrite();
      if (failures > 0) log.info({ dataDir: where.dataDir, failures }, 'store can commit again: starting');
      return;
    } catch (err) {
      failures++;
      // The errno and lmdb's message (with the page it could not write), in place of its raw stderr line.
      const reason = err instanceof Error ? err.message : String(err);
      log.error({ ...where, code: codeOf(err), reason, retryInMs }, 'store cannot commit: not ready, retrying');
      await sleep(retryInMs);
    }
  }
}
