// Delivers one queue's outcomes through its push sink, at least once and in occurrence order: it reads the
// outbox after the queue's durable cursor, hands a batch to the sink, and advances the cursor only once the
// sink acknowledged. A failure is retried with backoff; once the sink's retry budget is spent the delivery
// is parked (recorded, counted, listed) and holds back the queue's later outcomes until released. It
// delivers only while its outbox says this process delivers (in the replicated mode: while it leads the
// queue), and on taking over resumes from the outbox's cursor, wherever another process left it.
import { timestampMs } from '@bufbuild/protobuf/wkt';
import type { Logger } from 'pino';
import type { DeliveryTelemetry } from './delivery-telemetry.js';
import type { QueueOutbox } from './outbox.js';
import type { OutcomeSink } from './sink.js';

/** How often a process that does not deliver the queue checks whether it has started to. */
const STANDBY_CHECK_MS = 250;

export class QueueDispatcher {
  private cursor: bigint;
  private running = true;
  private wake: (() => void) | undefined;
  private pendingWake = false;
  private attempts = 0;
  /** The cursor's durable record in flight, and whether a later cursor waits to be recorded after it. */
  private recording: Promise<void> | undefined;
  private progressWaiting = false;
  private readonly done: Promise<void>;

  constructor(
    readonly queueId: string,
    readonly sink: OutcomeSink,
    private readonly outbox: QueueOutbox,
    private readonly log: Logger,
    private readonly telemetry: DeliveryTelemetry,
  ) {
    this.cursor = outbox.store.deliveryCursor(queueId);
    this.done = this.loop();
  }

  /** New outcomes were committed for this queue. */
  notify(): void {
    this.pendingWake = true;
    this.wake?.();
  }

  /** Releases a parked delivery: it is attempted again with a fresh retry budget. */
  async release(): Promise<boolean> {
    if (!this.outbox.store.parkedDelivery(this.queueId)) return false;
    await this.outbox.release();
    this.attempts = 0;
    this.notify();
    return true;
  }

  /** Stops after the delivery in flight (if any) settles. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.done;
    await this.sink.close();
  }

  private async loop(): Promise<void> {
    let delivering = false;
    while (this.running) {
      if (!this.outbox.delivering) {
        delivering = false;
        await this.idle(STANDBY_CHECK_MS);
        continue;
      }
      const { store } = this.outbox;
      if (!delivering) {
        // Taking over: another process may have delivered further meanwhile. A cursor of our own that is
        // further still (its record fenced out when we lost the queue) is of outcomes we did deliver.
        delivering = true;
        const recorded = store.deliveryCursor(this.queueId);
        if (recorded > this.cursor) this.cursor = recorded;
      }
      const batch = store.parkedDelivery(this.queueId) ? [] : store.queueOutcomes(this.queueId, this.cursor, this.sink.batchSize);
      if (batch.length === 0) {
        await this.idle();
        continue;
      }
      try {
        await this.sink.deliver(batch);
      } catch (err) {
        await this.failed(batch[0]!.producerSequence, err);
        continue;
      }
      this.attempts = 0;
      const ackedMs = Date.now();
      this.telemetry.delivered(
        this.queueId,
        this.sink.kind,
        batch.map((o) => (o.occurredAt ? Math.max(0, ackedMs - timestampMs(o.occurredAt)) / 1000 : 0)),
      );
      this.cursor = batch[batch.length - 1]!.producerSequence;
      this.recordProgress();
    }
    while (this.recording) await this.recording;
  }

  /**
   * Records the cursor durably without holding up the next batch: at most one record in flight, the latest
   * cursor recorded next. Waiting for each (an fsync in the embedded mode, a log append in the replicated
   * one) capped a sink at one batch per durable write. A crash before the record only resends outcomes the
   * sink already acknowledged, which at-least-once delivery allows.
   */
  private recordProgress(): void {
    if (this.recording) {
      this.progressWaiting = true;
      return;
    }
    const cursor = this.cursor;
    this.recording = this.outbox
      .advance(cursor)
      .catch((err: unknown) => {
        // Delivered but not recorded (the queue's log unavailable, or leadership lost): whoever delivers
        // next resends from the recorded cursor.
        this.log.warn({ queue: this.queueId, sequence: String(cursor), err }, 'delivery progress not recorded');
      })
      .finally(() => {
        this.recording = undefined;
        const waiting = this.progressWaiting;
        this.progressWaiting = false;
        if (waiting && this.cursor > cursor) this.recordProgress();
      });
  }

  private async failed(sequence: bigint, err: unknown): Promise<void> {
    this.attempts++;
    const message = err instanceof Error ? err.message : String(err);
    const { maxRetries, baseDelayMs, maxDelayMs } = this.sink.retry;
    if (this.attempts > maxRetries) {
      this.log.error(
        { queue: this.queueId, sink: this.sink.kind, sequence: String(sequence), attempts: this.attempts, err: message },
        'outcome delivery parked: retries exhausted',
      );
      this.telemetry.parked(this.queueId, this.sink.kind);
      try {
        await this.outbox.park({ sequence, attempts: this.attempts, lastError: message, parkedAtMs: Date.now() });
      } catch (err) {
        this.log.warn({ queue: this.queueId, err }, 'parked delivery not recorded; retrying');
        await this.idle(STANDBY_CHECK_MS, false);
      }
      return;
    }
    this.telemetry.retried(this.queueId, this.sink.kind);
    const delay = Math.random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (this.attempts - 1));
    this.log.warn(
      {
        queue: this.queueId,
        sink: this.sink.kind,
        sequence: String(sequence),
        attempt: this.attempts,
        retryInMs: Math.round(delay),
        err: message,
      },
      'outcome delivery failed; retrying',
    );
    await this.idle(delay, false);
  }

  /**
   * Waits for new outcomes (or a release, or stop), at most `timeoutMs`. The default timeout is a safety
   * net only: commits notify.
   */
  private idle(timeoutMs = 5000, wakeOnNotify = true): Promise<void> {
    if (!this.running) return Promise.resolve();
    if (wakeOnNotify && this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(finish, timeoutMs);
      const self = this;
      function finish() {
        clearTimeout(timer);
        self.wake = undefined;
        self.pendingWake = false;
        resolve();
      }
      this.wake = () => {
        if (wakeOnNotify || !this.running) finish();
      };
    });
  }
}
