// The pool's latency matrix over the host table: per row a u16 per host index (row-major), the party's worst
// latency to that host. A column is a host's while some row of the pool measured it: the rows that did not
// read the default latency there. Any other column reads MAX_LATENCY for every row, so the engine never finds
// it acceptable below a 65,535 ms bound, and the columns past the last host's are dropped before the engine
// reads the matrix (`fit`): a pool whose rows measured no host has none. Beside it, one bit per host index a
// row measured, which is what the row holds in the host table (value-table.ts).
import { growableColumn, grownColumn } from './growable-column.js';
import type { TableKeys, ValueTable } from './value-table.js';

/** Latencies are u16 in the columns; larger measurements are clamped. */
export const MAX_LATENCY = 0xffff;

export class HostColumns {
  /** Host indices in the matrix: up to the last a row measured, as rows go in; the columns past the last host's go in `fit`. */
  count = 0;
  latencyMs = new Uint16Array(0);
  /** Per row, one bit per host index it measured (32 a word, `words` words a row). Not an engine input. */
  private measured = new Uint32Array(0);
  private words = 0;
  private capacity = 0;
  /** Per host index, the rows that measured it. */
  private readonly rowsOf: Uint32Array;
  /** Per host index below `count`: 1 when its column is a host's. */
  private readonly hostColumn: Uint8Array;
  /** A host lost its last row since `fit`: its column still reads as a host's. */
  private left = false;
  /** Counts the rewrites of whole columns (a column becoming a host's or none, the matrix laid out again). */
  rewrites = 0;

  constructor(
    private readonly table: ValueTable,
    maxHosts: number,
    private readonly unmeasuredMs: number,
    /** Rows the columns reserve room for (growable-column.ts). */
    private readonly reservedRows: number,
  ) {
    this.rowsOf = new Uint32Array(maxHosts);
    this.hostColumn = new Uint8Array(maxHosts);
  }

  /** Whether host index `h` is a host of the pool: some row measured it. */
  isHost(h: number): boolean {
    return this.rowsOf[h]! > 0;
  }

  /** Per column, its host key; none where no row measured it. */
  keys(): TableKeys {
    const keys = this.table.keys();
    return Array.from({ length: this.count }, (_, h) => (this.hostColumn[h] ? keys[h] : undefined));
  }

  /** Room for `capacity` rows (every row kept). */
  grow(capacity: number): void {
    this.latencyMs = grownColumn(this.latencyMs, Uint16Array, capacity * this.count);
    this.measured = grownColumn(this.measured, Uint32Array, capacity * this.words);
    this.capacity = capacity;
  }

  /**
   * A new row `r` after the rows before it: its measurements, the default latency at the other hosts' columns.
   * A host it measured is made a host's column first (the rows before it read the default there).
   */
  write(r: number, latencies: readonly [host: number, ms: number][]): void {
    let columns = this.count;
    for (const [host] of latencies) columns = Math.max(columns, host + 1);
    if (columns > this.count) this.relayout(columns, r);
    for (const [host] of latencies) if (!this.hostColumn[host]) this.setColumn(host, true, r);
    const h = this.count;
    const unmeasured = Math.min(this.unmeasuredMs, MAX_LATENCY);
    for (let k = 0; k < h; k++) this.latencyMs[r * h + k] = this.hostColumn[k] ? unmeasured : MAX_LATENCY;
    const m = this.words;
    this.measured.fill(0, r * m, (r + 1) * m);
    for (const [host, ms] of latencies) {
      this.latencyMs[r * h + host] = ms;
      this.measured[r * m + (host >> 5)]! |= 1 << (host & 31);
      this.rowsOf[host]!++;
    }
  }

  /** Row `from` moves to `to` (swap-remove). */
  move(from: number, to: number): void {
    const [h, m] = [this.count, this.words];
    this.latencyMs.copyWithin(to * h, from * h, (from + 1) * h);
    this.measured.copyWithin(to * m, from * m, (from + 1) * m);
  }

  /** Row `r` leaves: it lets go of the host keys it measured. */
  release(r: number): void {
    const m = this.words;
    for (let w = 0; w < m; w++) {
      for (let bits = this.measured[r * m + w]!; bits !== 0; bits &= bits - 1) {
        const h = 32 * w + lowestBit(bits);
        this.table.release(h);
        if (--this.rowsOf[h]! === 0) this.left = true;
      }
    }
  }

  /**
   * Before the engine reads the matrix of `rows` rows: a host that lost its last row stops being one, and the
   * columns past the last host's go. No row measured such a host any more, so no measurement is overwritten.
   */
  fit(rows: number): void {
    if (!this.left) return;
    this.left = false;
    let hosts = this.count;
    while (hosts > 0 && this.rowsOf[hosts - 1] === 0) hosts--;
    if (hosts < this.count) this.relayout(hosts, rows);
    for (let h = 0; h < hosts; h++) if (this.hostColumn[h] && this.rowsOf[h] === 0) this.setColumn(h, false, rows);
  }

  /** Bytes per row: the latencies and the measured bits. */
  get bytesPerRow(): number {
    return 2 * this.count + 4 * this.words;
  }

  /** The matrix at `count` columns for the first `rows` rows; a new column is no host's until a row measures it. */
  private relayout(count: number, rows: number): void {
    const [old, oldWords] = [this.count, this.words];
    const words = Math.ceil(count / 32);
    const [keep, keepWords] = [Math.min(old, count), Math.min(oldWords, words)];
    const reserved = Math.max(this.capacity, this.reservedRows);
    const latency = growableColumn(Uint16Array, this.capacity * count, reserved * count).fill(MAX_LATENCY);
    const measured = growableColumn(Uint32Array, this.capacity * words, reserved * words);
    for (let r = 0; r < rows; r++) {
      latency.set(this.latencyMs.subarray(r * old, r * old + keep), r * count);
      measured.set(this.measured.subarray(r * oldWords, r * oldWords + keepWords), r * words);
    }
    this.hostColumn.fill(0, keep);
    [this.latencyMs, this.measured, this.count, this.words] = [latency, measured, count, words];
    this.rewrites++;
  }

  /** Column `h` of the first `rows` rows: the default latency once it is a host's, MAX_LATENCY once it is none. */
  private setColumn(h: number, host: boolean, rows: number): void {
    const ms = host ? Math.min(this.unmeasuredMs, MAX_LATENCY) : MAX_LATENCY;
    for (let r = 0; r < rows; r++) this.latencyMs[r * this.count + h] = ms;
    this.hostColumn[h] = host ? 1 : 0;
    this.rewrites++;
  }
}

/** The index of the lowest set bit of a 32-bit word. */
export const lowestBit = (bits: number): number => 31 - Math.clz32(bits & -bits);
