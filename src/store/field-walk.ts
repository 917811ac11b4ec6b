// Reads of protobuf wire fields straight from a message's bytes, for the few messages the service reads by the
// million (replication/wire/wire-walk.ts: a checkpoint's tickets and the log's; ticket-encoding.ts: a stored
// ticket's wait, a request's ticket; `fieldSpan` finds one field). No reader is made and no string: a walk answers only for the usual shape
// and leaves anything else to the full reader, which accepts or refuses it as ever. And varints written into a
// buffer sized once, for the messages written by appending fields to encoded ones (ticket-encoding.ts,
// outcomes/outcome-encoding.ts), where a growing writer copied the bytes again at each doubling.

/** Where the walk is: its offset in the bytes, and the value of the last varint read. */
export interface Cursor {
  at: number;
  value: number;
}

export const cursor: Cursor = { at: 0, value: 0 };

/** Reads a varint of at most `maxBytes` at cursor.at (exact below 2^53); false if it does not end within them. */
export function varint(b: Uint8Array, end: number, maxBytes: number): boolean {
  let value = 0;
  let scale = 1;
  for (let n = 0; n < maxBytes && cursor.at < end; n++) {
    const byte = b[cursor.at++]!;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) {
      cursor.value = value;
      return true;
    }
    scale *= 128;
  }
  return false;
}

/** Skips a field's payload of wire type `wireType` from cursor.at; false for a group, an unknown type or a short read. */
export function skip(b: Uint8Array, end: number, wireType: number): boolean {
  switch (wireType) {
    case 0:
      for (let n = 0; n < 10; n++) {
        if (cursor.at >= end) return false;
        if (b[cursor.at++]! < 0x80) return true;
      }
      return false;
    case 1:
      cursor.at += 8;
      return cursor.at <= end;
    case 2:
      if (!varint(b, end, 4)) return false;
      cursor.at += cursor.value;
      return cursor.at <= end;
    case 5:
      cursor.at += 4;
      return cursor.at <= end;
    default:
      return false;
  }
}

/** Where a walk found a field's payload: `bytes[start, end)`. */
export interface Span {
  start: number;
  end: number;
}

/**
 * Finds the length-delimited field `field` of the message in `bytes[start, end)`: the payload of its last
 * occurrence into `span`, and how many times it occurs (none: `span` as it was). -1 where a tag is longer than
 * three bytes (field numbers below 2^18), a field number is 0, `field` occurs with another wire type or a field
 * does not walk: the caller then reads the message with the full reader.
 */
export function fieldSpan(bytes: Uint8Array, start: number, end: number, field: number, span: Span): number {
  let count = 0;
  cursor.at = start;
  while (cursor.at < end) {
    if (!varint(bytes, end, 3)) return -1;
    const number = cursor.value >>> 3;
    const wireType = cursor.value & 7;
    if (number === 0) return -1;
    if (number === field) {
      if (wireType !== 2 || !varint(bytes, end, 4) || cursor.at + cursor.value > end) return -1;
      span.start = cursor.at;
      span.end = cursor.at += cursor.value;
      count++;
    } else if (!skip(bytes, end, wireType)) return -1;
  }
  return count;
}

/** Bytes of `value` (0 <= value < 2^53) as a varint. */
export function varintSize(value: number): number {
  let size = 1;
  for (let v = value; v >= 128; v = Math.floor(v / 128)) size++;
  return size;
}

/** Writes `value` (0 <= value < 2^53) as a varint at `at`; answers where it ends. */
export function writeVarint(bytes: Uint8Array, at: number, value: number): number {
  let v = value;
  while (v >= 128) {
    bytes[at++] = (v % 128) | 0x80;
    v = Math.floor(v / 128);
  }
  bytes[at++] = v;
  return at;
}
