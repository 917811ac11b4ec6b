// Exponential backoff with full jitter: the n-th wait is random in [0, min(max, initial * 2^(n-1))), so many
// clients retrying after the same outage spread out instead of arriving together.

export interface BackoffPolicy {
  /** Bound of the first wait, in milliseconds. */
  initialDelayMs: number;
  /** Largest bound of a wait, in milliseconds. */
  maxDelayMs: number;
}

/** The wait before retry number `retry` (1 for the first retry). `random` is in [0, 1). */
export function backoffDelay(retry: number, policy: BackoffPolicy, random: () => number = Math.random): number {
  const bound = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.floor(random() * bound);
}

/** Resolves after `ms`, or at once when the signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
