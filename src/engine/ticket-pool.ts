// A queue's active pool as columns (struct of arrays) for the native engine: one row per ticket, O(1) add
// and swap-remove, an id -> row map. Each ticket's engine_input is turned into its row once, at ingestion
// (prepare); the tick reads the rows in place. Column layout and encodings: docs/engine.md. The strings the
// rows' bits and latency columns stand for are in value tables (value-table.ts) that forget what no row holds.
import type { ParsedEngineInput } from './engine-input.js';
import { growableColumn, grownColumn } from './growable-column.js';
import { ChangedRows } from './changed-rows.js';
import { HostColumns } from './host-columns.js';
import type { PoolChangeArrays } from './native.js';
import {
  filterColumns,
  heldIndices,
  type PoolLayout,
  type PoolRow,
  type PoolTables,
  prepareRow,
  releaseRow,
  spare,
  tablesHold,
} from './pool-row.js';
import { IdColumn, IdMap } from './id-map.js';
import { type TableKeys, ValueTable } from './value-table.js';

export type { PoolLayout, PoolRow } from './pool-row.js';

/** Interned host keys per queue: bit positions in the engine's acceptable-host set (one u64 per 64 hosts). */
export const MAX_HOST_KEYS = 256;
/**
 * Interned values per attribute filter. Value v is bit v % 64 of the filter's column v / 64; a filter has
 * floor(values / 64) + 1 columns (filterColumns), so its last column always has a bit no value uses.
 */
export const MAX_FILTER_VALUES = 256;

/** What a tick's indices stand for, as the tables stood when it read the columns. */
export interface PoolKeys {
  hosts: TableKeys;
  /** Per filter, its values, and its columns in a row. */
  attributes: TableKeys[];
  spans: { start: number; width: number }[];
}

export class TicketPool {
  count = 0;
  private capacity = 0;
  /** Rows the columns reserve room for (PoolLayout.reservedRows): they grow in place up to it; 0, none. */
  private readonly reserved: number;
  partySize: Uint8Array;
  mmrMean: Float64Array;
  arrivalMs: Float64Array;
  rulesetMask: Uint32Array;
  attrValues: BigUint64Array;
  attrAccepts: BigUint64Array;
  /**
   * Per row, why the ticket still waited after the last tick that read it: the engine's refusal code
   * (tick-runner.ts refusalName; 0 none). Not an engine input: it moves with its row, and a row added since
   * that tick reads 0.
   */
  refusal: Uint8Array;
  /**
   * At or before every row's arrival: the oldest as the last `arrivedBefore` scan found it, or an arrival
   * inserted since. Lets the tick's expiry skip its scan of the column while no ticket can be old enough.
   */
  private arrivalFloorMs = Number.POSITIVE_INFINITY;
  /** When the tick that wrote `refusal` ran (epoch ms); undefined before the first. */
  refusalsAtMs: number | undefined;
  /** The latency matrix over the host table (host-columns.ts). */
  private readonly latency: HostColumns;
  /** Per filter, its columns in attrValues and attrAccepts; may lag the filter's values until the next insert. */
  private widths: number[];
  /** Columns per row: the sum of `widths`. */
  private columnCount: number;
  /** Row -> ticket id, and back: off the JS heap (id-map.ts). */
  private readonly ids: IdColumn;
  private readonly rows = new IdMap();
  readonly hosts = new ValueTable('the host key set', MAX_HOST_KEYS);
  readonly attributeKeys: ValueTable[];
  private readonly tables: PoolTables;
  /** Tickets whose rows are still in the columns but whose strings were let go (`releaseValues`). */
  private readonly valuesReleased = new Set<string>();
  private readonly allRulesets: number;
  /** The rows written since the engine last read the pool (`takeChanges`). */
  private readonly changes = new ChangedRows();

  constructor(
    readonly layout: PoolLayout,
    initialCapacity = 1024,
  ) {
    this.attributeKeys = layout.filters.map((f) => new ValueTable(`attribute filter "${f.name}"`, MAX_FILTER_VALUES));
    this.widths = layout.filters.map(() => 1);
    this.columnCount = layout.filters.length;
    this.allRulesets = layout.rulesetIds.length >= 32 ? 0xffff_ffff : (1 << layout.rulesetIds.length) - 1;
    this.tables = { hosts: this.hosts, attributes: this.attributeKeys };
    const reserved = (this.reserved = layout.reservedRows ?? 0);
    const f = this.columnCount;
    this.partySize = growableColumn(Uint8Array, 0, reserved);
    this.mmrMean = growableColumn(Float64Array, 0, reserved);
    this.arrivalMs = growableColumn(Float64Array, 0, reserved);
    this.rulesetMask = growableColumn(Uint32Array, 0, reserved);
    this.refusal = growableColumn(Uint8Array, 0, reserved);
    this.attrValues = growableColumn(BigUint64Array, 0, reserved * f);
    this.attrAccepts = growableColumn(BigUint64Array, 0, reserved * f);
    this.latency = new HostColumns(this.hosts, MAX_HOST_KEYS, layout.defaultLatencyMs, reserved);
    this.ids = new IdColumn(reserved);
    this.grow(initialCapacity);
    this.rows.expect(initialCapacity);
  }

  /** Per row, its worst latency per host index (row-major, `hostCount` a row). */
  get latencyMs(): Uint16Array {
    return this.latency.latencyMs;
  }

  /** Host indices in the latency matrix: may lag the host table until the next insert (HostColumns). */
  get hostCount(): number {
    return this.latency.count;
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

  /** Whether host index `h` is a host of the pool: some row measured it. */
  isHost(h: number): boolean {
    return this.latency.isHost(h);
  }

  /**
   * What the columns' indices stand for now: per host column its key (none where no row measured it), per
   * filter its values and columns. A tick takes it when it reads the columns, and names its matches' hosts and
   * values with it, since the tables may forget and reuse an index before every match is committed.
   */
  keys(): PoolKeys {
    return { hosts: this.latency.keys(), attributes: this.attributeKeys.map((t) => t.keys()), spans: this.filterSpans() };
  }

  /**
   * A prepared row's attribute columns laid out at the pool's widths: a filter that gained columns since
   * the row was prepared gets them as `widenFilters` gives them to the rows in the pool. A row prepared
   * while its table used more indices than it does now may have more columns than the pool: its values are
   * all within the pool's (they are live), and the columns past them are empty or, unspecified, all ones.
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

  /** The id of the ticket at row `row` (below `count`). */
  idAt(row: number): string {
    return this.ids.get(row);
  }

  /**
   * The rows whose tickets arrived before `cutoffMs`. Reads the arrival column only when some row may have
   * (a million rows took 2.5 to 40 ms of every tick's expiry), and keeps the oldest arrival it read, the rows
   * found included: they stay the oldest until they leave.
   */
  arrivedBefore(cutoffMs: number): number[] {
    if (this.arrivalFloorMs >= cutoffMs) return [];
    const rows: number[] = [];
    let floor = Number.POSITIVE_INFINITY;
    for (let r = 0; r < this.count; r++) {
      const arrival = this.arrivalMs[r]!;
      if (arrival < cutoffMs) rows.push(r);
      if (arrival < floor) floor = arrival;
    }
    this.arrivalFloorMs = floor;
    return rows;
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
   * Turns a ticket into its row (pool-row.ts): holds its host keys and attribute values in the tables
   * (FAILED_PRECONDITION when one is full of live values) but does not touch the columns, so it is safe while
   * a tick reads them. The row is then inserted, or released.
   */
  prepare(input: ParsedEngineInput, rulesetIds: readonly string[], arrivalMs: number): PoolRow {
    return prepareRow(this.tables, this.layout, this.allRulesets, input, rulesetIds, arrivalMs);
  }

  /** Whether a row of `input` would take no new index in the tables (pool-row.ts `tablesHold`). */
  holdsValuesOf(input: ParsedEngineInput): boolean {
    return tablesHold(this.tables, this.layout, input);
  }

  /** Lets go of what a prepared row holds in the tables, unless it went into the pool (its ticket holds it). */
  release(row: PoolRow): void {
    releaseRow(this.tables, row);
  }

  /** Appends a prepared row, which hands what it holds to the ticket. Only between ticks: it may reallocate the columns. */
  insert(ticketId: string, row: PoolRow): void {
    if (!row.holds) throw new Error(`the row of ticket ${ticketId} was inserted or released already`);
    row.holds = false;
    if (this.rows.has(ticketId)) this.remove(ticketId);
    this.fitFilters();
    if (this.count === this.capacity) this.grow(this.nextCapacity());
    const r = this.count++;
    this.partySize[r] = row.partySize;
    this.mmrMean[r] = row.mmrMean;
    this.arrivalMs[r] = row.arrivalMs;
    if (row.arrivalMs < this.arrivalFloorMs) this.arrivalFloorMs = row.arrivalMs;
    this.rulesetMask[r] = row.rulesetMask;
    this.refusal[r] = 0;
    const f = this.filterCount;
    const { values, accepts } = this.columnsOf(row);
    this.attrValues.set(values, r * f);
    this.attrAccepts.set(accepts, r * f);
    this.latency.write(r, row.latencies);
    this.ids.set(r, ticketId);
    this.rows.set(ticketId, r);
    this.changes.note(r, this.count);
  }

  /**
   * The ticket left: it lets go of what it holds in the tables now, while its row may stay in the columns
   * until the engine has read them (`remove` then takes the row out). Only the tables change, which the
   * engine does not read; an index freed here may go to a new string at once, while the row that had it is
   * still in the columns: the engine's run may then read that row, whose ticket left, so no match of it is
   * committed, and a tick names strings by the tables as it read them (`TickResult.keys`).
   */
  releaseValues(ticketId: string): void {
    const r = this.rows.get(ticketId);
    if (r === undefined || this.valuesReleased.has(ticketId)) return;
    this.releaseAt(r);
    this.valuesReleased.add(ticketId);
  }

  /** Swap-remove: the last row moves into the hole. The ticket lets go of what it held, unless it did already. Only between ticks. */
  remove(ticketId: string): boolean {
    const r = this.rows.get(ticketId);
    if (r === undefined) return false;
    if (!this.valuesReleased.delete(ticketId)) this.releaseAt(r);
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
      this.latency.move(last, r);
      this.ids.move(last, r);
      this.rows.set(this.ids.get(r), r);
      this.changes.note(r, this.count);
    } else {
      this.ids.forget(last);
    }
    return true;
  }

  /**
   * What changed since the last call, for the engine about to read the pool: undefined when it must lay the
   * pool out whole (its first read, whole columns rewritten, or more than a quarter of the rows changed, when
   * a merge costs what a layout does). The pool counts as read from now on.
   */
  takeChanges(): PoolChangeArrays | undefined {
    return this.changes.take(this.count, this.latency.rewrites);
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
    return 1 + 8 + 8 + 4 + 16 * this.filterCount + this.latency.bytesPerRow;
  }

  /**
   * Fits the columns to the tables before the engine reads them: each filter gets the columns its values
   * need, a host that lost its last row stops being one (its column reads MAX_LATENCY), and the columns past
   * the last host's go. Only between ticks: it may reallocate the columns.
   */
  fitColumns(): void {
    this.fitFilters();
    this.latency.fit(this.count);
  }

  /** Gives every filter the columns its values need now. Only between ticks: it may reallocate the columns. */
  private fitFilters(): void {
    if (this.attributeKeys.some((keys, f) => filterColumns(keys.size) > this.widths[f]!)) this.widenFilters();
  }

  /** Lets go of what the row at `r` holds: its specified filters' values and accepts, and the hosts it measured. */
  private releaseAt(r: number): void {
    let from = r * this.filterCount;
    this.widths.forEach((width, f) => {
      const held = heldIndices(this.attrValues.subarray(from, from + width), this.attrAccepts.subarray(from, from + width));
      for (const i of held) this.attributeKeys[f]!.release(i);
      from += width;
    });
    this.latency.release(r);
  }

  /**
   * Twice the rows, or the reservation where that is less and still more than now, so that a pool filling to
   * the queue's max_pool_tickets never outgrows its reservation (and copies) on the way.
   */
  private nextCapacity(): number {
    const doubled = this.capacity * 2;
    return this.reserved > this.capacity ? Math.min(doubled, this.reserved) : doubled;
  }

  /** Room for `capacity` rows: in place within the reservation (growable-column.ts), else by a copy. */
  private grow(capacity: number): void {
    const f = this.filterCount;
    this.partySize = grownColumn(this.partySize, Uint8Array, capacity);
    this.mmrMean = grownColumn(this.mmrMean, Float64Array, capacity);
    this.arrivalMs = grownColumn(this.arrivalMs, Float64Array, capacity);
    this.rulesetMask = grownColumn(this.rulesetMask, Uint32Array, capacity);
    this.refusal = grownColumn(this.refusal, Uint8Array, capacity);
    this.attrValues = grownColumn(this.attrValues, BigUint64Array, capacity * f);
    this.attrAccepts = grownColumn(this.attrAccepts, BigUint64Array, capacity * f);
    this.latency.grow(capacity);
    this.ids.grow(capacity);
    this.capacity = capacity;
  }

  /**
   * A filter past a multiple of 64 values gets another column in every row. A ticket's values and accepts are
   * among the values live when it was prepared, so its new column is empty, unless the filter was
   * unspecified for it (all ones, as the spare top bit of its last column shows; see `spare`).
   */
  private widenFilters(): void {
    const widths = this.attributeKeys.map((keys, f) => Math.max(this.widths[f]!, filterColumns(keys.size)));
    const total = widths.reduce((a, b) => a + b, 0);
    const column = () => growableColumn(BigUint64Array, this.capacity * total, Math.max(this.capacity, this.reserved) * total);
    const [values, accepts] = [column(), column()];
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
    // Every row's attribute columns moved: the engine lays the pool out whole.
    this.changes.forget();
  }
}
