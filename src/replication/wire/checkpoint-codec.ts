// The wire form of a queue's checkpoint (proto/matchmaker/replication/v1/checkpoint.proto): a snapshot of
// its state (queue-snapshot.ts) with the log position it was taken at and the term then, and its encoding
// (its decoding is checkpoint-decode.ts). Converting is pure and exact: decodeCheckpoint(encodeCheckpoint(c))
// equals c. A replica restores the decoded state and
// applies the log after it, so, as with the log (record-codec.ts), anything that cannot be converted
// exactly is refused loudly: encoding throws CheckpointEncodeError (a bug in whoever made the snapshot),
// decoding throws CheckpointDecodeError naming the field (the caller falls back to an older checkpoint or
// to the log's start). Besides each field, the decoder checks what the state relies on: no ticket id or
// position twice, positions below next_position, backfill versions below next_backfill_version, one open
// request per match. The outbox (the replica's local store's: store.ts OutboxSnapshot) is checked likewise:
// outcomes ascending, above the delivery cursor and below the next sequence, each an Outcome of the queue
// carrying its own sequence, each consumer named once.
import { create, type MessageInitShape, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { quote } from '../../errors.js';
import { ActiveTicketSchema, QueueCheckpointSchema, QueueStateSnapshotSchema } from '../../gen/matchmaker/replication/v1/checkpoint_pb.js';
import type { OutboxSnapshot } from '../../store/store.js';
import type { QueueSnapshotData, SnapshotTicket } from '../../queue/queue-snapshot.js';
import { ticketIdOf } from './field-checks.js';
import { holdsAsciiTicketId } from './wire-walk.js';

/** A queue's state at a log position. */
export interface Checkpoint {
  queueId: string;
  /** The log position of the last entry applied into `state`. */
  appliedSeq: number;
  /** The term at `appliedSeq`: the position of the last claim applied (0 before any). */
  term: number;
  /** The queue's outbox at `appliedSeq`. */
  outbox: OutboxSnapshot;
  state: QueueSnapshotData;
}

/** A checkpoint that is not what checkpoint.proto says. `field` is its path in the checkpoint. */
export class CheckpointDecodeError extends Error {
  constructor(
    readonly field: string,
    problem: string,
    options: { cause?: unknown } = {},
  ) {
    super(`corrupt checkpoint: ${field} ${problem}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CheckpointDecodeError';
  }
}

/** A snapshot that cannot be written exactly: the caller made it wrong. */
export class CheckpointEncodeError extends Error {
  constructor(
    readonly field: string,
    problem: string,
  ) {
    super(`cannot encode checkpoint: ${field} ${problem}`);
    this.name = 'CheckpointEncodeError';
  }
}

// ---- encode -----------------------------------------------------------------------------------------------

/** Encodes a checkpoint at once (tests, small queues); encodeCheckpointInSlices gives the same bytes. */
export function encodeCheckpoint(checkpoint: Checkpoint): Uint8Array {
  const parts = checkpointParts(checkpoint, Number.POSITIVE_INFINITY);
  let next = parts.next();
  while (!next.done) next = parts.next();
  return next.value;
}

/**
 * Encodes a checkpoint a slice of tickets at a time, letting the event loop run between slices: a pool of
 * a million tickets takes seconds to encode, which must not hold up the log reader or other queues.
 */
export async function encodeCheckpointInSlices(checkpoint: Checkpoint, sliceSize = 5_000): Promise<Uint8Array> {
  const parts = checkpointParts(checkpoint, sliceSize);
  let next = parts.next();
  while (!next.done) {
    await new Promise((resolve) => setImmediate(resolve));
    next = parts.next();
  }
  return next.value;
}

/**
 * The checkpoint's bytes, built in parts (pausing after each slice of tickets). A message's encoding is its
 * fields' encodings in field-number order, and a repeated field's is its elements' one after another, so
 * the state encoded in pieces and concatenated is byte for byte what encoding it whole gives; the state is
 * the envelope's last field (15), written after the others with its length. The active tickets, nearly all of
 * a large checkpoint, are written straight into the checkpoint's buffer (ActiveTicketWriter); the rest is small
 * and goes through the generated schemas.
 */
function* checkpointParts(checkpoint: Checkpoint, sliceSize: number): Generator<void, Uint8Array> {
  const { state } = checkpoint;
  const queueId = text(checkpoint.queueId, 'queue_id');
  if (queueId === '') throw new CheckpointEncodeError('queue_id', 'is empty');
  const envelope = toBinary(
    QueueCheckpointSchema,
    create(QueueCheckpointSchema, {
      queueId,
      appliedSeq: whole(checkpoint.appliedSeq, 'applied_seq', 0),
      term: whole(checkpoint.term, 'term', 0),
      outbox: outboxToWire(checkpoint.outbox),
    }),
  );
  const stateBytes = (init: MessageInitShape<typeof QueueStateSnapshotSchema>) =>
    toBinary(QueueStateSnapshotSchema, create(QueueStateSnapshotSchema, init));
  const ticket = (t: SnapshotTicket, path: string) => {
    checkTicketId(t.ticket, t.ticketId, path);
    return { ticket: t.ticket, position: whole(t.position, `${path}.position`, 1) };
  };
  const first = stateBytes({
    nextPosition: whole(state.nextPosition, 'state.next_position', 1),
    nextBackfillVersion: whole(state.nextBackfillVersion, 'state.next_backfill_version', 1),
  });
  const { active } = state;
  // Sized first (in slices too: each ticket of a restored run is a view made on request), then written.
  let activeLength = 0;
  for (let at = 0; at < active.length; at += sliceSize) {
    activeLength += ActiveTicketWriter.length(active, at, Math.min(active.length, at + sliceSize));
    yield;
  }
  const parts: Uint8Array[] = [];
  for (let at = 0; at < state.resolved.length; at += sliceSize) {
    const slice = state.resolved.slice(at, at + sliceSize);
    const resolved = slice.map((t, i) => {
      const p = `state.resolved[${at + i}]`;
      return { ...ticket(t, p), matchId: text(t.matchId, `${p}.match_id`), resolvedAtMs: whole(t.resolvedAtMs, `${p}.resolved_at_ms`) };
    });
    parts.push(stateBytes({ resolved }));
    yield;
  }
  parts.push(
    stateBytes({
      backfills: state.backfills.map((b, i) => ({ request: b.request, version: whole(b.version, `state.backfills[${i}].version`, 1) })),
    }),
  );
  const stateLength = first.length + activeLength + parts.reduce((n, part) => n + part.length, 0);
  const head = new BinaryWriter().raw(envelope).tag(STATE_FIELD, WireType.LengthDelimited).uint32(stateLength).finish();
  const out = new Uint8Array(head.length + stateLength);
  out.set(head);
  out.set(first, head.length);
  const writer = new ActiveTicketWriter(out, head.length + first.length);
  for (let at = 0; at < active.length; at += sliceSize) {
    for (let i = at; i < Math.min(active.length, at + sliceSize); i++) {
      const bytes = active.ticket(i);
      checkTicketId(bytes, active.ticketId(i), `state.active[${i}]`);
      writer.write(bytes, active.position(i));
    }
    yield;
  }
  let at = writer.at;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  if (at !== out.length)
    throw new CheckpointEncodeError('state.active', `changed while it was encoded (${at} of ${out.length} bytes written)`);
  return out;
}

/**
 * Throws unless the Ticket in `bytes` holds `ticketId`. The usual shape is compared in place: a million id strings
 * made and dropped for a checkpoint cost the leader collections; the full reader decides anything else.
 */
function checkTicketId(bytes: Uint8Array, ticketId: string, path: string): void {
  if (holdsAsciiTicketId(bytes, ticketId) === true) return;
  const id = ticketIdOf(bytes, (problem) => new CheckpointEncodeError(`${path}.ticket`, problem));
  if (id !== ticketId) throw new CheckpointEncodeError(`${path}.ticket`, `holds ticket id ${quote(id)}, not ${quote(ticketId)}`);
}

const ACTIVE_FIELD = QueueStateSnapshotSchema.field.active!.number;
const ACTIVE_TICKET_FIELD = ActiveTicketSchema.field.ticket!.number;
const ACTIVE_POSITION_FIELD = ActiveTicketSchema.field.position!.number;
/** Each field's tag: its number and wire type, as one byte (the numbers are below 16). */
const ACTIVE_TAG = (ACTIVE_FIELD << 3) | WireType.LengthDelimited;
const TICKET_TAG = (ACTIVE_TICKET_FIELD << 3) | WireType.LengthDelimited;
const POSITION_TAG = (ACTIVE_POSITION_FIELD << 3) | WireType.Varint;

/** The bytes of a varint of `value` (a whole number, 0 to 2^53 - 1). */
function varintLength(value: number): number {
  let n = 1;
  for (let v = value; v >= 128; v = Math.floor(v / 128)) n++;
  return n;
}

/**
 * Writes the state's active tickets (`repeated ActiveTicket active = 3`, each `ticket = 1` then `position = 2`)
 * into a buffer sized for them, without a message object or a writer's chunks per ticket: byte for byte what
 * the generated schema writes (tested), at a fraction of the cost for a million tickets.
 */
class ActiveTicketWriter {
  constructor(
    private readonly out: Uint8Array,
    public at: number,
  ) {}

  /** The size of one element's payload: its ticket and its position fields. */
  private static payload(ticketLength: number, position: number): number {
    return 1 + varintLength(ticketLength) + ticketLength + 1 + varintLength(position);
  }

  /** The bytes tickets [from, to) of the run take as elements of `active`; checks each position. */
  static length(active: QueueSnapshotData['active'], from: number, to: number): number {
    let n = 0;
    for (let i = from; i < to; i++) {
      const position = active.position(i);
      whole(position, `state.active[${i}].position`, 1);
      const payload = ActiveTicketWriter.payload(active.ticket(i).length, position);
      n += 1 + varintLength(payload) + payload;
    }
    return n;
  }

  write(ticket: Uint8Array, position: number): void {
    const payload = ActiveTicketWriter.payload(ticket.length, position);
    if (this.at + 1 + varintLength(payload) + payload > this.out.length)
      throw new CheckpointEncodeError('state.active', 'changed while it was encoded');
    this.out[this.at++] = ACTIVE_TAG;
    this.varint(payload);
    this.out[this.at++] = TICKET_TAG;
    this.varint(ticket.length);
    this.out.set(ticket, this.at);
    this.at += ticket.length;
    this.out[this.at++] = POSITION_TAG;
    this.varint(position);
  }

  private varint(value: number): void {
    let v = value;
    while (v >= 128) {
      this.out[this.at++] = (v % 128) | 128;
      v = Math.floor(v / 128);
    }
    this.out[this.at++] = v;
  }
}

/** The parts' bytes one after another, in one new array. */
export function joined(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export const STATE_FIELD = QueueCheckpointSchema.field.state!.number;

function outboxToWire(outbox: OutboxSnapshot) {
  const seq = (value: bigint, path: string, min = 0n) => {
    if (typeof value !== 'bigint' || value < min || value > MAX)
      throw new CheckpointEncodeError(path, `${value} is out of range (${min}..2^53-1)`);
    return value;
  };
  const { parked } = outbox;
  return {
    nextProducerSequence: seq(outbox.nextSequence, 'outbox.next_producer_sequence', 1n),
    deliveryCursor: seq(outbox.deliveryCursor, 'outbox.delivery_cursor'),
    parked: parked && {
      sequence: seq(parked.sequence, 'outbox.parked.sequence'),
      attempts: whole(parked.attempts, 'outbox.parked.attempts', 0),
      lastError: text(parked.lastError, 'outbox.parked.last_error'),
      parkedAtMs: whole(parked.parkedAtMs, 'outbox.parked.parked_at_ms', 0),
    },
    consumers: outbox.consumers.map((c, i) => ({
      consumer: text(c.consumer, `outbox.consumers[${i}].consumer`),
      sequence: seq(c.sequence, `outbox.consumers[${i}].sequence`),
      ...(c.owner === undefined ? {} : { owner: text(c.owner, `outbox.consumers[${i}].owner`) }),
    })),
    outcomes: outbox.outcomes.map((o, i) => ({ sequence: seq(o.sequence, `outbox.outcomes[${i}].sequence`, 1n), outcome: o.bytes })),
  };
}

function whole(value: number, path: string, min?: number): bigint {
  if (!Number.isSafeInteger(value)) throw new CheckpointEncodeError(path, `${value} is not a whole number within ±(2^53-1)`);
  if (min !== undefined && value < min) throw new CheckpointEncodeError(path, `${value} is below ${min}`);
  return BigInt(value);
}

// A lone surrogate has no UTF-8 form: the encoder would write U+FFFD and the value would change on the way.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function text(value: string, path: string): string {
  if (typeof value !== 'string' || LONE_SURROGATE.test(value)) throw new CheckpointEncodeError(path, 'is not a well-formed string');
  return value;
}

/** The largest whole number both forms hold exactly: 2^53 - 1. */
export const MAX = BigInt(Number.MAX_SAFE_INTEGER);
