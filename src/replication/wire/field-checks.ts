// The checks both codecs of the wire make on the way (record-wire.ts for log entries; checkpoint-codec.ts and
// checkpoint-decode.ts for checkpoints): the encoder refuses a value it cannot write exactly, the decoder a
// missing, out-of-range or unknown field, each naming the field by its path.
import type { Message } from '@bufbuild/protobuf';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { TicketSchema } from '../../gen/matchmaker/core/v1/resources_pb.js';
import { asciiTicketId } from './wire-walk.js';

/** A log entry that is not what log.proto says: the replica reading it must stop. `field` is its path in the entry. */
export class LogDecodeError extends Error {
  constructor(
    readonly field: string,
    problem: string,
    options: { cause?: unknown } = {},
  ) {
    super(`corrupt log entry: ${field} ${problem}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LogDecodeError';
  }
}

/** A record that cannot be written exactly: the caller made it wrong. */
export class LogEncodeError extends Error {
  constructor(
    readonly field: string,
    problem: string,
    options: { cause?: unknown } = {},
  ) {
    super(`cannot encode log entry: ${field} ${problem}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LogEncodeError';
  }
}

/** A safe integer (at least `min` when given) as an int64. */
export function whole(value: number, path: string, min?: number): bigint {
  if (!Number.isSafeInteger(value)) throw new LogEncodeError(path, `${value} is not a whole number within ±(2^53-1)`);
  if (min !== undefined && value < min) throw new LogEncodeError(path, `${value} is below ${min}`);
  return BigInt(value);
}

// A lone surrogate has no UTF-8 form: the encoder would write U+FFFD and the record would change on the way.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function text(value: string, path: string): string {
  if (typeof value !== 'string' || LONE_SURROGATE.test(value)) throw new LogEncodeError(path, 'is not a well-formed string');
  return value;
}

export function present<T>(value: T | undefined, path: string): T {
  if (value === undefined) throw new LogDecodeError(path, 'is missing');
  return value;
}

const MAX = BigInt(Number.MAX_SAFE_INTEGER);

/** A present int64 within ±(2^53-1) (and at least `min`), as a number. */
export function num(value: bigint | undefined, path: string, min = -MAX): number {
  const v = present(value, path);
  if (v < min || v > MAX) throw new LogDecodeError(path, `${v} is out of range (${min}..2^53-1)`);
  return Number(v);
}

/**
 * Refuses fields this build does not know: applying a record (or restoring a state) without them could
 * diverge from a replica that knows them. `fail` makes the caller's typed error.
 */
export function known(
  msg: Message,
  path: string,
  fail: (path: string, problem: string) => Error = (at, problem) => new LogDecodeError(at, problem),
): void {
  const unknown = msg.$unknown;
  if (unknown !== undefined && unknown.length > 0) {
    throw fail(path, `has fields this version does not know (numbers ${unknown.map((f) => f.no).join(', ')})`);
  }
}

/** Ticket.id's field number: the id is read from the bytes without decoding the rest of the ticket. */
const TICKET_ID_FIELD = TicketSchema.field.id!.number;

/**
 * The ticket id inside serialized Ticket bytes: the wire carries it once, there. Only the id is decoded
 * (the last occurrence wins, as in a full decode), the other fields are walked over: a checkpoint holds a
 * million tickets, and decoding each whole was most of the time it took to read one.
 */
export function ticketIdOf(ticket: Uint8Array, fail: (problem: string, cause?: unknown) => Error): string {
  // The usual shape, walked without a reader (wire-walk.ts); the reader decides everything else.
  const ascii = asciiTicketId(ticket);
  if (ascii !== undefined) return ascii;
  let id = '';
  try {
    const reader = new BinaryReader(ticket);
    while (reader.pos < reader.len) {
      const [fieldNo, wireType] = reader.tag();
      if (fieldNo === TICKET_ID_FIELD) {
        if (wireType !== WireType.LengthDelimited) throw new Error(`field ${fieldNo} has wire type ${wireType}`);
        id = reader.string();
      } else reader.skip(wireType, fieldNo);
    }
  } catch (err) {
    throw fail('is not a Ticket', err);
  }
  if (id === '') throw fail('is a Ticket without an id');
  return id;
}

/** ticketIdOf the Ticket in `bytes[start, end)`, making no view of it for the usual shape. */
export function ticketIdIn(bytes: Uint8Array, start: number, end: number, fail: (problem: string, cause?: unknown) => Error): string {
  return asciiTicketId(bytes, start, end) ?? ticketIdOf(bytes.subarray(start, end), fail);
}

/** Decoded bytes are views of the message's buffer: a copy keeps a record from pinning the whole entry. */
export const copy = (bytes: Uint8Array): Uint8Array => new Uint8Array(bytes);
