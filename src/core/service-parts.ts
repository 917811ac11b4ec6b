// The parts of a running service the core reads besides the queues' write path: the store, the queue
// registry and outcome delivery, available once the store is open. The core names only what it needs of
// outcome delivery (src/outcomes/delivery.ts) here, so the operator routes and the outcome stream depend on
// that much; src/server.ts hands in the real one.
import type { QueueConfig } from '../config/queue-config.js';
import type { ConsumerPositions } from '../outcomes/outbox.js';
import type { QueueRegistry } from '../queue/queue-registry.js';
import type { Store } from '../store/store.js';

/** Where a queue's outcomes go. */
export type SinkKind = QueueConfig['outcomes']['sink'];

/** One queue's outcome delivery, as the admin route and /metrics show it. */
export interface DeliveryStatus {
  queueId: string;
  sink: SinkKind;
  /** Decimal strings (uint64). */
  deliveredThrough: string;
  lastRecorded: string;
  parked?: { sequence: string; attempts: number; lastError: string; parkedAtMs: number };
}

/** What the core uses of outcome delivery (src/outcomes/delivery.ts). */
export interface OutcomeDeliveryPort {
  status(): DeliveryStatus[];
  /** Retries a parked delivery now; false if the queue has none parked. */
  release(queueId: string): Promise<boolean>;
  sinkOf(queueId: string): SinkKind | undefined;
  /** Called after each commit that recorded outcomes, with their queues. */
  onOutcomes(listener: (queueIds: ReadonlySet<string>) => void): void;
}

export interface OpenedService {
  store: Store;
  registry: QueueRegistry;
  delivery: OutcomeDeliveryPort;
  /** Named stream consumers' positions (per queue in the replicated mode). */
  consumers: ConsumerPositions;
  /** The replicated mode: each present replica's hash of a queue's file (null: it has none). */
  configHashes?: (queueId: string) => Record<string, string | null>;
}
