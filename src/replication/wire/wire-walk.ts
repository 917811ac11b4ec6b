// Reads of the two small messages a checkpoint and the log hold a million of, straight from their bytes:
// a Ticket's id, and an ActiveTicket's ticket and position. A BinaryReader per message (it makes a
// DataView) and a TextDecoder call per id were most of what decoding a 1M-ticket checkpoint cost (the
// replicated mode's restart, docs/replication.md). Each read answers only when the bytes have the usual
// shape; for anything else it answers undefined and the caller reads the bytes with the full reader, which
// accepts or refuses them as ever. So where these answer, they answer what the full reader would.

import { cursor, fieldSpan, skip, varint, type Span } from '../../store/field-walk.js';

export type { Span } from '../../store/field-walk.js';

/** Latin-1 decoding of a Uint8Array's range, without a view of it; equal to UTF-8 for ASCII bytes. */
export const latin1Slice = Buffer.prototype.latin1Slice as (this: Uint8Array, start: number, end: number) => string;

/**
 * Walks the fields of the message in `bytes`: pushes the payload's offsets (start, end) of each
 * length-delimited field whose number `apart` lists to that list, and every other field's own offsets to
 * `rest`. Answers false where a tag is longer than three bytes or a field does not walk: the caller then
 * reads the message with the full reader, which accepts or refuses it by name.
 */
export function walkFields(bytes: Uint8Array, apart: ReadonlyMap<number, number[]>, rest: number[]): boolean {
  const end = bytes.length;
  cursor.at = 0;
  while (cursor.at < end) {
    const start = cursor.at;
    if (!varint(bytes, end, 3)) return false;
    const field = cursor.value >>> 3;
    const wireType = cursor.value & 7;
    if (field === 0) return false;
    const spans = wireType === 2 ? apart.get(field) : undefined;
    if (spans) {
      if (!varint(bytes, end, 4)) return false;
      const payloadEnd = cursor.at + cursor.value;
      if (payloadEnd > end) return false;
      spans.push(cursor.at, payloadEnd);
      cursor.at = payloadEnd;
    } else {
      if (!skip(bytes, end, wireType)) return false;
      rest.push(start, cursor.at);
    }
  }
  return true;
}

/**
 * Finds Ticket.id (field 1; the last occurrence wins) of the Ticket in `bytes[start, end)`, into `span`, when
 * every field walks cleanly (`fieldSpan`) and the id is ASCII and not empty; otherwise answers false. No string
 * is made: a restore puts a million ids into its map straight from their bytes (id-map.ts setAscii).
 */
export function ticketIdSpan(bytes: Uint8Array, start: number, end: number, span: Span): boolean {
  if (fieldSpan(bytes, start, end, 1, span) <= 0 || span.end === span.start) return false;
  for (let i = span.start; i < span.end; i++) if (bytes[i]! >= 0x80) return false;
  return true;
}

const idSpan: Span = { start: 0, end: 0 };

/** The id ticketIdSpan finds, as a string; undefined where it finds none. */
export function asciiTicketId(bytes: Uint8Array, start = 0, end = bytes.length): string | undefined {
  return ticketIdSpan(bytes, start, end, idSpan) ? latin1Slice.call(bytes, idSpan.start, idSpan.end) : undefined;
}

/**
 * Whether the Ticket in `bytes` holds `id`, read as ticketIdSpan reads it, without making a string; undefined
 * where ticketIdSpan finds none (the caller then reads it with the full reader).
 */
export function holdsAsciiTicketId(bytes: Uint8Array, id: string): boolean | undefined {
  if (!ticketIdSpan(bytes, 0, bytes.length, idSpan)) return undefined;
  if (idSpan.end - idSpan.start !== id.length) return false;
  for (let k = 0; k < id.length; k++) if (bytes[idSpan.start + k] !== id.charCodeAt(k)) return false;
  return true;
}

/** ActiveTicket's tags as the encoder writes them: `ticket` (1, length-delimited), `position` (2, varint). */
const TICKET_TAG = (1 << 3) | 2;
const POSITION_TAG = (2 << 3) | 0;

/** Where activeTicketAt found an ActiveTicket's parts. */
export interface ActiveTicketParts {
  /** The Ticket's bytes: `bytes[ticketStart, ticketEnd)`. */
  ticketStart: number;
  ticketEnd: number;
  position: number;
}

/**
 * Reads the ActiveTicket in `bytes[start, end)` into `parts` when it has exactly the shape the encoder
 * writes: its ticket, then its position as a varint from 1 to 2^53-1, each once, nothing else. Answers
 * false for anything else. Offsets, not a view: a million views were garbage for the collector.
 */
export function activeTicketAt(bytes: Uint8Array, start: number, end: number, parts: ActiveTicketParts): boolean {
  cursor.at = start;
  if (start >= end || bytes[cursor.at++] !== TICKET_TAG || !varint(bytes, end, 4)) return false;
  const ticketStart = cursor.at;
  const ticketEnd = cursor.at + cursor.value;
  if (ticketEnd >= end) return false;
  cursor.at = ticketEnd;
  if (bytes[cursor.at++] !== POSITION_TAG || !varint(bytes, end, 8)) return false;
  const position = cursor.value;
  if (cursor.at !== end || position < 1 || position > Number.MAX_SAFE_INTEGER) return false;
  parts.ticketStart = ticketStart;
  parts.ticketEnd = ticketEnd;
  parts.position = position;
  return true;
}
