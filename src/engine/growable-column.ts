/// <reference lib="es2024.arraybuffer" />
// Pool columns that grow in place. A column given a reservation is a typed array over a resizable
// ArrayBuffer that reserves address space for that many elements (the service reserves a queue's
// max_pool_tickets rows): growing commits more of that space instead of copying every row into a new
// array, which at a million tickets held the event loop for about 100 ms (bench/RESULTS.md, thirteenth
// session). The kernel commits pages as rows are first written, so the reservation costs address space, not
// memory. A column grown past its reservation is copied into one reserving twice what it then holds; a
// column without one is a plain array, copied at each growth.
//
// Node reports a resizable buffer's memory neither in `external` nor in `arrayBuffers` once it has grown
// (`process.memoryUsage()`); the process's resident memory has it.

export type Column = Uint8Array | Uint16Array | Uint32Array | Float64Array | BigUint64Array;

export interface ColumnType<T extends Column> {
  new (buffer: ArrayBuffer): T;
  readonly BYTES_PER_ELEMENT: number;
}

/** A column of `length` zeros with room reserved for `reserved` (none past `length`: a plain array). */
export function growableColumn<T extends Column>(type: ColumnType<T>, length: number, reserved: number): T {
  const bytes = type.BYTES_PER_ELEMENT;
  if (reserved <= length) return new type(new ArrayBuffer(length * bytes));
  return new type(new ArrayBuffer(length * bytes, { maxByteLength: reserved * bytes }));
}

/**
 * `column` at `length` elements or more, its contents kept: the same array, grown in place, while its
 * reservation holds that; else a copy, reserving `reserved`, or twice `length` where the column had a
 * reservation.
 */
export function grownColumn<T extends Column>(column: T, type: ColumnType<T>, length: number, reserved = 0): T {
  const buffer = column.buffer as ArrayBuffer;
  const bytes = length * type.BYTES_PER_ELEMENT;
  if (buffer.resizable && bytes <= buffer.maxByteLength) {
    if (bytes > buffer.byteLength) buffer.resize(bytes);
    return column;
  }
  const next = growableColumn(type, length, Math.max(reserved, buffer.resizable ? 2 * length : length));
  next.set(column as never);
  return next;
}
