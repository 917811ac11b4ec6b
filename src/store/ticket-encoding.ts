// The bytes a ticket is stored and delivered as: the Ticket as acknowledged (lowercased id, the server's
// created_at). Encoding it again from the decoded message is one of the dearest steps of CreateTicket, so
// when the request arrived in binary (gRPC) the ticket's own bytes are taken from it and the server's
// fields are appended: protobuf decoding keeps the last value of a scalar field and merges a message
// field, so the appended id and created_at (both Timestamp fields written, zeros included) win over
// whatever the caller sent. Decoding the result gives the same message as encoding it afresh.
import { toBinary } from '@bufbuild/protobuf';
import { TimestampSchema, type Timestamp } from '@bufbuild/protobuf/wkt';
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { TicketSchema, type Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import { CreateTicketRequestSchema } from '../gen/matchmaker/core/v1/service_pb.js';

const REQUEST_TICKET = CreateTicketRequestSchema.field.ticket!.number;
const TICKET_ID = TicketSchema.field.id!.number;
const TICKET_CREATED_AT = TicketSchema.field.createdAt!.number;
const TICKET_ENGINE_INPUT = TicketSchema.field.engineInput!.number;
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

/** The ticket field of a binary CreateTicketRequest, if it occurs exactly once. */
function ticketField(request: Uint8Array): Uint8Array | undefined {
  try {
    const found = occurrences(request, REQUEST_TICKET);
    // Split across occurrences, the decoder merged them: the bytes of one are not the ticket.
    return found.length === 1 ? found[0] : undefined;
  } catch {
    return undefined; // not reached for a request that decoded; encoding afresh is always right
  }
}

/**
 * `ticket` is the decoded ticket with the server's `id` and `createdAt` already set; `request`, when given,
 * is the CreateTicketRequest it was decoded from, as received.
 */
export function acknowledgedTicketBytes(ticket: Ticket, receivedId: string, request?: Uint8Array): Uint8Array {
  const received = request && ticketField(request);
  if (!received || !ticket.createdAt) return toBinary(TicketSchema, ticket);
  const writer = new BinaryWriter().raw(received);
  if (ticket.id !== receivedId) writer.tag(TICKET_ID, WireType.LengthDelimited).string(ticket.id);
  writeTimestamp(writer.tag(TICKET_CREATED_AT, WireType.LengthDelimited).fork(), ticket.createdAt).join();
  return writer.finish();
}

/** A stored ticket's engine_input (undefined when absent; the last occurrence wins, as in decoding), without decoding the rest. */
export function engineInputOf(ticket: Uint8Array): Uint8Array | undefined {
  return occurrences(ticket, TICKET_ENGINE_INPUT).at(-1);
}

function writeTimestamp(writer: BinaryWriter, t: Timestamp): BinaryWriter {
  return writer.tag(SECONDS, WireType.Varint).int64(t.seconds).tag(NANOS, WireType.Varint).int32(t.nanos);
}
