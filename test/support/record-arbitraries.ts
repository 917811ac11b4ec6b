// Arbitrary records of every type (records.ts) and log entries of them (record-codec.ts), with values over
// their whole range: ids in any script, positions and times up to 2^53-1, every removal reason.
import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { BackfillRequestSchema, TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { RemovalReason } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { LEADER_RECORD_TYPES, type LogEntry } from '../../src/replication/wire/record-codec.js';
import type { Eviction, QueueRecord } from '../../src/queue/records.js';
import { ticketArb } from './fixtures.js';

const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'grapheme', maxLength: 6 }), fc.uuid());
const ids = fc.array(text, { maxLength: 4 });
const position = fc.oneof(fc.nat({ max: 1000 }), fc.maxSafeNat());
const ms = fc.oneof(fc.integer({ min: 1_600_000_000_000, max: 2_000_000_000_000 }), fc.maxSafeInteger());
const reason = fc.constantFrom(
  RemovalReason.CLEAR_COMMAND,
  RemovalReason.QUEUE_CONFIG_CHANGED,
  RemovalReason.QUEUE_RETIRED,
  RemovalReason.RULESET_PARAMS_CHANGED,
);
/** A producer_sequence: uint64. */
const sequence = fc.oneof(fc.bigInt({ min: 0n, max: 1000n }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }));
const chunked = { atMs: ms, operationId: text, chunkSize: fc.integer({ min: 1, max: 0xffff_ffff }) };
const ticketAt = fc.record({ ticketId: text, position });
const backfillAt = fc.record({ backfillId: text, version: position });
const eviction: fc.Arbitrary<Eviction> = fc.oneof(
  fc.record({ kind: fc.constant('orphaned' as const), rulesetId: text }),
  fc.record({ kind: fc.constant('removed' as const), reason }),
);
const backfillRequest = fc
  .record(
    {
      id: text,
      queueId: text,
      createdAt: fc.record({ seconds: fc.bigInt({ min: 0n, max: 1n << 40n }), nanos: fc.nat({ max: 999_999_999 }) }),
      matchId: text,
      rulesetId: text,
      slotsRequested: fc.nat({ max: 0xffff_ffff }),
      engineInput: fc.uint8Array({ maxLength: 30 }),
      metadata: fc.uint8Array({ maxLength: 30 }),
    },
    { requiredKeys: ['id', 'matchId'] },
  )
  .map((init) => create(BackfillRequestSchema, init));

export const recordArbs: { [T in QueueRecord['type']]: fc.Arbitrary<Extract<QueueRecord, { type: T }>> } = {
  'ticket.create': ticketArb.map((init) => ({
    type: 'ticket.create' as const,
    ticketId: init.id,
    ticket: toBinary(TicketSchema, create(TicketSchema, init)),
  })),
  'ticket.cancel': fc.record({ type: fc.constant('ticket.cancel' as const), ticketId: text }),
  'tickets.reactivate': fc.record({ type: fc.constant('tickets.reactivate' as const), ticketIds: ids, resolvedSinceMs: ms }),
  'backfill.create': fc.record({ type: fc.constant('backfill.create' as const), request: backfillRequest }),
  'backfills.cancel': fc.record({ type: fc.constant('backfills.cancel' as const), backfillIds: ids }),
  'pool.clear': fc.record({ type: fc.constant('pool.clear' as const), reason, ...chunked }),
  'match.commit': fc.record({
    type: fc.constant('match.commit' as const),
    matchId: text,
    tickets: fc.array(ticketAt, { maxLength: 4 }),
    rulesetId: text,
    engineOutput: fc.uint8Array({ maxLength: 30 }),
    atMs: ms,
  }),
  'backfill.fill': fc.record({
    type: fc.constant('backfill.fill' as const),
    backfill: backfillAt,
    fillId: text,
    tickets: fc.array(ticketAt, { maxLength: 4 }),
    atMs: ms,
  }),
  'tickets.expire': fc.record({ type: fc.constant('tickets.expire' as const), tickets: fc.array(ticketAt, { maxLength: 4 }), ...chunked }),
  'backfills.expire': fc.record({
    type: fc.constant('backfills.expire' as const),
    backfills: fc.array(backfillAt, { maxLength: 4 }),
    ...chunked,
  }),
  'tickets.evict': fc.record({
    type: fc.constant('tickets.evict' as const),
    evictions: fc.array(fc.record({ ticketId: text, position, eviction }), { maxLength: 4 }),
    ...chunked,
  }),
  'backfills.evict': fc.record({
    type: fc.constant('backfills.evict' as const),
    evictions: fc.array(fc.record({ backfillId: text, version: position, eviction }), { maxLength: 4 }),
    ...chunked,
  }),
  'resolved.forget': fc.record({
    type: fc.constant('resolved.forget' as const),
    tickets: fc.array(fc.record({ ticketId: text, matchId: fc.oneof(text, fc.constant('')) }), { maxLength: 4 }),
  }),
  'delivery.advance': fc.record({ type: fc.constant('delivery.advance' as const), sequence }),
  'delivery.park': fc.record({
    type: fc.constant('delivery.park' as const),
    parked: fc.record({ sequence, attempts: fc.nat({ max: 0xffff_ffff }), lastError: text, parkedAtMs: ms }),
  }),
  'delivery.release': fc.record({ type: fc.constant('delivery.release' as const) }),
  'consumer.advance': fc.record(
    { type: fc.constant('consumer.advance' as const), consumer: text, sequence, owner: text },
    { requiredKeys: ['type', 'consumer', 'sequence'] },
  ),
};
export const recordArb: fc.Arbitrary<QueueRecord> = fc.oneof(...Object.values(recordArbs));

/** A records entry: term 0 only when it holds no leader record. */
export const entryArb: fc.Arbitrary<LogEntry> = fc
  .record({
    replicaId: text.filter((s) => s !== ''),
    term: fc.oneof(fc.constant(0), fc.maxSafeNat()),
    records: fc.array(recordArb, { maxLength: 8 }),
  })
  .map(({ replicaId, term, records }) => ({
    kind: 'records' as const,
    replicaId,
    term: records.some((r) => LEADER_RECORD_TYPES.has(r.type)) ? Math.max(term, 1) : term,
    records,
  }));
