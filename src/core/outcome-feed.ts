// What the WebSocket outcome stream reads and writes: the outbox after an offset (optionally one queue's
// index), named consumers' durable positions, a subscription to newly committed outcomes, and each queue's
// sink kind. Available once the store is open (the stream refuses upgrades with UNAVAILABLE before).
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { permissionDenied, quote, type ServiceError, unavailable } from '../errors.js';
import type { OpenedService, SinkKind } from './service-parts.js';

export class OutcomeFeed {
  /** Highest position committed (or being committed) per consumer by this process: acks never go backwards. */
  private readonly positions = new Map<string, bigint>();
  /** Owners being committed by this process, so two connections claiming one consumer at once do not both win. */
  private readonly claims = new Map<string, string>();
  private readonly listeners = new Set<(queueIds: ReadonlySet<string>) => void>();
  private subscribed: OpenedService['delivery'] | undefined;

  constructor(private readonly opened: () => OpenedService | undefined) {}

  /** Throws UNAVAILABLE until the store is open. */
  requireOpen(): void {
    this.parts();
  }

  /** Outcomes after `afterSequence` of the queues `queueFilter` accepts, in producer_sequence order. */
  readOutcomes(afterSequence: bigint, queueFilter: (queueId: string) => boolean, limit: number): Outcome[] {
    return this.parts().store.listOutcomes({ afterSequence, queueFilter, limit });
  }

  /** One queue's outcomes after `afterSequence`, through the store's per-queue index. */
  queueOutcomes(queueId: string, afterSequence: bigint, limit: number): Outcome[] {
    return this.parts().store.queueOutcomes(queueId, afterSequence, limit);
  }

  /** The highest producer_sequence recorded (of `queueId` when offsets are per queue; 0 when none). */
  lastSequence(queueId?: string): bigint {
    return this.parts().consumers.lastSequence(queueId);
  }

  /** Whether each queue numbers its own outcomes (the replicated mode): a stream then follows one queue. */
  get offsetsPerQueue(): boolean {
    return this.parts().consumers.perQueue;
  }

  /** Resolves once everything committed so far is durable: only durable outcomes go out. */
  whenDurable(): Promise<void> {
    return this.parts().store.whenDurable();
  }

  sinkOf(queueId: string): SinkKind | undefined {
    return this.parts().delivery.sinkOf(queueId);
  }

  /** The consumer's position: the stored one or a higher one this process is committing. */
  consumerPosition(consumer: string, queueId?: string): bigint | undefined {
    const stored = this.parts().consumers.position(consumer, queueId);
    const local = this.positions.get(positionKey(consumer, queueId));
    if (stored === undefined) return local;
    return local === undefined || stored > local ? stored : local;
  }

  /** Commits the consumer's position if it moves forward; resolves with the position afterwards. */
  async advanceConsumer(consumer: string, sequence: bigint, queueId?: string): Promise<bigint> {
    const current = this.consumerPosition(consumer, queueId);
    if (current !== undefined && sequence <= current) return current;
    this.positions.set(positionKey(consumer, queueId), sequence);
    await this.parts().consumers.advance(consumer, sequence, queueId);
    return this.consumerPosition(consumer, queueId) ?? sequence;
  }

  /** The bearer token (by name) that owns the consumer: the stored owner, or a claim this process is committing. */
  consumerOwner(consumer: string, queueId?: string): string | undefined {
    return this.parts().consumers.owner(consumer, queueId) ?? this.claims.get(positionKey(consumer, queueId));
  }

  /**
   * Makes `owner` the consumer's owner if it has none, starting it at `sequence` if it has no position yet.
   * Throws PERMISSION_DENIED when another token owns it, also when another replica's claim reached the
   * queue's log first (the first owner recorded stays).
   */
  async claimConsumer(consumer: string, owner: string, sequence: bigint, queueId?: string): Promise<void> {
    const current = this.consumerOwner(consumer, queueId);
    if (current === undefined) {
      const key = positionKey(consumer, queueId);
      this.claims.set(key, owner);
      const position = this.consumerPosition(consumer, queueId) ?? sequence;
      this.positions.set(key, position);
      try {
        await this.parts().consumers.advance(consumer, position, queueId, owner);
      } finally {
        this.claims.delete(key);
      }
    }
    const recorded = this.consumerOwner(consumer, queueId);
    if (recorded !== owner) throw consumerTaken(consumer);
  }

  /** Called with the queues of each commit that recorded outcomes; returns the unsubscribe. */
  onOutcomes(listener: (queueIds: ReadonlySet<string>) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private parts(): OpenedService {
    const opened = this.opened();
    if (!opened) throw unavailable('service is starting; reconnect with backoff');
    if (this.subscribed !== opened.delivery) {
      this.subscribed = opened.delivery;
      opened.delivery.onOutcomes((queueIds) => {
        for (const listener of this.listeners) listener(queueIds);
      });
    }
    return opened;
  }
}

/** PERMISSION_DENIED for a named consumer another token owns. */
export function consumerTaken(consumer: string): ServiceError {
  return permissionDenied(`the consumer ${quote(consumer)} belongs to another token; choose another name`);
}

/** A consumer's key among the positions being committed: per queue when offsets are. */
const positionKey = (consumer: string, queueId: string | undefined) => (queueId === undefined ? consumer : `${queueId}\u0000${consumer}`);
