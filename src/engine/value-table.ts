// A queue's value table: the strings of one attribute filter (or the queue's host keys) at dense indices, the
// bits and latency columns of the pool's rows. A string is held by each row that names it (a ticket in the
// pool, or a row prepared for one and not yet inserted) and forgotten when the last one lets go; its index
// then goes to the next new string, lowest first, so the table stays as compact as what is live
// (docs/engine.md, "Value tables").
import { failedPrecondition } from '../errors.js';

/** A table's strings by index as they stood at one moment; undefined: a free index. */
export type TableKeys = readonly (string | undefined)[];

export class ValueTable {
  /** Index -> string, undefined where free; its length is one past the highest live index. */
  private readonly slots: (string | undefined)[] = [];
  /** Per index, the rows that hold it. */
  private readonly holders: number[] = [];
  private readonly index = new Map<string, number>();
  /** Every index below it is live. */
  private lowestFree = 0;
  private snapshot: TableKeys | undefined;

  constructor(
    private readonly what: string,
    private readonly max: number,
  ) {}

  /** One past the highest live index: the indices a row may use. */
  get size(): number {
    return this.slots.length;
  }

  /** Live strings. */
  get live(): number {
    return this.index.size;
  }

  /** Whether `key` is live here (a hold on it takes no new index). */
  has(key: string): boolean {
    return this.index.has(key);
  }

  isLive(i: number): boolean {
    return this.slots[i] !== undefined;
  }

  keyAt(i: number): string | undefined {
    return this.slots[i];
  }

  /**
   * One more hold on `key`; a new string takes the lowest free index. FAILED_PRECONDITION when the table
   * already holds `max` live strings.
   */
  hold(key: string): number {
    let i = this.index.get(key);
    if (i === undefined) {
      if (this.index.size >= this.max) {
        throw failedPrecondition(`${this.what} already has ${this.max} distinct values in this queue; "${key}" cannot be added`);
      }
      while (this.slots[this.lowestFree] !== undefined) this.lowestFree++;
      i = this.lowestFree++;
      this.slots[i] = key;
      this.holders[i] = 0;
      this.index.set(key, i);
      this.snapshot = undefined;
    }
    this.holders[i]!++;
    return i;
  }

  /** Lets go of one hold on index `i`; the last one forgets its string. */
  release(i: number): void {
    const key = this.slots[i];
    if (key === undefined) throw new Error(`${this.what}: index ${i} released but not held`);
    if (--this.holders[i]! > 0) return;
    this.index.delete(key);
    this.slots[i] = undefined;
    this.lowestFree = Math.min(this.lowestFree, i);
    while (this.slots.length > 0 && this.slots[this.slots.length - 1] === undefined) {
      this.slots.pop();
      this.holders.pop();
    }
    this.snapshot = undefined;
  }

  /** The strings by index now; the same array until the table changes. */
  keys(): TableKeys {
    this.snapshot ??= [...this.slots];
    return this.snapshot;
  }

  /** The live strings whose bits are set in `mask`, or in `columns` (64 indices each). */
  keysOf(mask: bigint | ArrayLike<bigint>): string[] {
    return keysOf(this.slots, mask);
  }
}

/** The strings of `keys` whose bits are set in `mask`, or in `columns` (64 indices each); free indices name none. */
export function keysOf(keys: TableKeys, mask: bigint | ArrayLike<bigint>): string[] {
  const columns = typeof mask === 'bigint' ? [mask] : mask;
  const out: string[] = [];
  keys.forEach((key, i) => {
    if (key !== undefined && i < 64 * columns.length && (columns[i >> 6]! >> BigInt(i & 63)) & 1n) out.push(key);
  });
  return out;
}
