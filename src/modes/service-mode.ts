// What a mode hands the service: where queues keep their state and outcomes, and how it stops. The embedded
// mode (embedded.ts) keeps everything in one lmdb store; the replicated mode (replicated.ts) gives every
// queue a replicated log and a local copy. server.ts composes the rest the same way over both.
import type { ConsumerPositions, Outboxes } from '../outcomes/outbox.js';
import type { QueueBackingFactory } from '../queue/queue-registry.js';
import type { Store } from '../store/store.js';

export interface ServiceMode {
  /** Every queue's tickets and outcomes, as one store for the operator routes, /metrics and the outcome stream. */
  readonly store: Store;
  readonly outboxes: Outboxes;
  readonly consumers: ConsumerPositions;
  /** How each queue is backed; absent: the store itself (queue-history.ts, EmbeddedHistory). */
  readonly backing?: QueueBackingFactory;
  /** The queue file's hash on each replica present; absent where there is one process. */
  readonly configHashes?: (queueId: string) => Record<string, string | null>;
  /** What the 'listening' log line says of the mode. */
  readonly describe: Record<string, unknown>;
  /** Stops the mode's connections and closes its store, once the queues and delivery have stopped. */
  stop(): Promise<void>;
}
