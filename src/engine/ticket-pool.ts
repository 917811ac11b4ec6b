// A queue's active pool as columns (struct of arrays) for the native engine: one row per ticket, O(1) add
// and swap-remove, an id -> row map. Each ticket's engine_input is turned into its row once, at ingestion
// (prepare); the tick reads the rows in place. Column layout and encodings: docs/engine.md.
import type { ParsedEngineInput } from './engine-input.js';
import { ShardedMap } from './sharded-map.js';
import { failedPrecondition } from '../errors.js';

/** Interned host keys per queue: bit positions in the engine's acceptable-host set (one u64 per 64 hosts). */
export const MAX_HOST_KEYS = 256;
/**
 * Interned values per attribute filter. Value v is bit v % 64 of the filter's column v / 64; a filter has
 * floor(values / 64) + 1 columns (filterColumns), so its last column always has a bit no value uses.
 */
export const MAX_FILTER_VALUES = 256;
const ALL = 0xffff_ffff_ffff_ffffn;
const TOP = 1n << 63n;

/** Columns a filter of `values` distinct values takes: a spare bit above its last value (see `widenFilters`). */
export const filterColumns = (values: number): number => Math.floor(values / 64) + 1;
/** Latencies are u16 in the columns; larger measurements are clamped. */
const MAX_LATENCY = 0xffff;

export interface PoolLayout {
  filters: readonly { name: string; mode: 'overlap' | 'containment' }[];
  rulesetIds: readonly string[];
  defaultLatencyMs: number;
}

/** A ticket's row, computed once at ingestion. */
export interface PoolRow {
  partySize: number;
  mmrMean: number;
  arrivalMs: number;
  rulesetMask: number;
  /** Per filter, its columns as the filter's values then stood (`columnsOf` lays them out for the pool). */
  attrValues: bigint[][];
  attrAccepts: bigint[][];
  /** Worst party latency per host index, for hosts some player measured (others: default latency). */
  latencies: [host: number, ms: number][];
}

/** Strings to dense indices, at most `max`. Indices are never reused, so a row's bits stay meaningful. */
class Interner {
  readonly keys: string[] = [];
  private readonly index = new Map<string, number>();

  constructor(
    private readonly what: string,
    private readonly max: number,
  ) {}

  intern(key: string): number {
    let i = this.index.get(key);
    if (i === undefined) {
      if (this.keys.length >= this.max) {
        throw failedPrecondition(`${this.what} already has ${this.max} distinct values in this queue; "${key}" cannot be added`);
      }
      i = this.keys.length;
      this.keys.push(key);
      this.index.set(key, i);
    }
    return i;
  }

  /** The keys whose bits are set in `mask`, or in `columns` (64 keys each). */
  keysOf(mask: bigint | ArrayLike<bigint>): string[] {
    const columns = typeof mask === 'bigint' ? [mask] : mask;
    return this.keys.filter((_, i) => i < 64 * columns.length && (columns[i >> 6]! >> BigInt(i & 63)) & 1n);
  }
}

export class TicketPool {
  count = 0;
  private capacity = 0;
  partySize = new Uint8Array(0);
  mmrMean = new Float64Array(0);
  arrivalMs = new Float64Array(0);
  rulesetMask = new Uint32Array(0);
  attrValues = new BigUint64Array(0);
  attrAccepts = new BigUint64Array(0);
  latencyMs = new Uint16Array(0);
  /**
   * Per row, why the ticket still waited after the last tick that read it: the engine's refusal code
   * (tick-runner.ts refusalName; 0 none). Not an engine input: it moves with its row, and a row added since
   * that tick reads 0.
   */
  refusal = new Uint8Array(0);
  /** When the tick that wrote `refusal` ran (epoch ms); undefined before the first. */
  refusalsAtMs: number | undefined;
  /** Hosts in the latency matrix; may lag hosts.keys.length until the next insert. */
  hostCount = 0;
  /** Per filter, its columns in attrValues and attrAccepts; may lag the filter's values until the next insert. */
  private widths: number[];
  /** Columns per row: the sum of `widths`. */
  private columnCount: number;
  /** Row -> ticket id. */
  readonly ids: string[] = [];
  private readonly rows = new ShardedMap<number>();
  readonly hosts = new Interner('the host key set', MAX_HOST_KEYS);
  readonly attributeKeys: Interner[];
  private readonly allRulesets: number;

  constructor(
    readonly layout: PoolLayout,
    initialCapacity = 1024,
  ) {
    this.attributeKeys = layout.filters.map((f) => new Interner(`attribute filter "${f.name}"`, MAX_FILTER_VALUES));
    this.widths = layout.filters.map(() => 1);
    this.columnCount = layout.filters.length;
    this.allRulesets = layout.rulesetIds.length >= 32 ? 0xffff_ffff : (1 << layout.rulesetIds.length) - 1;
    this.grow(initialCapacity);
  }

  /** Attribute columns per row (a filter past 64 values has several; `filterSpans`). */
  get filterCount(): number {
    return this.columnCount;
  }

  /** The engine's mode of each column: a filter's own, then "continued" for its further columns. */
  filterModes(): string[] {
    return this.layout.filters.flatMap((f, k) => [f.mode, ...Array<string>(this.widths[k]! - 1).fill('continued')]);
  }

  /** Each filter's columns in a row: the first, and how many. */
  filterSpans(): { start: number; width: number }[] {
    let start = 0;
    return this.widths.map((width) => {
      const span = { start, width };
      start += width;
      return span;
    });
  }

  /**
   * A prepared row's attribute columns laid out at the pool's widths: a filter that gained columns since
   * the row was prepared gets them as `widenFilters` gives them to the rows in the pool.
   */
  columnsOf(row: Pick<PoolRow, 'attrValues' | 'attrAccepts'>): { values: bigint[]; accepts: bigint[] } {
    const values: bigint[] = [];
    const accepts: bigint[] = [];
    this.widths.forEach((width, f) => {
      const [v, a] = [row.attrValues[f]!, row.attrAccepts[f]!];
      for (let w = 0; w < width; w++) {
        values.push(v[w] ?? spare(v[v.length - 1]!));
        accepts.push(a[w] ?? spare(a[a.length - 1]!));
      }
    });
    return { values, accepts };
  }

  has(ticketId: string): boolean {
    return this.rows.has(ticketId);
  }

  /** The ticket's row now (rows move on removals); undefined when it is not in the pool. */
  rowOf(ticketId: string): number | undefined {
    return this.rows.get(ticketId);
  }

  /**
   * A tick's per-ticket refusal codes, by row, for the rows it read (the first `codes.length`). Only while the
   * rows are still those the tick read: before any change the tick held back.
   */
  recordRefusals(codes: Uint8Array, atMs: number): void {
    this.refusal.set(codes.subarray(0, Math.min(codes.length, this.count)));
    this.refusalsAtMs = atMs;
  }

  /**
   * Turns a ticket into its row. Interns its host keys and attribute values (throws FAILED_PRECONDITION when a
   * limit is reached) but does not touch the columns, so it is safe while a tick reads them.
   */
  prepare(input: ParsedEngineInput, rulesetIds: readonly string[], arrivalMs: number): PoolRow {
    const partySize = input.playerIds.length;
    let rulesetMask = this.allRulesets;
    if (rulesetIds.length > 0) {
      rulesetMask = 0;
      for (const id of rulesetIds) rulesetMask |= 1 << this.layout.rulesetIds.indexOf(id);
      rulesetMask >>>= 0;
    }

    const attrValues: bigint[][] = [];
    const attrAccepts: bigint[][] = [];
    this.layout.filters.forEach((filter, f) => {
      const attribute = input.attributes.get(filter.name);
      const keys = this.attributeKeys[f]!;
      if (!attribute) {
        // Unspecified: compatible with everyone under either mode (docs/engine.md).
        const width = filterColumns(keys.keys.length);
        attrValues.push(Array<bigint>(width).fill(filter.mode === 'overlap' ? ALL : 0n));
        attrAccepts.push(Array<bigint>(width).fill(ALL));
        return;
      }
      const values = attribute.values.map((v) => keys.intern(v));
      const accepts = attribute.accepts.map((v) => keys.intern(v));
      const width = filterColumns(keys.keys.length);
      attrValues.push(bitColumns(values, width));
      attrAccepts.push(bitColumns(accepts, width));
    });

    // A party's latency to a host is its worst player's; a player without a measurement counts as the default.
    const latencies: [number, number][] = [];
    for (const [host, { ms, measuredBy }] of input.latencies) {
      const h = this.hosts.intern(host);
      const effective = measuredBy < partySize ? Math.max(ms, this.layout.defaultLatencyMs) : ms;
      latencies.push([h, Math.min(effective, MAX_LATENCY)]);
    }
    return { partySize, mmrMean: input.mmrMean, arrivalMs, rulesetMask, attrValues, attrAccepts, latencies };
  }

  /** Appends a prepared row. Only between ticks: it may reallocate the columns. */
  insert(ticketId: string, row: PoolRow): void {
    if (this.rows.has(ticketId)) this.remove(ticketId);
    if (this.hosts.keys.length > this.hostCount) this.widenLatency(this.hosts.keys.length);
    this.fitFilters();
    if (this.count === this.capacity) this.grow(this.capacity * 2);
    const r = this.count++;
    this.partySize[r] = row.partySize;
    this.mmrMean[r] = row.mmrMean;
    this.arrivalMs[r] = row.arrivalMs;
    this.rulesetMask[r] = row.rulesetMask;
    this.refusal[r] = 0;
    const f = this.filterCount;
    const { values, accepts } = this.columnsOf(row);
    this.attrValues.set(values, r * f);
    this.attrAccepts.set(accepts, r * f);
    const h = this.hostCount;
    this.latencyMs.fill(Math.min(this.layout.defaultLatencyMs, MAX_LATENCY), r * h, (r + 1) * h);
    for (const [host, ms] of row.latencies) this.latencyMs[r * h + host] = ms;
    this.ids[r] = ticketId;
    this.rows.set(ticketId, r);
  }

  /** Swap-remove: the last row moves into the hole. Only between ticks. */
  remove(ticketId: string): boolean {
    const r = this.rows.get(ticketId);
    if (r === undefined) return false;
    const last = --this.count;
    this.rows.delete(ticketId);
    if (r !== last) {
      this.partySize[r] = this.partySize[last]!;
      this.mmrMean[r] = this.mmrMean[last]!;
      this.arrivalMs[r] = this.arrivalMs[last]!;
      this.rulesetMask[r] = this.rulesetMask[last]!;
      this.refusal[r] = this.refusal[last]!;
      const f = this.filterCount;
      this.attrValues.copyWithin(r * f, last * f, (last + 1) * f);
      this.attrAccepts.copyWithin(r * f, last * f, (last + 1) * f);
      const h = this.hostCount;
      this.latencyMs.copyWithin(r * h, last * h, (last + 1) * h);
      const moved = this.ids[last]!;
      this.ids[r] = moved;
      this.rows.set(moved, r);
    }
    this.ids.length = last;
    return true;
  }

  /** The columns as the native engine reads them. */
  columns() {
    return {
      partySize: this.partySize,
      mmrMean: this.mmrMean,
      arrivalMs: this.arrivalMs,
      rulesetMask: this.rulesetMask,
      attrValues: this.attrValues,
      attrAccepts: this.attrAccepts,
      latencyMs: this.latencyMs,
      ticketCount: this.count,
      filterCount: this.filterCount,
      hostCount: this.hostCount,
    };
  }

  /** Bytes of column storage per ticket (excluding spare capacity and the id map). */
  columnBytesPerTicket(): number {
    return 1 + 8 + 8 + 4 + 16 * this.filterCount + 2 * this.hostCount;
  }

  private grow(capacity: number): void {
    const f = this.filterCount;
    const h = this.hostCount;
    const copy = <T extends { set(a: ArrayLike<number | bigint>): void; subarray(a: number, b: number): T }>(
      next: T,
      prev: T,
      width: number,
    ): T => {
      next.set(prev.subarray(0, this.count * width) as never);
      return next;
    };
    this.partySize = copy(new Uint8Array(capacity), this.partySize, 1);
    this.mmrMean = copy(new Float64Array(capacity), this.mmrMean, 1);
    this.arrivalMs = copy(new Float64Array(capacity), this.arrivalMs, 1);
    this.rulesetMask = copy(new Uint32Array(capacity), this.rulesetMask, 1);
    this.refusal = copy(new Uint8Array(capacity), this.refusal, 1);
    this.attrValues = copy(new BigUint64Array(capacity * f), this.attrValues, f);
    this.attrAccepts = copy(new BigUint64Array(capacity * f), this.attrAccepts, f);
    this.latencyMs = copy(new Uint16Array(capacity * h), this.latencyMs, h);
    this.capacity = capacity;
  }

  /** Gives every filter the columns its values need now. Only between ticks: it may reallocate the columns. */
  fitFilters(): void {
    if (this.attributeKeys.some((keys, f) => filterColumns(keys.keys.length) > this.widths[f]!)) this.widenFilters();
  }

  /**
   * A filter past a multiple of 64 values gets another column in every row. A ticket's values and accepts are
   * among the values interned when it was prepared, so its new column is empty, unless the filter was
   * unspecified for it (all ones, as the spare top bit of its last column shows; see `spare`).
   */
  private widenFilters(): void {
    const widths = this.attributeKeys.map((keys, f) => Math.max(this.widths[f]!, filterColumns(keys.keys.length)));
    const total = widths.reduce((a, b) => a + b, 0);
    const [values, accepts] = [new BigUint64Array(this.capacity * total), new BigUint64Array(this.capacity * total)];
    const old = this.filterCount;
    for (let r = 0; r < this.count; r++) {
      let from = r * old;
      let to = r * total;
      widths.forEach((width, f) => {
        const had = this.widths[f]!;
        for (let w = 0; w < width; w++) {
          values[to + w] = w < had ? this.attrValues[from + w]! : spare(this.attrValues[from + had - 1]!);
          accepts[to + w] = w < had ? this.attrAccepts[from + w]! : spare(this.attrAccepts[from + had - 1]!);
        }
        from += had;
        to += width;
      });
    }
    this.attrValues = values;
    this.attrAccepts = accepts;
    this.widths = widths;
    this.columnCount = total;
  }

  /** A new host key widens every row; existing tickets did not measure it, so they get the default. */
  private widenLatency(hostCount: number): void {
    const old = this.hostCount;
    const next = new Uint16Array(this.capacity * hostCount);
    next.fill(Math.min(this.layout.defaultLatencyMs, MAX_LATENCY));
    for (let r = 0; r < this.count; r++) next.set(this.latencyMs.subarray(r * old, (r + 1) * old), r * hostCount);
    this.latencyMs = next;
    this.hostCount = hostCount;
  }
}

/** A further column for a row whose last column is `last`: all ones if the top (spare) bit is set, else empty. */
const spare = (last: bigint): bigint => (last & TOP ? ALL : 0n);

/** Bits `indices` over `width` columns of 64. */
function bitColumns(indices: readonly number[], width: number): bigint[] {
  const columns = Array<bigint>(width).fill(0n);
  for (const i of indices) columns[i >> 6]! |= 1n << BigInt(i & 63);
  return columns;
}
