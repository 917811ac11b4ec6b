// The wire form of a queue's replicated log (proto/matchmaker/replication/v1/log.proto): a log entry is
// either a batch of records (records.ts) with the appending replica and its term, or a term claim.
// Converting is pure and exact: decodeLogEntry(encodeLogEntry(e)) equals e. Each replica applies the
// decoded records with QueueState.apply, so anything the codec cannot convert exactly is refused loudly.
// Encoding a record that cannot be written exactly throws LogEncodeError (a bug in whoever made the record).
// Decoding throws LogDecodeError for anything malformed: the replica must stop, not skip the entry and
// diverge. The records' own conversions are in record-wire.ts.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { clip } from '../../errors.js';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import {
  LogEntrySchema,
  QueueRecordSchema,
  RecordBatchSchema,
  TicketCreateSchema,
  type LogEntry as WireLogEntry,
} from '../../gen/matchmaker/replication/v1/log_pb.js';
import { copy, known, LogDecodeError, LogEncodeError, num, text, ticketIdOf, whole } from './field-checks.js';
import { recordFromWire, recordToWire } from './record-wire.js';
import type { QueueRecord, RecordType } from '../../queue/records.js';

export { LogDecodeError, LogEncodeError } from './field-checks.js';

/** A log entry: records in apply order, or a replica's claim to lead. */
export type LogEntry =
  | {
      kind: 'records';
      /** The replica that appended the entry. */
      replicaId: string;
      /** 0 when it holds only request records; else the appending leader's term, which fences it. */
      term: number;
      records: readonly QueueRecord[];
    }
  | { kind: 'claim'; replicaId: string; incarnation: string };

/** Records only a leader appends: an entry holding one must carry the leader's term (never 0). */
export const LEADER_RECORD_TYPES: ReadonlySet<RecordType> = new Set<RecordType>([
  'match.commit',
  'backfill.fill',
  'tickets.expire',
  'backfills.expire',
  'tickets.evict',
  'backfills.evict',
  'resolved.forget',
  'delivery.advance',
  'delivery.park',
]);

export function encodeLogEntry(entry: LogEntry): Uint8Array {
  const replicaId = text(entry.replicaId, 'replica_id');
  if (replicaId === '') throw new LogEncodeError('replica_id', 'is empty');
  if (entry.kind === 'claim') {
    const incarnation = text(entry.incarnation, 'claim.incarnation');
    if (incarnation === '') throw new LogEncodeError('claim.incarnation', 'is empty');
    return toBinary(LogEntrySchema, create(LogEntrySchema, { replicaId, body: { case: 'claim', value: { incarnation } } }));
  }
  const term = whole(entry.term, 'term', 0);
  const records = entry.records.map((rec, i) => {
    if (term === 0n && LEADER_RECORD_TYPES.has(rec.type)) throw new LogEncodeError('term', `is 0 but records[${i}] is ${rec.type}`);
    return create(QueueRecordSchema, { record: recordToWire(rec, `records[${i}]`) });
  });
  return toBinary(LogEntrySchema, create(LogEntrySchema, { replicaId, term, body: { case: 'records', value: { records } } }));
}

/**
 * How a decoded entry's ticket bytes are held: `ticket`, each in a copy of its own (a ticket that waits
 * long pins nothing else); `entry`, views of one copy of the entry's records (one allocation for the
 * entry, not one per ticket: a replay's choice, replicated-history.ts says why).
 */
export type TicketCopies = 'ticket' | 'entry';

export function decodeLogEntry(bytes: Uint8Array, copies: TicketCopies = 'ticket'): LogEntry {
  return ticketCreates(bytes, copies) ?? decodeWhole(bytes);
}

const LOG_REPLICA_ID = LogEntrySchema.field.replicaId!.number;
const LOG_RECORDS = LogEntrySchema.field.records!.number;
const BATCH_RECORDS = RecordBatchSchema.field.records!.number;
const RECORD_TICKET_CREATE = QueueRecordSchema.field.ticketCreate!.number;
const CREATE_TICKET = TicketCreateSchema.field.ticket!.number;

/**
 * The entry most of a busy log holds, read without the generic decoder: term 0 and only ticket_create
 * records, each field once, nothing else. It gives what decodeWhole gives for such an entry, and undefined
 * for any other shape or anything it cannot read, which decodeWhole then decodes (or refuses) as always.
 * Decoding the messages of every record was about a seventh of what applying the log cost a follower.
 */
export function ticketCreates(bytes: Uint8Array, copies: TicketCopies = 'ticket'): LogEntry | undefined {
  try {
    const entry = new BinaryReader(bytes);
    let replicaId: string | undefined;
    let batch: Uint8Array | undefined;
    while (entry.pos < entry.len) {
      const [number, wireType] = entry.tag();
      if (wireType !== WireType.LengthDelimited) return undefined;
      if (number === LOG_REPLICA_ID && replicaId === undefined) replicaId = entry.string(true);
      else if (number === LOG_RECORDS && batch === undefined) batch = entry.bytes();
      else return undefined;
    }
    if (!replicaId || !batch) return undefined;
    if (copies === 'entry') batch = copy(batch);
    const records: QueueRecord[] = [];
    const reader = new BinaryReader(batch);
    while (reader.pos < reader.len) {
      // records[i] holds ticket_create alone, which holds ticket alone: each a length-delimited field whose
      // bytes end where the one around it ends.
      const record = delimited(reader, BATCH_RECORDS);
      const create = delimited(reader, RECORD_TICKET_CREATE);
      const ticketEnd = delimited(reader, CREATE_TICKET);
      if (ticketEnd !== create || create !== record || ticketEnd === undefined) return undefined;
      const view = batch.subarray(reader.pos, ticketEnd);
      const ticket = copies === 'entry' ? view : copy(view);
      reader.pos = ticketEnd;
      records.push({ type: 'ticket.create', ticketId: ticketIdOf(ticket, (problem) => new Error(problem)), ticket });
    }
    return records.length > 0 ? { kind: 'records', replicaId, term: 0, records } : undefined;
  } catch {
    return undefined;
  }
}

/** Reads the tag and length of length-delimited field `number`: where its bytes end (undefined: another field). */
function delimited(reader: BinaryReader, number: number): number | undefined {
  const [found, wireType] = reader.tag();
  if (found !== number || wireType !== WireType.LengthDelimited) return undefined;
  const end = reader.uint32() + reader.pos;
  return end <= reader.len ? end : undefined;
}

/** Any entry, through the generic decoder, with every check. */
export function decodeWhole(bytes: Uint8Array): LogEntry {
  let wire: WireLogEntry;
  try {
    wire = fromBinary(LogEntrySchema, bytes);
  } catch (err) {
    throw new LogDecodeError('entry', `is not a LogEntry (${clip(String((err as Error).message))})`, { cause: err });
  }
  known(wire, 'entry');
  const replicaId = wire.replicaId;
  if (replicaId === '') throw new LogDecodeError('replica_id', 'is missing');
  const term = num(wire.term, 'term', 0n);
  const { body } = wire;
  if (body.case === 'claim') {
    known(body.value, 'claim');
    if (term !== 0) throw new LogDecodeError('term', `is ${term} on a claim (a claim carries none)`);
    if (body.value.incarnation === '') throw new LogDecodeError('claim.incarnation', 'is missing');
    return { kind: 'claim', replicaId, incarnation: body.value.incarnation };
  }
  if (body.case !== 'records') throw new LogDecodeError('body', 'is missing (neither records nor claim)');
  known(body.value, 'records');
  const records = body.value.records.map((wireRec, i) => {
    const rec = recordFromWire(wireRec, `records[${i}]`);
    if (term === 0 && LEADER_RECORD_TYPES.has(rec.type)) throw new LogDecodeError('term', `is 0 but records[${i}] is ${rec.type}`);
    return rec;
  });
  return { kind: 'records', replicaId, term, records };
}
