// Builds Outcome messages. producer_id and producer_sequence are set by the store when the outcome is
// committed, so the sequence follows commit order.
import { randomUUID } from 'node:crypto';
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

export function newOutcome(queueId: string, payload: Outcome['payload'], nowMs = Date.now()): Outcome {
  if (payload.case === undefined) throw new Error('an outcome needs a payload');
  return create(OutcomeSchema, {
    id: randomUUID(),
    kind: OUTCOME_KIND[payload.case],
    queueId,
    occurredAt: timestampFromMs(nowMs),
    payload,
  });
}

/** Splits ids into chunks of `chunkSize` and builds one outcome per chunk, sharing one operation_id. */
function chunked(
  ids: readonly string[],
  chunkSize: number,
  build: (chunk: string[], batch: ReturnType<typeof batchOf>) => Outcome,
): Outcome[] {
  if (ids.length === 0) return [];
  const operationId = randomUUID();
  const chunkCount = Math.ceil(ids.length / chunkSize);
  const out: Outcome[] = [];
  for (let i = 0; i < chunkCount; i++) {
    out.push(build(ids.slice(i * chunkSize, (i + 1) * chunkSize), batchOf(operationId, i, chunkCount)));
  }
  return out;
}

const batchOf = (operationId: string, chunkIndex: number, chunkCount: number) =>
  create(OutcomeBatchSchema, { operationId, chunkIndex, chunkCount });

export function ticketsRemoved(queueId: string, ticketIds: readonly string[], reason: RemovalReason, chunkSize: number): Outcome[] {
  return chunked(ticketIds, chunkSize, (chunk, batch) =>
    newOutcome(queueId, { case: 'ticketsRemoved', value: create(TicketsRemovedSchema, { ticketIds: chunk, batch, reason }) }),
  );
}

export function backfillRequestsRemoved(
  queueId: string,
  backfillIds: readonly string[],
  reason: RemovalReason,
  chunkSize: number,
): Outcome[] {
  return chunked(backfillIds, chunkSize, (chunk, batch) =>
    newOutcome(queueId, {
      case: 'backfillRequestsRemoved',
      value: create(BackfillRequestsRemovedSchema, { backfillRequestIds: chunk, batch, reason }),
    }),
  );
}

export function ticketsExpired(queueId: string, ticketIds: readonly string[], chunkSize: number): Outcome[] {
  return chunked(ticketIds, chunkSize, (chunk, batch) =>
    newOutcome(queueId, { case: 'ticketsExpired', value: create(TicketsExpiredSchema, { ticketIds: chunk, batch }) }),
  );
}

export function backfillRequestsExpired(queueId: string, backfillIds: readonly string[], chunkSize: number): Outcome[] {
  return chunked(backfillIds, chunkSize, (chunk, batch) =>
    newOutcome(queueId, {
      case: 'backfillRequestsExpired',
      value: create(BackfillRequestsExpiredSchema, { backfillRequestIds: chunk, batch }),
    }),
  );
}

export function ticketOrphaned(queueId: string, ticket: Ticket, rulesetId: string): Outcome {
  return newOutcome(queueId, { case: 'ticketOrphaned', value: create(TicketOrphanedSchema, { ticket, rulesetId }) });
}

export function backfillRequestOrphaned(queueId: string, backfillRequest: BackfillRequest, rulesetId: string): Outcome {
  return newOutcome(queueId, {
    case: 'backfillRequestOrphaned',
    value: create(BackfillRequestOrphanedSchema, { backfillRequest, rulesetId }),
  });
}

export function backfillCreated(queueId: string, backfill: Backfill): Outcome {
  return newOutcome(queueId, { case: 'backfillCreated', value: create(BackfillCreatedSchema, { backfill }) });
}
