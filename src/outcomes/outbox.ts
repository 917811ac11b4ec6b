// Where outcome delivery finds a queue's outcomes and records how far it got. In the embedded mode every
// queue's outbox is the one local store, and this process always delivers. In the replicated mode each
// queue's outbox is that queue's local copy, identical on every replica; only the queue's leader delivers,
// and it records its progress in the queue's log (src/replication/replicated-queues.ts, `outboxes()`), so the next leader
// resumes from it.
import type { ParkedDelivery, Store } from '../store/store.js';

/** One queue's outbox as delivery sees it. */
export interface QueueOutbox {
  /** Holds the queue's recorded outcomes and its delivery state (cursor, parked delivery). */
  readonly store: Store;
  /** Whether this process delivers the queue's outcomes now. */
  readonly delivering: boolean;
  /** The sink acknowledged every outcome of the queue through `sequence`. */
  advance(sequence: bigint): Promise<void>;
  /** Retries ran out: later outcomes wait until released. */
  park(parked: ParkedDelivery): Promise<void>;
  release(): Promise<void>;
}

/** Every queue's outbox. */
export interface Outboxes {
  of(queueId: string): QueueOutbox;
  /** The stores holding outcomes, each swept for retention. */
  stores(): Iterable<Store>;
  /** Called after each commit that recorded outcomes, with their queues. */
  onOutcomesCommitted(listener: (queueIds: ReadonlySet<string>) => void): void;
}

/** The embedded mode's outboxes: one store for every queue, delivered by this process. */
export function storeOutboxes(store: Store): Outboxes {
  return {
    of: (queueId) => ({
      store,
      delivering: true,
      advance: (sequence) => store.commit([{ type: 'delivery.advance', queueId, sequence }]),
      park: (parked) => store.commit([{ type: 'delivery.park', queueId, parked }]),
      release: () => store.commit([{ type: 'delivery.park', queueId, parked: undefined }]),
    }),
    stores: () => [store],
    onOutcomesCommitted: (listener) => store.onOutcomesCommitted(listener),
  };
}

/**
 * Named WebSocket stream consumers' positions. In the embedded mode offsets are the one store's sequence,
 * across queues; in the replicated mode each queue numbers its own outcomes (`perQueue`), so a stream
 * follows one queue, and a consumer's position is the queue's: recorded in its log, held by every replica.
 */
export interface ConsumerPositions {
  readonly perQueue: boolean;
  /** The highest sequence recorded (of `queueId` when offsets are per queue). */
  lastSequence(queueId: string | undefined): bigint;
  position(consumer: string, queueId: string | undefined): bigint | undefined;
  /** The bearer token (by name) that owns the consumer, if one does. */
  owner(consumer: string, queueId: string | undefined): string | undefined;
  /** `owner`: claims the consumer for that token if no token owns it yet. */
  advance(consumer: string, sequence: bigint, queueId: string | undefined, owner?: string): Promise<void>;
}

export function storeConsumers(store: Store): ConsumerPositions {
  return {
    perQueue: false,
    lastSequence: () => store.lastSequence(),
    position: (consumer) => store.consumerPosition(consumer),
    owner: (consumer) => store.consumerOwner(consumer),
    advance: (consumer, sequence, _queueId, owner) =>
      store.commit([{ type: 'consumer.advance', consumer, sequence, ...(owner === undefined ? {} : { owner }) }]),
  };
}
