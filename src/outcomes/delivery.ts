// Outcome delivery for every queue: one dispatcher per queue whose sink is a push sink (broker, webhook),
// recreated when the queue's outcome settings change (hot reload). Queues with the websocket sink are
// served by the stream endpoint, which reads the outbox directly.
import type { Logger } from 'pino';
import type { QueueConfig } from '../config/queue-config.js';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import type { Store, StoreChange } from '../store/store.js';
import { noDeliveryTelemetry, type DeliveryTelemetry } from './delivery-telemetry.js';
import { QueueDispatcher } from './dispatcher.js';
import type { Outboxes } from './outbox.js';
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
  private readonly retentionTimer: NodeJS.Timeout;
  /** configure() calls run one after another: overlapping ones would start two dispatchers for a queue. */
  private configuring: Promise<void> = Promise.resolve();

  constructor(
    private readonly outboxes: Outboxes,
    private readonly createSink: SinkFactory,
    private readonly log: Logger,
    private readonly retentionMs: number,
    private readonly telemetry: DeliveryTelemetry = noDeliveryTelemetry,
  ) {
    outboxes.onOutcomesCommitted((queueIds) => {
      for (const id of queueIds) this.dispatchers.get(id)?.dispatcher.notify();
      for (const listener of this.streamListeners) listener(queueIds);
    });
    this.retentionTimer = setInterval(
      () => {
        this.sweepRetention(Date.now()).catch((err: unknown) => log.error({ err }, 'outcome retention sweep failed'));
      },
      Math.min(60_000, retentionMs),
    );
    this.retentionTimer.unref();
  }

  /**
   * Forgets outcomes recorded more than the retention window ago: for a push sink only once delivered (an
   * undelivered outcome is never dropped), for the websocket sink regardless of consumers. Answers how many.
   */
  async sweepRetention(nowMs: number, maxDeletes = 10_000): Promise<number> {
    let swept = 0;
    for (const store of this.outboxes.stores()) swept += await this.sweepStore(store, nowMs - this.retentionMs, maxDeletes - swept);
    if (swept > 0) this.log.info({ outcomes: swept }, 'outcomes past the retention window forgotten');
    return swept;
  }

  private async sweepStore(store: Store, cutoffMs: number, maxDeletes: number): Promise<number> {
    const deletes: StoreChange[] = [];
    let after = 0n;
    scan: for (;;) {
      if (deletes.length >= maxDeletes) break;
      const page = store.listOutcomes({ afterSequence: after, limit: 1000 });
      if (page.length === 0) break;
      for (const outcome of page) {
        after = outcome.producerSequence;
        if (!outcome.occurredAt || timestampMs(outcome.occurredAt) >= cutoffMs) break scan; // sequence order is time order
        const sink = this.sinks.get(outcome.queueId);
        const delivered = sink === 'websocket' || outcome.producerSequence <= store.deliveryCursor(outcome.queueId);
        if (!delivered) continue;
        deletes.push({ type: 'outcome.delete', queueId: outcome.queueId, sequence: outcome.producerSequence });
        if (deletes.length >= maxDeletes) break scan;
      }
    }
    // Local housekeeping, not a record: in the replicated mode each replica forgets on its own clock.
    if (deletes.length > 0) await store.commit(deletes);
    return deletes.length;
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
  configure(queues: ReadonlyMap<string, OutcomesConfig>): Promise<void> {
    this.configuring = this.configuring.then(() => this.apply(queues));
    return this.configuring;
  }

  private async apply(queues: ReadonlyMap<string, OutcomesConfig>): Promise<void> {
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
      this.dispatchers.set(queueId, {
        settings,
        dispatcher: new QueueDispatcher(queueId, sink, this.outboxes.of(queueId), this.log, this.telemetry),
      });
      this.log.info({ queue: queueId, sink: sink.kind }, current ? 'outcome sink reconfigured' : 'outcome sink started');
    }
  }

  status(): DeliveryStatus[] {
    return [...this.sinks].map(([queueId, sink]) => {
      const { store } = this.outboxes.of(queueId);
      const parked = store.parkedDelivery(queueId);
      return {
        queueId,
        sink,
        deliveredThrough: String(store.deliveryCursor(queueId)),
        lastRecorded: String(store.queueLastSequence(queueId)),
        ...(parked ? { parked: { ...parked, sequence: String(parked.sequence) } } : {}),
      };
    });
  }

  /** Retries a parked delivery now (or, when the queue no longer has a push sink, just clears the record). */
  async release(queueId: string): Promise<boolean> {
    const dispatcher = this.dispatchers.get(queueId)?.dispatcher;
    if (dispatcher) return dispatcher.release();
    const outbox = this.outboxes.of(queueId);
    if (!outbox.store.parkedDelivery(queueId)) return false;
    await outbox.release();
    return true;
  }

  async stop(): Promise<void> {
    clearInterval(this.retentionTimer);
    await Promise.all([...this.dispatchers.values()].map(({ dispatcher }) => dispatcher.stop()));
    this.dispatchers.clear();
  }
}
