// A map from ticket ids to numbers that keeps its keys off the JS heap. A ticket id is a UUID, lowercased at
// the API (matchmaker-core.ts requireUuid): its 16 bytes go into typed arrays, as four 32-bit words beside the
// value in a slot of open-addressed tables (linear probing, deletion by backward shift, so no tombstones). At a million waiting
// tickets the maps of strings this replaces held a million id strings and three million map entries, which
// every major collection marked: 48-52 ms of a full gc() (bench/RESULTS.md), paid as an event-loop pause. Typed
// arrays are one object each, whatever they hold.
//
// Keys that are not canonical lowercase UUIDs (tests, benches, tools) go to a plain Map beside the tables, so
// any string is a key and two different strings are two keys. The tables are sharded by hash: each shard
// grows on its own, so no insert rehashes a million slots (one JS Map of a million entries took ~160 ms to
// rehash, and held a CreateTicket that long). Iteration order is unspecified.
import { growableColumn, grownColumn } from './growable-column.js';

const SHARD_BITS = 8;
const SHARDS = 1 << SHARD_BITS;
const INITIAL_SLOTS = 16;

/** Hex digit values by UTF-16 code unit, -1 where a unit is not a lowercase hex digit. */
const HEX_VALUE = new Int8Array(65536).fill(-1);
for (let c = 0; c < 16; c++) HEX_VALUE['0123456789abcdef'.charCodeAt(c)] = c;
const HEX_CHAR = new Uint8Array(16);
for (let c = 0; c < 16; c++) HEX_CHAR[c] = '0123456789abcdef'.charCodeAt(c);
/** Where each of the 16 bytes' two digits start in the 36-char form (8-4-4-4-12). */
const BYTE_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];

/** The words of the last key `pack` read. Module state: packing allocates nothing. */
const words = new Uint32Array(4);
/**
 * The key `words` holds, and whether it packed: an insert into the pool asks the same id of several maps in a
 * row (has, set, the row's id), and a key is packed once for them. Code that writes `words` for another
 * purpose (rehashing, shifting entries back) sets it undefined.
 */
let packedKey: string | undefined;
let packedOk = false;
/** The 36-char form being written by `unpack`: its hyphens never change. */
const form = Buffer.alloc(36, '-');

/** The byte whose two hex digits start at `i`; negative when either is not a lowercase hex digit. */
function byteAt(key: string, i: number): number {
  return (HEX_VALUE[key.charCodeAt(i)]! << 4) | HEX_VALUE[key.charCodeAt(i + 1)]!;
}

/** The word of bytes `b` to `b + 3`; -1 when one of their digits is not lowercase hex. */
function wordAt(key: string, b: number): number {
  const x0 = byteAt(key, BYTE_AT[b]!);
  const x1 = byteAt(key, BYTE_AT[b + 1]!);
  const x2 = byteAt(key, BYTE_AT[b + 2]!);
  const x3 = byteAt(key, BYTE_AT[b + 3]!);
  if ((x0 | x1 | x2 | x3) < 0) return -1;
  return ((x0 << 24) | (x1 << 16) | (x2 << 8) | x3) >>> 0;
}

/** Packs a canonical lowercase UUID (8-4-4-4-12) into `words`; answers false for any other string. */
function pack(key: string): boolean {
  if (key === packedKey) return packedOk;
  packedKey = key;
  packedOk = packWords(key);
  return packedOk;
}

/** `pack` without the memo: writes `words` only when the key is a canonical UUID. */
function packWords(key: string): boolean {
  if (key.length !== 36) return false;
  if (key.charCodeAt(8) !== 45 || key.charCodeAt(13) !== 45 || key.charCodeAt(18) !== 45 || key.charCodeAt(23) !== 45) return false;
  const w0 = wordAt(key, 0);
  const w1 = wordAt(key, 4);
  const w2 = wordAt(key, 8);
  const w3 = wordAt(key, 12);
  if (w0 < 0 || w1 < 0 || w2 < 0 || w3 < 0) return false;
  words[0] = w0;
  words[1] = w1;
  words[2] = w2;
  words[3] = w3;
  return true;
}

/** The byte whose two hex digits are `bytes[i]` and `bytes[i + 1]`; negative when either is not a lowercase hex digit. */
function byteIn(bytes: Uint8Array, i: number): number {
  return (HEX_VALUE[bytes[i]!]! << 4) | HEX_VALUE[bytes[i + 1]!]!;
}

/**
 * `packWords` of the ASCII key in `bytes[start, end)`, read from its bytes: a restore puts a million ids
 * into a map without making a string of each. Forgets the memo of `pack`.
 */
function packBytes(bytes: Uint8Array, start: number, end: number): boolean {
  packedKey = undefined;
  if (end - start !== 36) return false;
  if (bytes[start + 8] !== 45 || bytes[start + 13] !== 45 || bytes[start + 18] !== 45 || bytes[start + 23] !== 45) return false;
  for (let w = 0; w < 4; w++) {
    let word = 0;
    for (let j = 0; j < 4; j++) {
      const byte = byteIn(bytes, start + BYTE_AT[4 * w + j]!);
      if (byte < 0) return false;
      word = (word << 8) | byte;
    }
    words[w] = word >>> 0;
  }
  return true;
}

/** The 36-char form of the four words from `keys[at]`: written into a scratch buffer, read as one string. */
function unpack(keys: Uint32Array, at: number): string {
  for (let k = 0; k < 4; k++) {
    const w = keys[at + k]!;
    for (let j = 0; j < 4; j++) {
      const byte = (w >>> (24 - 8 * j)) & 255;
      const at = BYTE_AT[4 * k + j]!;
      form[at] = HEX_CHAR[byte >>> 4]!;
      form[at + 1] = HEX_CHAR[byte & 15]!;
    }
  }
  return form.toString('latin1', 0, 36);
}

/** A 32-bit hash of `words`, all 128 bits mixed in: v1, v4 and v7 ids vary in different words. */
function hashWords(): number {
  let h = Math.imul(words[0]! ^ 0x9e3779b9, 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 15) ^ words[1]!, 0xc2b2ae35);
  h = Math.imul(h ^ (h >>> 13) ^ words[2]!, 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 16) ^ words[3]!, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Words per slot: the key's four, then the value as a float64 (NaN in an empty slot). */
const SLOT_WORDS = 6;

/**
 * One shard: `slots` a power of two, at most three quarters of them full (linear probing stays short). A
 * slot's key and value sit side by side in one buffer, so a probe reads one place in memory, not three.
 */
class Shard {
  /** Slot i's key: words 6i to 6i + 3. */
  readonly keys: Uint32Array;
  /** Slot i's value: element 3i + 2; NaN when the slot is empty. */
  readonly values: Float64Array;
  count = 0;

  constructor(readonly slots: number) {
    const buffer = new ArrayBuffer(SLOT_WORDS * 4 * slots);
    this.keys = new Uint32Array(buffer);
    this.values = new Float64Array(buffer).fill(Number.NaN);
  }

  isFull(i: number): boolean {
    return !Number.isNaN(this.values[3 * i + 2]!);
  }

  value(i: number): number {
    return this.values[3 * i + 2]!;
  }

  /** Writes `words` and `value` into slot `i`. */
  put(i: number, value: number): void {
    const k = SLOT_WORDS * i;
    this.keys[k] = words[0]!;
    this.keys[k + 1] = words[1]!;
    this.keys[k + 2] = words[2]!;
    this.keys[k + 3] = words[3]!;
    this.values[3 * i + 2] = value;
  }

  /** Copies slot `i`'s key into `words`. */
  load(i: number): void {
    const k = SLOT_WORDS * i;
    words[0] = this.keys[k]!;
    words[1] = this.keys[k + 1]!;
    words[2] = this.keys[k + 2]!;
    words[3] = this.keys[k + 3]!;
  }

  /** The slot of `words`, or -1. `start` is the hash's slot bits. */
  find(start: number): number {
    const mask = this.slots - 1;
    const { keys } = this;
    for (let i = start & mask; this.isFull(i); i = (i + 1) & mask) {
      const k = SLOT_WORDS * i;
      if (keys[k] === words[0] && keys[k + 1] === words[1] && keys[k + 2] === words[2] && keys[k + 3] === words[3]) return i;
    }
    return -1;
  }

  /** The first empty slot of the probe from `start`. */
  empty(start: number): number {
    const mask = this.slots - 1;
    let i = start & mask;
    while (this.isFull(i)) i = (i + 1) & mask;
    return i;
  }

  /** Empties slot `i` and shifts back each later entry of its cluster whose probe passes through `i`. */
  remove(i: number): void {
    packedKey = undefined;
    const mask = this.slots - 1;
    let hole = i;
    for (let j = (i + 1) & mask; this.isFull(j); j = (j + 1) & mask) {
      this.load(j);
      const home = (hashWords() >>> SHARD_BITS) & mask;
      // j's entry may move to the hole when the hole lies on its probe, from home to j (cyclically).
      if (((j - home) & mask) < ((j - hole) & mask)) continue;
      this.put(hole, this.value(j));
      hole = j;
    }
    this.values[3 * hole + 2] = Number.NaN;
    this.count--;
  }
}

export class IdMap {
  private shards: Shard[];
  /** Keys that are not canonical UUIDs. */
  private readonly other = new Map<string, number>();
  private packedCount = 0;
  /** The fewest slots a shard grows to (`expect`). */
  private grownSlots = 0;

  /** `shardCount`, a power of two up to 256: fewer only so that tests see long probe clusters. */
  constructor(private readonly shardCount = SHARDS) {
    this.shards = Array.from({ length: shardCount }, () => new Shard(INITIAL_SLOTS));
  }

  get size(): number {
    return this.packedCount + this.other.size;
  }

  get(key: string): number | undefined {
    if (!pack(key)) return this.other.get(key);
    const h = hashWords();
    const shard = this.shards[h & (this.shardCount - 1)]!;
    const i = shard.find(h >>> SHARD_BITS);
    return i < 0 ? undefined : shard.value(i);
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** `value` must not be NaN: NaN marks an empty slot. */
  set(key: string, value: number): this {
    if (Number.isNaN(value)) throw new RangeError(`an IdMap value cannot be NaN (key ${key})`);
    if (!pack(key)) {
      this.other.set(key, value);
      return this;
    }
    this.setPacked(value, key);
    return this;
  }

  /** `set` of the ASCII key in `bytes[start, end)`, read from its bytes (a string is made only for a key that is not a UUID). */
  setAscii(bytes: Uint8Array, start: number, end: number, value: number): this {
    if (packBytes(bytes, start, end) && !Number.isNaN(value)) {
      this.setPacked(value, undefined);
      return this;
    }
    return this.set(Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('latin1'), value);
  }

  /** Sets the key `words` holds (`key`, when it came from one, to pack again after a shard grows). */
  private setPacked(value: number, key: string | undefined): void {
    const h = hashWords();
    const s = h & (this.shardCount - 1);
    let shard = this.shards[s]!;
    const found = shard.find(h >>> SHARD_BITS);
    if (found >= 0) {
      shard.put(found, value);
      return;
    }
    if (4 * (shard.count + 1) > 3 * shard.slots) {
      const held = Uint32Array.from(words);
      shard = this.grown(shard);
      this.shards[s] = shard;
      words.set(held);
      packedKey = key;
      packedOk = true;
    }
    shard.put(shard.empty(h >>> SHARD_BITS), value);
    shard.count++;
    this.packedCount++;
  }

  delete(key: string): boolean {
    if (!pack(key)) return this.other.delete(key);
    const h = hashWords();
    const shard = this.shards[h & (this.shardCount - 1)]!;
    const i = shard.find(h >>> SHARD_BITS);
    if (i < 0) return false;
    shard.remove(i);
    this.packedCount--;
    return true;
  }

  clear(): void {
    this.shards = Array.from({ length: this.shardCount }, () => new Shard(INITIAL_SLOTS));
    this.other.clear();
    this.packedCount = 0;
  }

  /**
   * Makes room for `entries` in all (spread evenly over the shards), so that filling a map of known size, as a
   * restart does with a million tickets, allocates each shard's table once instead of doubling it ten times.
   */
  reserve(entries: number): void {
    const slots = this.slotsFor(entries);
    this.shards = this.shards.map((shard) => (slots > shard.slots ? this.grown(shard, slots) : shard));
  }

  /**
   * `reserve`, with each shard taking its room when it first grows rather than now: for a map filled while
   * requests are answered (a pool's rebuild), since reserving every shard at once for 1.25M entries held the
   * event loop for 26 to 41 ms on a 2-vCPU machine, and the collector after it.
   */
  expect(entries: number): void {
    this.grownSlots = this.slotsFor(entries);
  }

  /** A shard's slots for its share of `entries`, under three quarters full. */
  private slotsFor(entries: number): number {
    const perShard = Math.ceil(entries / this.shardCount);
    let slots = INITIAL_SLOTS;
    while (4 * perShard > 3 * slots) slots *= 2;
    return slots;
  }

  /** Entries per shard of the tables (not the other keys): how evenly the hash spreads ids. */
  shardSizes(): number[] {
    return this.shards.map((shard) => shard.count);
  }

  /** Calls `fn` with each entry, in no particular order; `fn` must not change the map. */
  forEach(fn: (value: number, key: string) => void): void {
    for (const shard of this.shards) {
      for (let i = 0; i < shard.slots; i++) if (shard.isFull(i)) fn(shard.value(i), unpack(shard.keys, SLOT_WORDS * i));
    }
    this.other.forEach(fn);
  }

  *[Symbol.iterator](): IterableIterator<[string, number]> {
    const entries: [string, number][] = [];
    this.forEach((value, key) => {
      entries.push([key, value]);
    });
    yield* entries;
  }

  /** A copy of `shard` with `slots` slots (unless told, twice its own or what `expect` asked). Overwrites `words`. */
  private grown(shard: Shard, slots = Math.max(2 * shard.slots, this.grownSlots)): Shard {
    packedKey = undefined;
    const next = new Shard(slots);
    for (let i = 0; i < shard.slots; i++) {
      if (!shard.isFull(i)) continue;
      shard.load(i);
      next.put(next.empty(hashWords() >>> SHARD_BITS), shard.value(i));
      next.count++;
    }
    return next;
  }
}

/** Row -> ticket id, for the pool's columns: a UUID's 16 bytes a row, any other id in a Map beside. */
export class IdColumn {
  private packed: Uint32Array;
  private readonly other = new Map<number, string>();

  /** `reservedRows`: rows the column reserves room for (growable-column.ts). */
  constructor(reservedRows = 0) {
    this.packed = growableColumn(Uint32Array, 0, 4 * reservedRows);
  }

  /** Room for `capacity` rows (every row kept); a copy reserves `reservedRows` (growable-column.ts). */
  grow(capacity: number, reservedRows = 0): void {
    this.packed = grownColumn(this.packed, Uint32Array, 4 * capacity, 4 * reservedRows);
  }

  set(row: number, id: string): void {
    if (pack(id)) {
      this.packed.set(words, 4 * row);
      this.other.delete(row);
    } else {
      this.other.set(row, id);
    }
  }

  get(row: number): string {
    return this.other.get(row) ?? unpack(this.packed, 4 * row);
  }

  /** Moves row `from`'s id to row `to` and forgets row `from`. */
  move(from: number, to: number): void {
    this.packed.copyWithin(4 * to, 4 * from, 4 * from + 4);
    const id = this.other.get(from);
    if (id === undefined) this.other.delete(to);
    else this.other.set(to, id);
    this.other.delete(from);
  }

  /** Moves rows `from` to `from + count - 1` to rows `to` onward; the rows moved from are forgotten. */
  moveRows(from: number, to: number, count: number): void {
    this.packed.copyWithin(4 * to, 4 * from, 4 * (from + count));
    if (this.other.size === 0) return;
    const inside = (row: number, start: number) => row >= start && row < start + count;
    const moved = [...this.other].filter(([row]) => inside(row, from));
    for (const row of [...this.other.keys()]) if (inside(row, from) || inside(row, to)) this.other.delete(row);
    for (const [row, id] of moved) this.other.set(row - from + to, id);
  }

  /** Forgets row `row`'s id (a row removed or left behind). */
  forget(row: number): void {
    this.other.delete(row);
  }
}
