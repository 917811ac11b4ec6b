// The per-token rate limit: a token bucket per principal name, refilled continuously. A call takes one token;
// an empty bucket answers how long until the next token, which the transports send as Retry-After.

interface Bucket {
  tokens: number;
  atMs: number;
}

/** Buckets kept at most; past it, full ones (idle callers) are dropped. */
const MAX_BUCKETS = 100_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly perSec: number,
    private readonly burst: number,
  ) {}

  /** Takes one call for `name`: 0 when allowed, else the seconds until one would be. */
  take(name: string, nowMs = performance.now()): number {
    let bucket = this.buckets.get(name);
    if (!bucket) {
      if (this.buckets.size >= MAX_BUCKETS) this.dropIdle(nowMs);
      bucket = { tokens: this.burst, atMs: nowMs };
      this.buckets.set(name, bucket);
    }
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((nowMs - bucket.atMs) / 1000) * this.perSec);
    bucket.atMs = nowMs;
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return (1 - bucket.tokens) / this.perSec;
  }

  private dropIdle(nowMs: number): void {
    for (const [name, b] of this.buckets) {
      if (b.tokens + ((nowMs - b.atMs) / 1000) * this.perSec >= this.burst) this.buckets.delete(name);
    }
  }
}
