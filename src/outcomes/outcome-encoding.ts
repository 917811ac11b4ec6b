// Outcomes encoded as the store records them (store/outcome-record.ts), without producer_id and
// producer_sequence, which the store appends at commit. Most are encoded where they are formed; a
// match.created outcome when its bytes are first read (a store's commit, a delivery, a checkpoint). A match's
// tickets go in as the bytes they were acknowledged and stored as: a match.created outcome is mostly its
// tickets, and decoding them to encode them again was most of what resolving a match cost.
//
// Both rest on protobuf's merge rule: a message field that occurs again is merged into the first, a repeated
// field's occurrences are appended in order, a scalar's last occurrence wins. So fields appended to an
// encoded message give that message with those fields set; decoding the result gives the same message as
// encoding it whole.
import { create, toBinary } from '@bufbuild/protobuf';
import { WireType } from '@bufbuild/protobuf/wire';
import { MatchSchema, type Match } from '../gen/matchmaker/core/v1/resources_pb.js';
import { MatchCreatedSchema, OutcomeSchema, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { varintSize, writeVarint } from '../store/field-walk.js';
import type { EncodedOutcome } from '../store/outcome-record.js';
import { newOutcome, type OutcomeStamp } from './outcome-factory.js';

const MATCH_TICKETS = MatchSchema.field.tickets!.number;
const OUTCOME_MATCH_CREATED = OutcomeSchema.field.matchCreated!.number;
const MATCH_CREATED_MATCH = MatchCreatedSchema.field.match!.number;

export function encodeOutcome(outcome: Outcome): EncodedOutcome {
  return { queueId: outcome.queueId, bytes: toBinary(OutcomeSchema, outcome) };
}

/**
 * The match.created outcome of `match` (whose own `tickets` stay empty) with `tickets`, each a Ticket's bytes,
 * encoded when its bytes are first read. A follower records every match but delivers none unless it comes to
 * lead before the leader has delivered them, so most of its outcomes are dropped unread: encoding them at
 * once was about a tenth of what applying the log cost it (bench/RESULTS.md). The inputs are never changed
 * after the call (a record's fields, stored tickets' bytes), so the bytes are the same whenever they are
 * made. `stamp` is the outcome's own: its first id is the outcome's, taken with the bytes.
 */
export function matchCreatedOutcome(queueId: string, match: Match, tickets: readonly Uint8Array[], stamp: OutcomeStamp): EncodedOutcome {
  return new MatchCreatedOutcome(queueId, match, tickets, stamp);
}

class MatchCreatedOutcome implements EncodedOutcome {
  private encoded: Uint8Array | undefined;
  private inputs: { match: Match; tickets: readonly Uint8Array[]; stamp: OutcomeStamp } | undefined;

  constructor(
    readonly queueId: string,
    match: Match,
    tickets: readonly Uint8Array[],
    stamp: OutcomeStamp,
  ) {
    this.inputs = { match, tickets, stamp };
  }

  get bytes(): Uint8Array {
    if (this.encoded === undefined) {
      const { match, tickets, stamp } = this.inputs!;
      this.encoded = encodeMatchCreated(this.queueId, match, tickets, stamp);
      this.inputs = undefined;
    }
    return this.encoded;
  }
}

function encodeMatchCreated(queueId: string, match: Match, tickets: readonly Uint8Array[], stamp: OutcomeStamp): Uint8Array {
  // Sized first and written once: the outcome is mostly its tickets' bytes, which writers growing by
  // doubling (and a join widening a length) copied several times over.
  const matchBytes = toBinary(MatchSchema, match);
  let matchLength = matchBytes.length;
  for (const ticket of tickets) matchLength += fieldSize(MATCH_TICKETS, ticket.length);
  const createdLength = fieldSize(MATCH_CREATED_MATCH, matchLength);
  const shell = toBinary(OutcomeSchema, newOutcome(queueId, { case: 'matchCreated', value: create(MatchCreatedSchema) }, stamp));
  const bytes = new Uint8Array(shell.length + fieldSize(OUTCOME_MATCH_CREATED, createdLength));
  bytes.set(shell);
  let at = writeHeader(bytes, shell.length, OUTCOME_MATCH_CREATED, createdLength);
  at = writeHeader(bytes, at, MATCH_CREATED_MATCH, matchLength);
  bytes.set(matchBytes, at);
  at += matchBytes.length;
  for (const ticket of tickets) {
    at = writeHeader(bytes, at, MATCH_TICKETS, ticket.length);
    bytes.set(ticket, at);
    at += ticket.length;
  }
  return bytes;
}

/** Bytes of a length-delimited field `field` of `length` bytes, its tag and length included. */
function fieldSize(field: number, length: number): number {
  return varintSize((field << 3) | WireType.LengthDelimited) + varintSize(length) + length;
}

/** Writes the tag and length of a length-delimited field at `at`; answers where its bytes go. */
function writeHeader(bytes: Uint8Array, at: number, field: number, length: number): number {
  return writeVarint(bytes, writeVarint(bytes, at, (field << 3) | WireType.LengthDelimited), length);
}
