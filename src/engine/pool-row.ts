// A ticket's row: its engine input as the pool's columns hold it, computed once at ingestion. Preparing a row
// holds its host keys and attribute values in the pool's value tables (value-table.ts) until it goes into the
// pool (its ticket holds them then) or is released; the columns themselves are not touched.
import type { ParsedEngineInput } from './engine-input.js';
import { lowestBit, MAX_LATENCY } from './host-columns.js';
import type { ValueTable } from './value-table.js';

const ALL = 0xffff_ffff_ffff_ffffn;
const TOP = 1n << 63n;

/**
 * Columns a filter takes while its table uses `values` indices (ValueTable.size): a spare bit above its last
 * value (see `TicketPool.widenFilters`).
 */
export const filterColumns = (values: number): number => Math.floor(values / 64) + 1;

export interface PoolLayout {
  filters: readonly { name: string; mode: 'overlap' | 'containment' }[];
  rulesetIds: readonly string[];
  defaultLatencyMs: number;
  /**
   * Rows the columns reserve address space for (the queue's max_pool_tickets), so that they grow in place
   * up to it (growable-column.ts); none reserved past the pool's capacity when absent.
   */
  reservedRows?: number;
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
  /**
   * The row holds its host keys and attribute values in the pool's tables, from `prepareRow` until it is
   * inserted (the ticket's row holds them then) or released.
   */
  holds: boolean;
}

/** A pool's value tables: its host keys, and each attribute filter's values. */
export interface PoolTables {
  hosts: ValueTable;
  attributes: readonly ValueTable[];
}

/**
 * Turns a ticket into its row, holding its host keys and attribute values in `tables`: FAILED_PRECONDITION
 * when a table is full of live values, holding nothing then. Until the row is inserted or released no index
 * it uses is forgotten, so none is reused for another value meanwhile.
 */
export function prepareRow(
  tables: PoolTables,
  layout: PoolLayout,
  allRulesets: number,
  input: ParsedEngineInput,
  rulesetIds: readonly string[],
  arrivalMs: number,
): PoolRow {
  const partySize = input.playerIds.length;
  let rulesetMask = allRulesets;
  if (rulesetIds.length > 0) {
    rulesetMask = 0;
    for (const id of rulesetIds) rulesetMask |= 1 << layout.rulesetIds.indexOf(id);
    rulesetMask >>>= 0;
  }

  const held: [ValueTable, number][] = [];
  const hold = (table: ValueTable, key: string): number => {
    const i = table.hold(key);
    held.push([table, i]);
    return i;
  };
  try {
    const attrValues: bigint[][] = [];
    const attrAccepts: bigint[][] = [];
    layout.filters.forEach((filter, f) => {
      const attribute = input.attributes.get(filter.name);
      const table = tables.attributes[f]!;
      if (!attribute) {
        // Unspecified: compatible with everyone under either mode (docs/engine.md).
        const width = filterColumns(table.size);
        attrValues.push(Array<bigint>(width).fill(filter.mode === 'overlap' ? ALL : 0n));
        attrAccepts.push(Array<bigint>(width).fill(ALL));
        return;
      }
      // A row holds a value once, whether among its values, its accepts or both (as `heldIndices` reads it).
      const indices = new Map<string, number>();
      const indexOf = (value: string): number => {
        let i = indices.get(value);
        if (i === undefined) indices.set(value, (i = hold(table, value)));
        return i;
      };
      const values = attribute.values.map(indexOf);
      const accepts = attribute.accepts.map(indexOf);
      const width = filterColumns(table.size);
      attrValues.push(bitColumns(values, width));
      attrAccepts.push(bitColumns(accepts, width));
    });

    // A party's latency to a host is its worst player's; a player without a measurement counts as the default.
    const latencies: [number, number][] = [];
    for (const [host, { ms, measuredBy }] of input.latencies) {
      const h = hold(tables.hosts, host);
      const effective = measuredBy < partySize ? Math.max(ms, layout.defaultLatencyMs) : ms;
      latencies.push([h, Math.min(effective, MAX_LATENCY)]);
    }
    return { partySize, mmrMean: input.mmrMean, arrivalMs, rulesetMask, attrValues, attrAccepts, latencies, holds: true };
  } catch (err) {
    // A refused row holds nothing: what it took before a table was full is let go.
    for (const [table, i] of held) table.release(i);
    throw err;
  }
}

/** Whether `tables` hold every host key and attribute value a row of `input` would hold: it would take no new index. */
export function tablesHold(tables: PoolTables, layout: PoolLayout, input: ParsedEngineInput): boolean {
  for (const host of input.latencies.keys()) if (!tables.hosts.has(host)) return false;
  return layout.filters.every((filter, f) => {
    const attribute = input.attributes.get(filter.name);
    const table = tables.attributes[f]!;
    return attribute === undefined || (attribute.values.every((v) => table.has(v)) && attribute.accepts.every((v) => table.has(v)));
  });
}

/** Lets go of what a prepared row holds in `tables`, unless it went into the pool (its ticket holds it). */
export function releaseRow(tables: PoolTables, row: PoolRow): void {
  if (!row.holds) return;
  row.holds = false;
  row.attrValues.forEach((values, f) => {
    for (const i of heldIndices(values, row.attrAccepts[f]!)) tables.attributes[f]!.release(i);
  });
  for (const [h] of row.latencies) tables.hosts.release(h);
}

/** A further column for a row whose last column is `last`: all ones if the top (spare) bit is set, else empty. */
export const spare = (last: bigint): bigint => (last & TOP ? ALL : 0n);

/** Bits `indices` over `width` columns of 64. */
function bitColumns(indices: readonly number[], width: number): bigint[] {
  const columns = Array<bigint>(width).fill(0n);
  for (const i of indices) columns[i >> 6]! |= 1n << BigInt(i & 63);
  return columns;
}

/**
 * The value indices a row holds in one filter, from its columns: those of its values and accepts, or none
 * when it left the filter unspecified (the spare top bit of its last accepts column).
 */
export function heldIndices(values: ArrayLike<bigint>, accepts: ArrayLike<bigint>): number[] {
  const held: number[] = [];
  if (accepts[accepts.length - 1]! & TOP) return held;
  for (let w = 0; w < values.length; w++) {
    const word = values[w]! | accepts[w]!;
    for (const [half, offset] of [
      [Number(word & 0xffff_ffffn), 64 * w],
      [Number(word >> 32n), 64 * w + 32],
    ] as const) {
      for (let bits = half; bits !== 0; bits &= bits - 1) held.push(offset + lowestBit(bits));
    }
  }
  return held;
}
