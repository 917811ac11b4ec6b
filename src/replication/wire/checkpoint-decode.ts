// Decoding a checkpoint (checkpoint-codec.ts has its form, its errors and its encoding): every field checked
// and named on error, the tickets a slice at a time, and the active ones read straight from their bytes where
// they have the encoder's shape (wire-walk.ts).
import { fromBinary, type Message } from '@bufbuild/protobuf';
import type { GenMessage } from '@bufbuild/protobuf/codegenv2';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import { IdMap } from '../../engine/id-map.js';
import { clip, quote } from '../../errors.js';
import { OutcomeSchema } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import {
  ActiveTicketSchema,
  QueueCheckpointSchema,
  QueueStateSnapshotSchema,
  ResolvedTicketSchema,
  type QueueCheckpoint as WireCheckpoint,
  type QueueStateSnapshot,
} from '../../gen/matchmaker/replication/v1/checkpoint_pb.js';
import type { OutboxSnapshot } from '../../store/store.js';
import type { SnapshotBackfill, SnapshotResolvedTicket } from '../../queue/queue-snapshot.js';
import { type Checkpoint, CheckpointDecodeError, joined, MAX, STATE_FIELD } from './checkpoint-codec.js';
import { CheckpointTickets } from './checkpoint-tickets.js';
import { copy, known as knownFields, ticketIdOf } from './field-checks.js';
import { activeTicketAt, latin1Slice, ticketIdSpan, walkFields, type ActiveTicketParts, type Span } from './wire-walk.js';

/** Decodes a checkpoint at once; with `queueId`, also refuses one of another queue. */
export function decodeCheckpoint(bytes: Uint8Array, queueId?: string): Checkpoint {
  const parts = checkpointFromParts(bytes, queueId, Number.POSITIVE_INFINITY);
  let next = parts.next();
  while (!next.done) next = parts.next();
  return next.value;
}

/**
 * Decodes a checkpoint a slice of tickets at a time, letting the event loop run between slices (a
 * million tickets take seconds), with the same checks and result as decodeCheckpoint.
 */
export async function decodeCheckpointInSlices(bytes: Uint8Array, queueId?: string, sliceSize = 5_000): Promise<Checkpoint> {
  const parts = checkpointFromParts(bytes, queueId, sliceSize);
  let next = parts.next();
  while (!next.done) {
    await new Promise((resolve) => setImmediate(resolve));
    next = parts.next();
  }
  return next.value;
}

/**
 * A message's bytes, split: the fields named in `apart` (each occurrence's payload as its start and end
 * offsets in the bytes, one after the other: a million views of small messages were garbage to collect),
 * and all others.
 */
interface Split {
  rest: Uint8Array;
  apart: Map<number, number[]>;
}

/**
 * Walks one message's fields without decoding them, setting the length-delimited fields `apart` aside. The
 * rest is decoded by its schema (unknown fields, presence and types checked as ever), the fields set apart
 * element by element. Throws on bytes that are not protobuf.
 */
function splitFields(bytes: Uint8Array, apart: readonly number[]): Split {
  // The usual shape is walked without a reader (a million ActiveTickets each made a tag's array in it).
  let found = new Map<number, number[]>(apart.map((no) => [no, []]));
  let restSpans: number[] = [];
  if (!walkFields(bytes, found, restSpans)) ({ apart: found, rest: restSpans } = fieldSpansByReader(bytes, apart));
  const rest: Uint8Array[] = [];
  for (let i = 0; i < restSpans.length; i += 2) rest.push(bytes.subarray(restSpans[i]!, restSpans[i + 1]!));
  return { rest: joined(rest), apart: found };
}

/**
 * What walkFields finds, read by the full reader: the payload offsets of the length-delimited fields
 * numbered in `apart`, and every other field's own. Throws on bytes that are not protobuf.
 */
export function fieldSpansByReader(bytes: Uint8Array, apart: readonly number[]): { apart: Map<number, number[]>; rest: number[] } {
  const reader = new BinaryReader(bytes);
  const found = new Map<number, number[]>(apart.map((no) => [no, []]));
  const rest: number[] = [];
  while (reader.pos < reader.len) {
    const start = reader.pos;
    const [fieldNo, wireType] = reader.tag();
    const spans = found.get(fieldNo);
    if (spans && wireType === WireType.LengthDelimited) {
      const length = reader.uint32();
      spans.push(reader.pos, reader.pos + length);
      reader.pos += length;
      if (reader.pos > reader.len) throw new RangeError(`premature EOF in field ${fieldNo}`);
    } else {
      reader.skip(wireType, fieldNo);
      rest.push(start, reader.pos);
    }
  }
  return { apart: found, rest };
}

/** The payloads `spans` names (splitFields), as views of `bytes`. */
function payloads(bytes: Uint8Array, spans: readonly number[]): Uint8Array[] {
  const views: Uint8Array[] = [];
  for (let i = 0; i < spans.length; i += 2) views.push(bytes.subarray(spans[i]!, spans[i + 1]!));
  return views;
}

/** Whether an active ticket holds `position` (the active tickets' positions ascend). */
function heldByActive(positions: Float64Array, position: number): boolean {
  let lo = 0;
  let hi = positions.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (positions[mid]! < position) lo = mid + 1;
    else hi = mid;
  }
  return lo < positions.length && positions[lo]! === position;
}

/** Several occurrences of one embedded message field merge, as their concatenation decodes. */
function concat(parts: readonly Uint8Array[]): Uint8Array | undefined {
  return parts.length <= 1 ? parts[0] : joined(parts);
}

const ACTIVE_FIELD = QueueStateSnapshotSchema.field.active!.number;
const RESOLVED_FIELD = QueueStateSnapshotSchema.field.resolved!.number;

/**
 * The checkpoint, decoded in parts: the envelope and the state's small fields by their schemas, then the
 * tickets one slice at a time (pausing after each).
 */
function* checkpointFromParts(bytes: Uint8Array, queueId: string | undefined, sliceSize: number): Generator<void, Checkpoint> {
  const notCheckpoint = (err: unknown) =>
    new CheckpointDecodeError('checkpoint', `is not a QueueCheckpoint (${clip(String((err as Error).message))})`, { cause: err });
  let wire: WireCheckpoint;
  let stateBytes: Uint8Array | undefined;
  let split: Split;
  try {
    const envelope = splitFields(bytes, [STATE_FIELD]);
    wire = fromBinary(QueueCheckpointSchema, envelope.rest);
    stateBytes = concat(payloads(bytes, envelope.apart.get(STATE_FIELD)!));
    split = splitFields(stateBytes ?? new Uint8Array(0), [ACTIVE_FIELD, RESOLVED_FIELD]);
  } catch (err) {
    throw notCheckpoint(err);
  }
  known(wire, 'checkpoint');
  const id = present(wire.queueId, 'queue_id');
  if (id === '') throw new CheckpointDecodeError('queue_id', 'is empty');
  if (queueId !== undefined && id !== queueId) throw new CheckpointDecodeError('queue_id', `is ${quote(id)}, not ${quote(queueId)}`);
  const appliedSeq = num(wire.appliedSeq, 'applied_seq', 0n);
  const term = num(wire.term, 'term', 0n);
  if (term > appliedSeq) throw new CheckpointDecodeError('term', `${term} is after applied_seq ${appliedSeq}`);
  const outbox = outboxFromWire(present(wire.outbox, 'outbox'), id);
  present(stateBytes, 'state');
  let s: QueueStateSnapshot;
  try {
    s = fromBinary(QueueStateSnapshotSchema, split.rest);
  } catch (err) {
    throw notCheckpoint(err);
  }
  known(s, 'state');
  const element = <T extends Message>(schema: GenMessage<T>, raw: Uint8Array): T => {
    try {
      return fromBinary(schema, raw);
    } catch (err) {
      throw notCheckpoint(err);
    }
  };
  const nextPosition = num(s.nextPosition, 'state.next_position', 1n);
  const nextBackfillVersion = num(s.nextBackfillVersion, 'state.next_backfill_version', 1n);

  // IdMaps, not Sets: a Set of a million ids rehashes all of them at once each time it grows, and holds a
  // million strings for the collector to mark (id-map.ts). The active tickets' map (id -> position) is the
  // one the restored state keeps (QueueSnapshotData.activeIds), so it is built once.
  const activeIds = new IdMap();
  const activeSpans = split.apart.get(ACTIVE_FIELD)!;
  const activeCount = activeSpans.length / 2;
  activeIds.reserve(activeCount);
  const resolvedIds = new IdMap();
  /** A ticket's checks past its fields' own; its path, `pathOf(i)`, is made only for an error (a million tickets). */
  const admit = (ticketId: string, position: number, ids: IdMap, i: number, pathOf: (i: number) => string): void => {
    admitPosition(position, i, pathOf);
    const idsBefore = ids.size;
    if (ids.set(ticketId, position).size === idsBefore || (ids === resolvedIds && activeIds.has(ticketId)))
      throw heldAgain(ticketId, i, pathOf);
  };
  const admitPosition = (position: number, i: number, pathOf: (i: number) => string) => {
    if (position >= nextPosition)
      throw new CheckpointDecodeError(`${pathOf(i)}.position`, `${position} is not below next_position ${nextPosition}`);
  };
  const heldAgain = (ticketId: string, i: number, pathOf: (i: number) => string) =>
    new CheckpointDecodeError(`${pathOf(i)}.ticket`, `holds ticket id ${quote(ticketId)} a second time`);
  const idFailure = (path: string) => (problem: string, cause?: unknown) => new CheckpointDecodeError(`${path}.ticket`, problem, { cause });
  /** A ticket read by its schema: its bytes and position, checked. */
  const ticket = (t: { ticket?: Uint8Array; position?: bigint } & Message, ids: IdMap, i: number, pathOf: (i: number) => string) => {
    const path = pathOf(i);
    known(t, path);
    // A view, not a copy: a million small copies cost more than the whole decode, and the restored tickets
    // keep the checkpoint's buffer alive only until the last of them leaves the queue.
    const bytes = present(t.ticket, `${path}.ticket`);
    const position = num(t.position, `${path}.position`, 1n);
    const ticketId = ticketIdOf(bytes, idFailure(path));
    admit(ticketId, position, ids, i, pathOf);
    return { ticketId, position, ticket: bytes };
  };
  const heldTwice = (path: string, position: number) =>
    new CheckpointDecodeError(`${path}.position`, `${position} is held by another ticket`);

  // The active tickets come in arrival order, so a position held twice among them is the one before. They
  // are kept as columns (checkpoint-tickets.ts): offsets into the state's bytes, not a view each.
  let last = 0;
  const positions = new Float64Array(activeCount);
  // Doubles, not 32-bit offsets: a state's bytes may reach 4 GiB.
  const spans = new Float64Array(2 * activeCount);
  const unusual = new Map<number, Uint8Array>();
  const parts: ActiveTicketParts = { ticketStart: 0, ticketEnd: 0, position: 0 };
  const idSpan: Span = { start: 0, end: 0 };
  const activePath = (i: number) => `state.active[${i}]`;
  for (let i = 0; i < activeCount; i++) {
    const [start, end] = [activeSpans[2 * i]!, activeSpans[2 * i + 1]!];
    let position: number;
    // The encoder's shape read straight from the bytes (wire-walk.ts), anything else by the schema.
    if (activeTicketAt(stateBytes!, start, end, parts)) {
      position = parts.position;
      if (ticketIdSpan(stateBytes!, parts.ticketStart, parts.ticketEnd, idSpan)) {
        // The id goes into the map from its bytes; a string of it is made only to name it in an error.
        admitPosition(position, i, activePath);
        const idsBefore = activeIds.size;
        if (activeIds.setAscii(stateBytes!, idSpan.start, idSpan.end, position).size === idsBefore)
          throw heldAgain(latin1Slice.call(stateBytes!, idSpan.start, idSpan.end), i, activePath);
      } else {
        // Not the usual shape, which ticketIdSpan just walked: the full reader decides.
        const ticketBytes = stateBytes!.subarray(parts.ticketStart, parts.ticketEnd);
        admit(ticketIdOf(ticketBytes, idFailure(activePath(i))), position, activeIds, i, activePath);
      }
      spans[2 * i] = parts.ticketStart;
      spans[2 * i + 1] = parts.ticketEnd;
    } else {
      const read = ticket(element(ActiveTicketSchema, stateBytes!.subarray(start, end)), activeIds, i, activePath);
      position = read.position;
      unusual.set(i, read.ticket);
    }
    if (position === last) throw heldTwice(activePath(i), position);
    if (position < last) throw new CheckpointDecodeError(`${activePath(i)}.position`, `${position} is out of arrival order`);
    last = position;
    positions[i] = position;
    if ((i + 1) % sliceSize === 0) yield;
  }
  const active = new CheckpointTickets(stateBytes!, positions, spans, unusual);
  const resolvedPositions = new Set<number>();
  const resolved: SnapshotResolvedTicket[] = [];
  const resolvedPath = (i: number) => `state.resolved[${i}]`;
  for (const [i, raw] of payloads(stateBytes!, split.apart.get(RESOLVED_FIELD)!).entries()) {
    const p = resolvedPath(i);
    const t = element(ResolvedTicketSchema, raw);
    const at = ticket(t, resolvedIds, i, resolvedPath);
    if (resolvedPositions.has(at.position) || heldByActive(positions, at.position)) throw heldTwice(p, at.position);
    resolvedPositions.add(at.position);
    resolved.push({ ...at, matchId: present(t.matchId, `${p}.match_id`), resolvedAtMs: num(t.resolvedAtMs, `${p}.resolved_at_ms`) });
    if ((i + 1) % sliceSize === 0) yield;
  }
  const backfillIds = new Set<string>();
  const matches = new Set<string>();
  const backfills = s.backfills.map((b, i): SnapshotBackfill => {
    const p = `state.backfills[${i}]`;
    known(b, p);
    const request = present(b.request, `${p}.request`);
    if (request.id === '') throw new CheckpointDecodeError(`${p}.request.id`, 'is empty');
    if (backfillIds.has(request.id)) throw new CheckpointDecodeError(`${p}.request.id`, `${quote(request.id)} is open twice`);
    if (matches.has(request.matchId)) {
      throw new CheckpointDecodeError(`${p}.request.match_id`, `${quote(request.matchId)} has another open request`);
    }
    backfillIds.add(request.id);
    matches.add(request.matchId);
    const version = num(b.version, `${p}.version`, 1n);
    if (version >= nextBackfillVersion) {
      throw new CheckpointDecodeError(`${p}.version`, `${version} is not below next_backfill_version ${nextBackfillVersion}`);
    }
    return { request, version };
  });
  return { queueId: id, appliedSeq, term, outbox, state: { active, activeIds, resolved, backfills, nextBackfillVersion, nextPosition } };
}

function outboxFromWire(o: NonNullable<WireCheckpoint['outbox']>, queueId: string): OutboxSnapshot {
  known(o, 'outbox');
  const nextSequence = seqOf(o.nextProducerSequence, 'outbox.next_producer_sequence', 1n);
  const deliveryCursor = seqOf(o.deliveryCursor, 'outbox.delivery_cursor');
  if (deliveryCursor >= nextSequence) {
    throw new CheckpointDecodeError('outbox.delivery_cursor', `${deliveryCursor} is not below next_producer_sequence ${nextSequence}`);
  }
  let parked: OutboxSnapshot['parked'];
  if (o.parked !== undefined) {
    known(o.parked, 'outbox.parked');
    parked = {
      sequence: seqOf(o.parked.sequence, 'outbox.parked.sequence'),
      attempts: num(o.parked.attempts, 'outbox.parked.attempts', 0n),
      lastError: present(o.parked.lastError, 'outbox.parked.last_error'),
      parkedAtMs: num(o.parked.parkedAtMs, 'outbox.parked.parked_at_ms', 0n),
    };
  }
  const names = new Set<string>();
  const consumers = o.consumers.map((c, i) => {
    const p = `outbox.consumers[${i}]`;
    known(c, p);
    const consumer = present(c.consumer, `${p}.consumer`);
    if (names.has(consumer)) throw new CheckpointDecodeError(`${p}.consumer`, `${quote(consumer)} is named twice`);
    names.add(consumer);
    const sequence = seqOf(c.sequence, `${p}.sequence`);
    return c.owner === undefined ? { consumer, sequence } : { consumer, sequence, owner: c.owner };
  });
  let last = deliveryCursor;
  const outcomes = o.outcomes.map((r, i) => {
    const p = `outbox.outcomes[${i}]`;
    known(r, p);
    const sequence = seqOf(r.sequence, `${p}.sequence`, 1n);
    if (sequence <= last)
      throw new CheckpointDecodeError(`${p}.sequence`, `${sequence} is not above ${last} (the cursor or the one before)`);
    if (sequence >= nextSequence) {
      throw new CheckpointDecodeError(`${p}.sequence`, `${sequence} is not below next_producer_sequence ${nextSequence}`);
    }
    last = sequence;
    const bytes = copy(present(r.outcome, `${p}.outcome`));
    let outcome: ReturnType<typeof fromBinary<typeof OutcomeSchema>>;
    try {
      outcome = fromBinary(OutcomeSchema, bytes);
    } catch (err) {
      throw new CheckpointDecodeError(`${p}.outcome`, `is not an Outcome (${clip(String((err as Error).message))})`, { cause: err });
    }
    if (outcome.producerSequence !== sequence) {
      throw new CheckpointDecodeError(`${p}.outcome`, `carries producer_sequence ${outcome.producerSequence}, not ${sequence}`);
    }
    if (outcome.queueId !== queueId) throw new CheckpointDecodeError(`${p}.outcome`, `is of queue ${quote(outcome.queueId)}`);
    return { sequence, bytes };
  });
  return { nextSequence, deliveryCursor, parked, consumers, outcomes };
}

/** A present int64 within `min`..2^53-1, as a bigint (outcome sequences are bigints throughout). */
function seqOf(value: bigint | undefined, path: string, min = 0n): bigint {
  const v = present(value, path);
  if (v < min || v > MAX) throw new CheckpointDecodeError(path, `${v} is out of range (${min}..2^53-1)`);
  return v;
}

function present<T>(value: T | undefined, path: string): T {
  if (value === undefined) throw new CheckpointDecodeError(path, 'is missing');
  return value;
}

/** A present int64 within `min`..2^53-1, as a number. */
function num(value: bigint | undefined, path: string, min = -MAX): number {
  const v = present(value, path);
  if (v < min || v > MAX) throw new CheckpointDecodeError(path, `${v} is out of range (${min}..2^53-1)`);
  return Number(v);
}

/** Refuses fields this build does not know: a state restored without them could diverge. */
const known = (msg: Message, path: string) => knownFields(msg, path, (at, problem) => new CheckpointDecodeError(at, problem));
