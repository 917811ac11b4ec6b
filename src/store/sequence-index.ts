// Ascending outcome sequences for the in-memory store's outbox (memory-store.ts): appended in increasing
// order, read from any sequence by binary search, deleted lazily. Retention deletes the oldest first, so a
// delete at the front moves a start index; one elsewhere only counts as dead until the dead are more than
// the live, when the array is compacted. Every operation is amortized O(1) or O(log n), never O(n) per call.
export class SequenceIndex {
  private seqs: bigint[] = [];
  /** seqs[0..start) are all deleted. */
  private start = 0;
  /** Deleted sequences still in seqs[start..). */
  private dead = 0;
  private readonly deleted = new Set<bigint>();

  /** Appends a sequence above every one held. */
  push(sequence: bigint): void {
    const last = this.seqs[this.seqs.length - 1];
    if (last !== undefined && sequence <= last) throw new Error(`sequence ${sequence} is not above ${last}`);
    this.seqs.push(sequence);
  }

  /** Removes a sequence; answers whether it was held. */
  delete(sequence: bigint): boolean {
    const i = this.lowerBound(sequence);
    if (this.seqs[i] !== sequence || this.deleted.has(sequence)) return false;
    if (i === this.start) {
      this.start++;
      // Deletes behind the front become the front once it reaches them.
      while (this.start < this.seqs.length && this.deleted.delete(this.seqs[this.start]!)) {
        this.start++;
        this.dead--;
      }
    } else {
      this.deleted.add(sequence);
      this.dead++;
    }
    this.compact();
    return true;
  }

  /** Live sequences above `after`, ascending. */
  *after(after: bigint): Generator<bigint> {
    for (let i = this.lowerBound(after + 1n); i < this.seqs.length; i++) {
      const s = this.seqs[i]!;
      if (!this.deleted.has(s)) yield s;
    }
  }

  /** The highest live sequence, or undefined when none is held. */
  last(): bigint | undefined {
    for (let i = this.seqs.length - 1; i >= this.start; i--) {
      const s = this.seqs[i]!;
      if (!this.deleted.has(s)) return s;
    }
    return undefined;
  }

  get size(): number {
    return this.seqs.length - this.start - this.dead;
  }

  /** The first index in seqs[start..) whose sequence is at least `sequence`. */
  private lowerBound(sequence: bigint): number {
    let lo = this.start;
    let hi = this.seqs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.seqs[mid]! < sequence) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private compact(): void {
    const held = this.seqs.length - this.start;
    if (this.start > 1024 && this.start * 2 > this.seqs.length) {
      this.seqs = this.seqs.slice(this.start);
      this.start = 0;
    }
    if (this.dead > 64 && this.dead * 2 > held) {
      this.seqs = this.seqs.slice(this.start).filter((s) => !this.deleted.has(s));
      this.start = 0;
      this.dead = 0;
      this.deleted.clear();
    }
  }
}
