// A string-keyed map split into shards by a hash of the key. A JS Map rehashes all of its entries at once
// when it outgrows its table: at a million tickets that took ~160 ms per map, and the new 2M-entry table is
// one large allocation that can set off a mark-compact besides; a pool growing past 2^20 tickets held one
// CreateTicket for ~0.6 s (bench/RESULTS.md). Each shard rehashes on its own, 1/256th of that.
// Iteration goes shard by shard, each in insertion order: not the insertion order of the whole map.

const SHARDS = 256;

/**
 * FNV-1a over a sample of the key's UTF-16 code units, folded to a shard index. Keys are ticket ids, UUIDs:
 * chars 4-7 (the fastest-changing part of a v1 id's time) and the last four (random in v4 and v7 ids, the
 * counter of sequential test ids) spread them evenly, and hashing all 36 was most of a lookup's cost (~145 of
 * ~170 ns, against ~25 ns for the map itself). Keys of 12 units or fewer are hashed whole. A format that
 * holds those eight units constant lands in one shard: correct, only without the smaller rehashes.
 */
function shardOf(key: string): number {
  const n = key.length;
  let hash = 0x811c9dc5;
  if (n <= 12) {
    for (let i = 0; i < n; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  } else {
    for (let i = 4; i < 8; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
    for (let i = n - 4; i < n; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  }
  return (hash ^ (hash >>> 16) ^ (hash >>> 24)) & (SHARDS - 1);
}

export class ShardedMap<V> {
  private readonly shards: Map<string, V>[] = Array.from({ length: SHARDS }, () => new Map<string, V>());
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(key: string): V | undefined {
    return this.shards[shardOf(key)]!.get(key);
  }

  has(key: string): boolean {
    return this.shards[shardOf(key)]!.has(key);
  }

  set(key: string, value: V): this {
    const shard = this.shards[shardOf(key)]!;
    const before = shard.size;
    shard.set(key, value);
    this.count += shard.size - before;
    return this;
  }

  delete(key: string): boolean {
    const deleted = this.shards[shardOf(key)]!.delete(key);
    if (deleted) this.count--;
    return deleted;
  }

  clear(): void {
    for (const shard of this.shards) shard.clear();
    this.count = 0;
  }

  /** The shards themselves, each in its own insertion order (for scans that stop early per shard). */
  eachShard(): readonly ReadonlyMap<string, V>[] {
    return this.shards;
  }

  *[Symbol.iterator](): IterableIterator<[string, V]> {
    for (const shard of this.shards) yield* shard;
  }
}
