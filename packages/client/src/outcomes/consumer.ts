// The one consumer shape of every sink: an async iterable of deliveries ({ outcome, ack() }), or `run(handler)`
// that handles them one at a time and acknowledges each after its handler resolved. Sinks push what they
// receive through the OutcomeCore into a bounded queue; the iterator takes from it.
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { OutcomeCore, type OutcomeCoreOptions, type OutcomeDelivery } from './outcome-core.js';

export type OutcomeHandler = (outcome: Outcome, delivery: OutcomeDelivery) => Promise<void> | void;

export interface OutcomeConsumer extends AsyncIterable<OutcomeDelivery> {
  /**
   * Handles every delivery with `handler`, one at a time in arrival order, acknowledging each once the handler
   * resolved. Resolves when the consumer is closed; rejects (and closes the consumer) when the handler or the
   * sink fails: the delivery whose handler failed is not acknowledged, so the sink delivers it again later. An
   * acknowledgement the sink could not confirm goes to the consumer's onError, and the consumer goes on.
   */
  run(handler: OutcomeHandler): Promise<void>;
  /** Stops receiving; deliveries not yet acknowledged are redelivered by the sink (not the webhook's). */
  close(): Promise<void>;
}

export interface QueueOptions {
  /** Deliveries buffered before the sink is slowed down (default 1000). */
  highWaterMark?: number;
}

export const DEFAULT_HIGH_WATER_MARK = 1_000;

/** The shared part of the three consumers: the core, the buffer, the iterator and `run`. */
export abstract class QueuedConsumer implements OutcomeConsumer {
  protected readonly core: OutcomeCore;
  protected readonly highWaterMark: number;
  private readonly buffer: OutcomeDelivery[] = [];
  private readonly takers: { resolve: (r: IteratorResult<OutcomeDelivery>) => void; reject: (e: unknown) => void }[] = [];
  private readonly spaceWaiters: (() => void)[] = [];
  private failure: unknown;
  protected ended = false;

  protected constructor(options: OutcomeCoreOptions & QueueOptions) {
    this.core = new OutcomeCore(options);
    this.highWaterMark = Math.max(1, options.highWaterMark ?? DEFAULT_HIGH_WATER_MARK);
  }

  /** Copies dropped by dedupe so far. */
  get duplicates(): number {
    return this.core.duplicates;
  }

  /** Gaps in producer_sequence reported so far. */
  get gaps(): number {
    return this.core.gaps;
  }

  /** Deliveries received and not yet taken by the iterator. */
  get buffered(): number {
    return this.buffer.length;
  }

  /** Feeds one received outcome with its sink acknowledgement through the core into the buffer. */
  protected receive(outcome: Outcome, ack: () => Promise<void>): void {
    for (const delivery of this.core.receive(outcome, ack)) {
      const taker = this.takers.shift();
      if (taker) taker.resolve({ value: delivery, done: false });
      else this.buffer.push(delivery);
    }
  }

  protected get full(): boolean {
    return this.buffer.length >= this.highWaterMark;
  }

  /** Resolves once the buffer is below the high-water mark (or the consumer ended). */
  protected untilSpace(): Promise<void> {
    if (!this.full || this.ended) return Promise.resolve();
    return new Promise((resolve) => this.spaceWaiters.push(resolve));
  }

  /** A problem that does not end the consumer (the sink's onError). */
  protected abstract reportError(err: unknown): void;

  /** Called when the buffer went below the high-water mark; sinks that pause their source resume it. */
  protected onSpace(): void {}

  /** Ends the iteration: after the buffered deliveries, with `error` if given. */
  protected finish(error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = error;
    for (const w of this.spaceWaiters.splice(0)) w();
    for (const t of this.takers.splice(0)) {
      if (error === undefined) t.resolve({ value: undefined, done: true });
      else t.reject(error);
    }
  }

  private next(): Promise<IteratorResult<OutcomeDelivery>> {
    const delivery = this.buffer.shift();
    if (delivery) {
      if (!this.full) {
        for (const w of this.spaceWaiters.splice(0)) w();
        this.onSpace();
      }
      return Promise.resolve({ value: delivery, done: false });
    }
    if (this.ended) return this.failure === undefined ? Promise.resolve({ value: undefined, done: true }) : Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.takers.push({ resolve, reject }));
  }

  [Symbol.asyncIterator](): AsyncIterator<OutcomeDelivery> {
    return {
      next: () => this.next(),
      return: async () => {
        await this.close();
        return { value: undefined, done: true };
      },
    };
  }

  async run(handler: OutcomeHandler): Promise<void> {
    try {
      for (;;) {
        const result = await this.next();
        if (result.done) return;
        await handler(result.value.outcome, result.value);
        // An acknowledgement the sink did not confirm is not the handler's failure: the sink delivers the
        // outcome again and it is handled again (at least once); the consumer goes on.
        await result.value.ack().catch((err: unknown) => this.reportError(err));
      }
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  abstract close(): Promise<void>;
}
