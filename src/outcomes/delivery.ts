// Outcome delivery for every queue: one dispatcher per queue whose sink is a push sink (broker, webhook),
// recreated when the queue's outcome settings change (hot reload). Queues with the websocket sink are
// served by the stream endpoint, which reads the outbox directly.
import type { Logger } from 'pino';
import type { QueueConfig } from '../config/queue-config.js';
import type { Store } from '../store/store.js';
import { QueueDispatcher } from './dispatcher.js';
import type { OutcomeSink } from './sink.js';

export type OutcomesConfig = QueueConfig['outcomes'];

/** Builds the push sink for a queue's outcome settings; undefined for the websocket sink. */
export type SinkFactory = (queueId: string, config: OutcomesConfig) => OutcomeSink | undefined;

export interface DeliveryStatus {
  queueId: string;
  sink: OutcomesConfig['sink'];
  deliveredThrough: string;
  lastRecorded: string;
  parked?: { sequence: string; attempts: number; lastError: string; parkedAtMs: number };
}

export class OutcomeDelivery {
  private readonly dispatchers = new Map<string, { settings: string; dispatcher: QueueDispatcher }>();
  private readonly sinks = new Map<string, OutcomesConfig['sink']>();
  private readonly streamListeners: ((queueIds: ReadonlySet<string>) => void)[] = [];

  constructor(
    private readonly store: Store,
    private readonly createSink: SinkFactory,
    private readonly log: Logger,
  ) {
    store.onOutcomesCommitted((queueIds) => {
      for (const id of queueIds) this.dispatchers.get(id)?.dispatcher.notify();
      for (const listener of this.streamListeners) listener(queueIds);
    });
  }

  /** Called by the WebSocket stream to learn of new outcomes. */
  onOutcomes(listener: (queueIds: ReadonlySet<string>) => void): void {
    this.streamListeners.push(listener);
  }

  /** The queue's current sink, as configured. */
  sinkOf(queueId: string): OutcomesConfig['sink'] | undefined {
    return this.sinks.get(queueId);
  }

  /**
   * Follows the queues' outcome settings. A queue that disappears keeps its dispatcher, so the outcomes of its
   * retirement are still delivered.
   */
  async configure(queues: ReadonlyMap<string, OutcomesConfig>): Promise<void> {
    for (const [queueId, config] of queues) {
      this.sinks.set(queueId, config.sink);
      const settings = JSON.stringify(config);
      const current = this.dispatchers.get(queueId);
      if (current?.settings === settings) continue;
      if (current) {
        this.dispatchers.delete(queueId);
        await current.dispatcher.stop();
      }
      const sink = this.createSink(queueId, config);
      if (!sink) continue;
      this.dispatchers.set(queueId, { settings, dispatcher: new QueueDispatcher(queueId, sink, this.store, this.log) });
      this.log.info({ queue: queueId, sink: sink.kind }, current ? 'outcome sink reconfigured' : 'outcome sink started');
    }
  }

  status(): DeliveryStatus[] {
    const last = String(this.store.lastSequence());
    return [...this.sinks].map(([queueId, sink]) => {
      const parked = this.store.parkedDelivery(queueId);
      return {
        queueId,
        sink,
        deliveredThrough: String(this.store.deliveryCursor(queueId)),
        lastRecorded: last,
        ...(parked ? { parked: { ...parked, sequence: String(parked.sequence) } } : {}),
      };
    });
  }

  /** Retries a parked delivery now. */
  release(queueId: string): Promise<boolean> {
    return this.dispatchers.get(queueId)?.dispatcher.release() ?? Promise.resolve(false);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.dispatchers.values()].map(({ dispatcher }) => dispatcher.stop()));
    this.dispatchers.clear();
  }
}
