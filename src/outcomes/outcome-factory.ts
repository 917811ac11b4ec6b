// Builds Outcome messages. producer_id and producer_sequence are set by the store when the outcome is
// committed, so the sequence follows commit order. Everything else comes from a stamp: the time and the
// ids (outcome ids, a batch's operation_id) derive from the record that causes the outcome, so applying the
// same record again, on this replica or another, builds the same outcome.
import { createHash } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Backfill, BackfillRequest, Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import {
  BackfillCreatedSchema,
  BackfillRequestOrphanedSchema,
  BackfillRequestsExpiredSchema,
  BackfillRequestsRemovedSchema,
  TicketOrphanedSchema,
  TicketsExpiredSchema,
  OutcomeBatchSchema,
  OutcomeSchema,
  TicketsRemovedSchema,
  type Outcome,
  type RemovalReason,
} from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

/** The eight kinds of the spec's Events table, keyed by the Outcome payload case. */
export const OUTCOME_KIND = {
  matchCreated: 'match.created',
  backfillCreated: 'backfill.created',
  ticketsExpired: 'ticket.expired',
  ticketsRemoved: 'ticket.removed',
  backfillRequestsExpired: 'backfill.expired',
  backfillRequestsRemoved: 'backfill.removed',
  ticketOrphaned: 'ticket.orphaned',
  backfillRequestOrphaned: 'backfill.orphaned',
} as const satisfies Record<NonNullable<Outcome['payload']['case']>, string>;

/** When an outcome occurred and where its ids come from. */
export interface OutcomeStamp {
  atMs: number;
  /** The next id of this stamp's sequence: a UUID derived from the stamp's operation id and a counter. */
  nextId(): string;
}

/** A UUID (version 5 layout) derived from `name` and `index`: the same inputs always give the same id. */
export function derivedUuid(name: string, index: number): string {
  const hash = createHash('sha1').update(name).update('\u0000').update(String(index)).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The stamp of one operation: ids derived from `operationId` in order, all at `atMs`. */
export function stampOf(operationId: string, atMs: number): OutcomeStamp {
  let next = 0;
  return { atMs, nextId: () => derivedUuid(operationId, next++) };
}

export function newOutcome(queueId: string, payload: Outcome['payload'], stamp: OutcomeStamp): Outcome {
  if (payload.case === undefined) throw new Error('an outcome needs a payload');
  return create(OutcomeSchema, {
    id: stamp.nextId(),
    kind: OUTCOME_KIND[payload.case],
    queueId,
    occurredAt: timestampFromMs(stamp.atMs),
    payload,
  });
}

/** Splits ids into chunks of `chunkSize` and builds one outcome per chunk, sharing one operation_id. */
function chunked(
  ids: readonly string[],
  chunkSize: number,
  stamp: OutcomeStamp,
  build: (chunk: string[], batch: ReturnType<typeof batchOf>) => Outcome,
): Outcome[] {
  if (ids.length === 0) return [];
  const operationId = stamp.nextId();
  const chunkCount = Math.ceil(ids.length / chunkSize);
  const out: Outcome[] = [];
  for (let i = 0; i < chunkCount; i++) {
    out.push(build(ids.slice(i * chunkSize, (i + 1) * chunkSize), batchOf(operationId, i, chunkCount)));
  }
  return out;
}

const batchOf = (operationId: string, chunkIndex: number, chunkCount: number) =>
  create(OutcomeBatchSchema, { operationId, chunkIndex, chunkCount });

export function ticketsRemoved(
  queueId: string,
  ticketIds: readonly string[],
  reason: RemovalReason,
  chunkSize: number,
  stamp: OutcomeStamp,
): Outcome[] {
  return chunked(ticketIds, chunkSize, stamp, (chunk, batch) =>
    newOutcome(queueId, { case: 'ticketsRemoved', value: create(TicketsRemovedSchema, { ticketIds: chunk, batch, reason }) }, stamp),
  );
}

export function backfillRequestsRemoved(
  queueId: string,
  backfillIds: readonly string[],
  reason: RemovalReason,
  chunkSize: number,
  stamp: OutcomeStamp,
): Outcome[] {
  return chunked(backfillIds, chunkSize, stamp, (chunk, batch) =>
    newOutcome(
      queueId,
      {
        case: 'backfillRequestsRemoved',
        value: create(BackfillRequestsRemovedSchema, { backfillRequestIds: chunk, batch, reason }),
      },
      stamp,
    ),
  );
}

export function ticketsExpired(queueId: string, ticketIds: readonly string[], chunkSize: number, stamp: OutcomeStamp): Outcome[] {
  return chunked(ticketIds, chunkSize, stamp, (chunk, batch) =>
    newOutcome(queueId, { case: 'ticketsExpired', value: create(TicketsExpiredSchema, { ticketIds: chunk, batch }) }, stamp),
  );
}

export function backfillRequestsExpired(
  queueId: string,
  backfillIds: readonly string[],
  chunkSize: number,
  stamp: OutcomeStamp,
): Outcome[] {
  return chunked(backfillIds, chunkSize, stamp, (chunk, batch) =>
    newOutcome(
      queueId,
      {
        case: 'backfillRequestsExpired',
        value: create(BackfillRequestsExpiredSchema, { backfillRequestIds: chunk, batch }),
      },
      stamp,
    ),
  );
}

export function ticketOrphaned(queueId: string, ticket: Ticket, rulesetId: string, stamp: OutcomeStamp): Outcome {
  return newOutcome(queueId, { case: 'ticketOrphaned', value: create(TicketOrphanedSchema, { ticket, rulesetId }) }, stamp);
}

export function backfillRequestOrphaned(
  queueId: string,
  backfillRequest: BackfillRequest,
  rulesetId: string,
  stamp: OutcomeStamp,
): Outcome {
  return newOutcome(
    queueId,
    {
      case: 'backfillRequestOrphaned',
      value: create(BackfillRequestOrphanedSchema, { backfillRequest, rulesetId }),
    },
    stamp,
  );
}

export function backfillCreated(queueId: string, backfill: Backfill, stamp: OutcomeStamp): Outcome {
  return newOutcome(queueId, { case: 'backfillCreated', value: create(BackfillCreatedSchema, { backfill }) }, stamp);
}
