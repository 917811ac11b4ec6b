// Several stores, one per queue, seen as one Store: the replicated mode keeps each queue's local copy in a
// store of its own (its outcomes numbered per queue), while the operator routes, /metrics and the outcome
// stream read "the store". Reads and writes of one queue go to that queue's store; reads across queues
// merge. Outcome sequences are per queue here, so a listing across queues is ordered by (sequence, queue).
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { OutcomeQuery, ParkedDelivery, QueueSnapshot, Store, StoreChange, StoredTicket, TicketRef } from './store.js';

export class QueueStores implements Store {
  /** `stores`: the current store of each queue. */
  constructor(
    private readonly stores: () => ReadonlyMap<string, Store>,
    readonly producerId = 'per-queue',
  ) {}

  private of(queueId: string): Store | undefined {
    return this.stores().get(queueId);
  }

  async commit(changes: readonly StoreChange[]): Promise<void> {
    const byQueue = new Map<string, StoreChange[]>();
    for (const change of changes) {
      const queueId = queueOf(change);
      if (queueId === undefined) throw new Error(`a ${change.type} change names no queue; record it through its queue`);
      let list = byQueue.get(queueId);
      if (!list) byQueue.set(queueId, (list = []));
      list.push(change);
    }
    await Promise.all(
      [...byQueue].map(([queueId, list]) => {
        const store = this.of(queueId);
        if (!store) throw new Error(`queue "${queueId}" has no store on this replica`);
        return store.commit(list);
      }),
    );
  }

  async whenDurable(): Promise<void> {
    await Promise.all([...this.stores().values()].map((s) => s.whenDurable()));
  }

  async probeWrite(): Promise<void> {}

  loadQueue(queueId: string): QueueSnapshot {
    return this.of(queueId)?.loadQueue(queueId) ?? { tickets: [], backfills: [] };
  }

  readTicket(ref: TicketRef): Readonly<StoredTicket> | undefined {
    return this.of(ref.queueId)?.readTicket(ref);
  }

  lendTicketBytes(ref: TicketRef): Uint8Array | undefined {
    return this.of(ref.queueId)?.lendTicketBytes(ref);
  }

  storedQueueIds(): string[] {
    return [...this.stores()].flatMap(([, s]) => s.storedQueueIds()).sort();
  }

  listOutcomes(query: OutcomeQuery): Outcome[] {
    const limit = query.limit ?? 1000;
    const merged: Outcome[] = [];
    for (const [queueId, store] of this.stores()) {
      if (query.queueFilter && !query.queueFilter(queueId)) continue;
      merged.push(...store.listOutcomes({ ...query, limit }));
    }
    merged.sort((a, b) =>
      a.producerSequence !== b.producerSequence ? (a.producerSequence < b.producerSequence ? -1 : 1) : a.queueId < b.queueId ? -1 : 1,
    );
    return merged.slice(0, limit);
  }

  queueOutcomes(queueId: string, afterSequence: bigint, limit: number): Outcome[] {
    return this.of(queueId)?.queueOutcomes(queueId, afterSequence, limit) ?? [];
  }

  deliveryCursor(queueId: string): bigint {
    return this.of(queueId)?.deliveryCursor(queueId) ?? 0n;
  }

  parkedDelivery(queueId: string): ParkedDelivery | undefined {
    return this.of(queueId)?.parkedDelivery(queueId);
  }

  consumerPosition(_consumer: string): bigint | undefined {
    return undefined;
  }

  consumerOwner(_consumer: string): string | undefined {
    return undefined;
  }

  queueLastSequence(queueId: string): bigint {
    return this.of(queueId)?.queueLastSequence(queueId) ?? 0n;
  }

  /** The highest sequence of any queue (each queue numbers its own). */
  lastSequence(): bigint {
    let last = 0n;
    for (const store of this.stores().values()) if (store.lastSequence() > last) last = store.lastSequence();
    return last;
  }

  onOutcomesCommitted(_listener: (queueIds: ReadonlySet<string>) => void): void {
    throw new Error('subscribe to the queues\u2019 outboxes instead');
  }

  async close(): Promise<void> {
    await this.whenDurable();
  }
}

function queueOf(change: StoreChange): string | undefined {
  switch (change.type) {
    case 'ticket.put':
      return change.ticket.queueId;
    case 'backfill.put':
      return change.backfill.queueId;
    case 'ticket.resolve':
    case 'ticket.reactivate':
    case 'ticket.delete':
      return change.ref.queueId;
    case 'outcome.record':
      return change.outcome.queueId;
    case 'tickets.put':
    case 'backfill.delete':
    case 'outcome.delete':
    case 'delivery.advance':
    case 'delivery.park':
      return change.queueId;
    case 'consumer.advance':
      return undefined;
  }
}
