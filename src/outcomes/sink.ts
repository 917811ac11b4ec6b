// What a push sink (broker, webhook) is to the dispatcher. The WebSocket sink is not one: its clients pull
// from the outbox at their own offsets (src/api/outcome-stream.ts).
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

export interface RetryPolicy {
  /** Failed attempts after the first before the delivery is parked; Infinity never parks. */
  maxRetries: number;
  /** Exponential backoff with full jitter: attempt n waits a random time in [0, min(max, base * 2^n)). */
  baseDelayMs: number;
  maxDelayMs: number;
}

export interface OutcomeSink {
  readonly kind: 'broker' | 'webhook';
  /** The most outcomes one deliver() takes. */
  readonly batchSize: number;
  readonly retry: RetryPolicy;
  /**
   * Delivers the outcomes, in order, and resolves once the receiver acknowledged every one of them; throws
   * otherwise (the dispatcher retries the same outcomes, so a sink must tolerate re-sending them).
   */
  deliver(outcomes: readonly Outcome[]): Promise<void>;
  close(): Promise<void>;
}
