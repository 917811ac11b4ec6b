// The embedded store's binary records for tickets, kept apart from the store so their layout is in one
// place. A ticket record never changes after it is written: a resolution (match id, time) is a record of
// its own under the same key, so resolving a ticket writes a few bytes, not the ticket again.
//
//   ticket record:     u8 format (1) | u8 id length | id (latin1) | binary matchmaker.core.v1.Ticket
//   resolution record: f64 LE resolved_at_ms | match id (latin1)

const TICKET_FORMAT = 1;

export function encodeTicketRecord(ticketId: string, ticket: Uint8Array): Buffer {
  const record = Buffer.allocUnsafe(2 + ticketId.length + ticket.length);
  record[0] = TICKET_FORMAT;
  record[1] = ticketId.length;
  record.write(ticketId, 2, 'latin1');
  record.set(ticket, 2 + ticketId.length);
  return record;
}

export function decodeTicketRecord(record: Uint8Array): { ticketId: string; ticket: Uint8Array } {
  const ticket = ticketOfRecord(record, record.byteLength);
  const view = Buffer.from(record.buffer, record.byteOffset, record.byteLength);
  return { ticketId: view.toString('latin1', 2, 2 + record[1]!), ticket };
}

/** The ticket's bytes in the first `size` bytes of `record` (a view, not a copy). */
export function ticketOfRecord(record: Uint8Array, size: number): Uint8Array {
  if (record[0] !== TICKET_FORMAT) throw new Error(`ticket record has format ${record[0]}; this version reads format ${TICKET_FORMAT}`);
  return record.subarray(2 + record[1]!, size);
}

export function encodeResolution(matchId: string, resolvedAtMs: number): Buffer {
  const record = Buffer.allocUnsafe(8 + matchId.length);
  record.writeDoubleLE(resolvedAtMs, 0);
  record.write(matchId, 8, 'latin1');
  return record;
}

export function decodeResolution(record: Uint8Array): { matchId: string; resolvedAtMs: number } {
  const view = Buffer.from(record.buffer, record.byteOffset, record.byteLength);
  return { resolvedAtMs: view.readDoubleLE(0), matchId: view.toString('latin1', 8) };
}
