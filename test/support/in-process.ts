// The service's core, queue registry and queue runtimes in this process, on the in-memory store: for tests
// of their behaviour that need no sockets and run in milliseconds. Queue files are YAML text, as on disk.
import { parse } from 'yaml';
import { queueFileSchema } from '../../src/config/queue-config.js';
import type { DirectoryScan } from '../../src/config/queue-files.js';
import { MatchmakerCore } from '../../src/core/matchmaker-core.js';
import { createLogger } from '../../src/log.js';
import { QueueRegistry } from '../../src/queue/queue-registry.js';
import { MemoryStore } from '../../src/store/memory-store.js';

export interface InProcessService {
  core: MatchmakerCore;
  registry: QueueRegistry;
  store: MemoryStore;
  /** Applies queue files (YAML by queue id) as a rescan of the queue directory would. */
  setQueues(queues: Record<string, string>): void;
  /** Stops ticking (the store is kept, so a new service on it is a restart). */
  stop(): Promise<void>;
}

export function scanOf(queues: Record<string, string>): DirectoryScan {
  const files = Object.entries(queues).map(
    ([queueId, yaml]) => [queueId, { queueId, file: `${queueId}.yaml`, config: queueFileSchema.parse(parse(yaml)).config }] as const,
  );
  return { queues: new Map(files), errors: [] };
}

export function inProcessService(queues: Record<string, string>, store = new MemoryStore()): InProcessService {
  const registry = new QueueRegistry(store, createLogger('silent'));
  registry.applyScan(scanOf(queues));
  const core = new MatchmakerCore();
  core.serve(registry);
  return {
    core,
    registry,
    store,
    setQueues: (next) => registry.applyScan(scanOf(next)),
    stop: () => registry.stopAll(),
  };
}
