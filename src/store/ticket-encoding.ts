// The bytes a ticket is stored and delivered as: the Ticket as acknowledged (lowercased id, the server's
// created_at). Encoding it again from the decoded message is one of the dearest steps of CreateTicket, so
// when the request arrived in binary (gRPC) the ticket's own bytes are taken from it and the server's
// fields are appended: protobuf decoding keeps the last value of a scalar field and merges a message
// field, so the appended id and created_at (both Timestamp fields written, zeros included) win over
// whatever the caller sent. Decoding the result gives the same message as encoding it afresh.
import { create, fromBinary, mergeFromBinary, toBinary } from '@bufbuild/protobuf';
import { TimestampSchema, type Timestamp } from '@bufbuild/protobuf/wkt';
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { TicketSchema, type Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import { cursor, fieldSpan, skip, type Span, varint, varintSize, writeVarint } from './field-walk.js';
import { CreateTicketRequestSchema } from '../gen/matchmaker/core/v1/service_pb.js';

const REQUEST_TICKET = CreateTicketRequestSchema.field.ticket!.number;
const TICKET_ID = TicketSchema.field.id!.number;
const TICKET_CREATED_AT = TicketSchema.field.createdAt!.number;
const TICKET_ENGINE_INPUT = TicketSchema.field.engineInput!.number;
const TICKET_RULESET_IDS = TicketSchema.field.rulesetIds!.number;
const TICKET_METADATA = TicketSchema.field.metadata!.number;
const SECONDS = TimestampSchema.field.seconds!.number;
const NANOS = TimestampSchema.field.nanos!.number;

/** Every occurrence of length-delimited field `field` in an encoded message, in order (throws when malformed). */
function occurrences(message: Uint8Array, field: number): Uint8Array[] {
  const reader = new BinaryReader(message);
  const found: Uint8Array[] = [];
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number === field && wireType === WireType.LengthDelimited) found.push(reader.bytes());
    else reader.skip(wireType, number);
  }
  return found;
}

/** Where `fieldSpan` found a request's ticket. */
const requestTicket: Span = { start: 0, end: 0 };

/**
 * The ticket field of a binary CreateTicketRequest, if it occurs exactly once: walked for the usual shape
 * (`fieldSpan`, no reader made), read by `occurrences` otherwise.
 */
function ticketField(request: Uint8Array): Uint8Array | undefined {
  const count = fieldSpan(request, 0, request.length, REQUEST_TICKET, requestTicket);
  if (count < 0) return ticketFieldRead(request);
  // Split across occurrences, the decoder merged them: the bytes of one are not the ticket.
  return count === 1 ? request.subarray(requestTicket.start, requestTicket.end) : undefined;
}

function ticketFieldRead(request: Uint8Array): Uint8Array | undefined {
  try {
    const found = occurrences(request, REQUEST_TICKET);
    return found.length === 1 ? found[0] : undefined;
  } catch {
    return undefined; // not reached for a request that decoded; encoding afresh is always right
  }
}

/** Writes the server's fields after the received ticket's bytes when they are not the usual shape (below). */
const serverFields = new BinaryWriter();

/**
 * `ticket` is the decoded ticket with the server's `id` and `createdAt` already set; `request`, when given,
 * is the CreateTicketRequest it was decoded from, as received.
 */
export function acknowledgedTicketBytes(ticket: Ticket, receivedId: string, request?: Uint8Array): Uint8Array {
  const received = request && ticketField(request);
  const createdAt = ticket.createdAt;
  if (!received || !createdAt) return toBinary(TicketSchema, ticket);
  const seconds = Number(createdAt.seconds);
  if (ticket.id === receivedId && seconds >= 0 && seconds < 2 ** 53 && createdAt.nanos >= 0) {
    // The usual shape, written straight into one buffer of the exact length: created_at's tag and length, then
    // its seconds and nanos as plain varints (what writeTimestamp writes for them; zeros written too). Every tag and
    // the length take one byte: fields 1 to 3, and at most 15 bytes.
    const length = 2 + varintSize(seconds) + varintSize(createdAt.nanos);
    const bytes = new Uint8Array(received.length + 2 + length);
    bytes.set(received);
    let at = received.length;
    bytes[at++] = (TICKET_CREATED_AT << 3) | WireType.LengthDelimited;
    bytes[at++] = length;
    bytes[at++] = (SECONDS << 3) | WireType.Varint;
    at = writeVarint(bytes, at, seconds);
    bytes[at++] = (NANOS << 3) | WireType.Varint;
    writeVarint(bytes, at, createdAt.nanos);
    return bytes;
  }
  let appended: Uint8Array;
  try {
    if (ticket.id !== receivedId) serverFields.tag(TICKET_ID, WireType.LengthDelimited).string(ticket.id);
    writeTimestamp(serverFields.tag(TICKET_CREATED_AT, WireType.LengthDelimited).fork(), createdAt).join();
  } finally {
    appended = serverFields.finish(); // also resets the writer when a write threw
  }
  const bytes = new Uint8Array(received.length + appended.length);
  bytes.set(received);
  bytes.set(appended, received.length);
  return bytes;
}

/** A stored ticket's engine_input (undefined when absent; the last occurrence wins, as in decoding), without decoding the rest. */
export function engineInputOf(ticket: Uint8Array): Uint8Array | undefined {
  return occurrences(ticket, TICKET_ENGINE_INPUT).at(-1);
}

/** What the pool reads of a stored ticket, and what a rebuild checks it against (admission.ts ticketFate). */
export interface TicketPoolFields {
  engineInput: Uint8Array | undefined;
  rulesetIds: string[];
  createdAt: Timestamp | undefined;
  metadata: Uint8Array | undefined;
}

/**
 * A stored ticket's engine_input, ruleset_ids, created_at and metadata, as decoding it gives them (the last
 * engine_input or metadata wins, ruleset ids append in order, created_at occurrences merge field by field),
 * without decoding the rest: a replica builds the pool's row of every ticket another replica took from its
 * stored bytes, and the whole decode was a tenth of what applying the log cost it. Stored bytes always
 * decoded once (they were acknowledged); a field met with a wire type its schema does not give falls back to
 * the whole decode.
 */
export function poolFieldsOf(ticket: Uint8Array): TicketPoolFields {
  const reader = new BinaryReader(ticket);
  let engineInput: Uint8Array | undefined;
  const rulesetIds: string[] = [];
  let createdAt: Timestamp | undefined;
  let metadata: Uint8Array | undefined;
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    const delimited = wireType === WireType.LengthDelimited;
    if (number === TICKET_ENGINE_INPUT && delimited) engineInput = reader.bytes();
    else if (number === TICKET_RULESET_IDS && delimited) rulesetIds.push(reader.string());
    else if (number === TICKET_CREATED_AT && delimited) createdAt = mergeTimestamp(createdAt, reader.bytes());
    else if (number === TICKET_METADATA && delimited) metadata = reader.bytes();
    else if (
      number === TICKET_ENGINE_INPUT ||
      number === TICKET_RULESET_IDS ||
      number === TICKET_CREATED_AT ||
      number === TICKET_METADATA
    ) {
      const whole = fromBinary(TicketSchema, ticket);
      return { engineInput: whole.engineInput, rulesetIds: whole.rulesetIds, createdAt: whole.createdAt, metadata: whole.metadata };
    } else reader.skip(wireType, number);
  }
  return { engineInput, rulesetIds, createdAt, metadata };
}

/** What the match history reads of a stored ticket whose pool row a follower never made (queue/pool-rows.ts). */
export interface WaitFields {
  engineInput: Uint8Array | undefined;
  createdAt: Timestamp | undefined;
}

/**
 * A stored ticket's engine_input and created_at as poolFieldsOf gives them, walked straight from the bytes for
 * the usual shape: one pass, no reader, no ruleset id decoded, created_at's seconds and nanos plain varints (not
 * negative, seconds below 2^53). Undefined for anything else (a group, a field of the four with another wire
 * type, a longer varint, a short read), which poolFieldsOf then reads as ever; where this answers, it answers
 * what poolFieldsOf would. Walked, a matched ticket's wait and party size took about 1.0 us a ticket against 2.1 read
 * by poolFieldsOf (bench/RESULTS.md, thirty-first session).
 */
export function waitFieldsOf(ticket: Uint8Array): WaitFields | undefined {
  const end = ticket.length;
  let engineInput: Uint8Array | undefined;
  // created_at's fields as its occurrences merge them; undefined until one occurs.
  let createdAt: { seconds: number; nanos: number } | undefined;
  cursor.at = 0;
  while (cursor.at < end) {
    // A tag is a uint32 (the reader refuses more).
    if (!varint(ticket, end, 5) || cursor.value >= 2 ** 32) return undefined;
    const number = Math.floor(cursor.value / 8);
    const wireType = cursor.value % 8;
    if (number === 0) return undefined;
    const mine =
      number === TICKET_ENGINE_INPUT || number === TICKET_RULESET_IDS || number === TICKET_CREATED_AT || number === TICKET_METADATA;
    if (!mine) {
      if (!skip(ticket, end, wireType)) return undefined;
      continue;
    }
    if (wireType !== WireType.LengthDelimited || !varint(ticket, end, 5)) return undefined;
    const from = cursor.at;
    const to = from + cursor.value;
    if (to > end) return undefined;
    if (number === TICKET_ENGINE_INPUT) engineInput = ticket.subarray(from, to);
    else if (number === TICKET_CREATED_AT) {
      // Occurrences merge field by field: each field's last value wins.
      createdAt ??= { seconds: 0, nanos: 0 };
      while (cursor.at < to) {
        if (!varint(ticket, to, 1)) return undefined;
        const field = cursor.value;
        if (field === SECONDS << 3 && varint(ticket, to, 8) && cursor.value < 2 ** 53) createdAt.seconds = cursor.value;
        else if (field === NANOS << 3 && varint(ticket, to, 5) && cursor.value < 2 ** 31) createdAt.nanos = cursor.value;
        else return undefined;
      }
    }
    cursor.at = to;
  }
  return {
    engineInput,
    createdAt: createdAt && { $typeName: 'google.protobuf.Timestamp', seconds: BigInt(createdAt.seconds), nanos: createdAt.nanos },
  };
}

/** `into` (a new Timestamp when undefined) with the fields set in the encoded Timestamp `bytes` merged in. */
function mergeTimestamp(into: Timestamp | undefined, bytes: Uint8Array): Timestamp {
  const merged = into ?? create(TimestampSchema);
  const reader = new BinaryReader(bytes);
  while (reader.pos < reader.len) {
    const [number, wireType] = reader.tag();
    if (number === SECONDS && wireType === WireType.Varint) merged.seconds = BigInt(reader.int64());
    else if (number === NANOS && wireType === WireType.Varint) merged.nanos = reader.int32();
    else if (number === SECONDS || number === NANOS)
      return mergeFromBinary(TimestampSchema, merged, bytes); // again from the start: each field's last value wins
    else reader.skip(wireType, number);
  }
  return merged;
}

function writeTimestamp(writer: BinaryWriter, t: Timestamp): BinaryWriter {
  return writer.tag(SECONDS, WireType.Varint).int64(t.seconds).tag(NANOS, WireType.Varint).int32(t.nanos);
}
