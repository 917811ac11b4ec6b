// Operator routes (docs/api.md), answered through the core's Operator:
// GET /admin/v1/queues, GET /admin/v1/queues/{queue_id}/tickets/{ticket_id},
// GET /admin/v1/queues/{queue_id}/tickets/{ticket_id}:explain and GET /admin/v1/queues/{queue_id}/statistics
// (matchmaker.admin.v1's ExplainTicket and GetQueueStatistics in the canonical JSON mapping),
// GET /admin/v1/outcomes?queue_id=&after_sequence=&limit=, GET /admin/v1/deliveries,
// POST /admin/v1/queues/{queue_id}/deliveries:retry (releases a parked delivery).
import type { ServerResponse } from 'node:http';
import { create, toJson } from '@bufbuild/protobuf';
import type { Operator } from '../core/operator.js';
import { invalidArgument, notFound, quotePath } from '../errors.js';
import {
  ExplainTicketRequestSchema,
  ExplainTicketResponseSchema,
  GetQueueStatisticsRequestSchema,
  GetQueueStatisticsResponseSchema,
} from '../gen/matchmaker/admin/v1/admin_pb.js';
import { TicketSchema } from '../gen/matchmaker/core/v1/resources_pb.js';
import { OutcomeSchema } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { decodePathSegment, sendJson } from './http-json.js';

/** Writes the audit line of an operator action that changed something. */
export type AuditAction = (action: string, details: Record<string, unknown>) => void;

export async function admin(
  method: string,
  path: string,
  url: URL,
  res: ServerResponse,
  operator: Operator,
  audit: AuditAction,
): Promise<void> {
  const retry = /^\/admin\/v1\/queues\/([^/:]+)\/deliveries:retry$/.exec(path);
  if (method === 'POST' && retry) {
    const queueId = decodePathSegment(retry[1]!, 0);
    await operator.releaseParkedDelivery(queueId);
    audit('release', { queueId });
    return sendJson(res, 200, { released: true });
  }
  if (method !== 'GET') throw notFound(`no route for ${method} ${quotePath(path)}`);
  if (path === '/admin/v1/outcomes') return listOutcomes(url, res, operator);
  if (path === '/admin/v1/deliveries') return sendJson(res, 200, { deliveries: operator.deliveryStatus() });
  if (path === '/admin/v1/queues') return sendJson(res, 200, { queues: operator.queueSummaries() });
  const explainPath = /^\/admin\/v1\/queues\/([^/:]+)\/tickets\/([^/:]+):explain$/.exec(path);
  if (explainPath) {
    const [queueId, ticketId] = explainPath.slice(1).map((p, i) => decodePathSegment(p, i)) as [string, string];
    const answer = await operator.explainTicket(create(ExplainTicketRequestSchema, { queueId, ticketId }));
    return sendJson(res, 200, toJson(ExplainTicketResponseSchema, answer));
  }
  const statisticsPath = /^\/admin\/v1\/queues\/([^/:]+)\/statistics$/.exec(path);
  if (statisticsPath) {
    const queueId = decodePathSegment(statisticsPath[1]!, 0);
    const answer = await operator.queueStatistics(create(GetQueueStatisticsRequestSchema, { queueId }));
    return sendJson(res, 200, toJson(GetQueueStatisticsResponseSchema, answer));
  }
  const ticketPath = /^\/admin\/v1\/queues\/([^/:]+)\/tickets\/([^/:]+)$/.exec(path);
  if (ticketPath) {
    const [queueId, ticketId] = ticketPath.slice(1).map((p, i) => decodePathSegment(p, i)) as [string, string];
    const found = operator.lookupTicket(queueId, ticketId);
    return sendJson(res, 200, { state: found.state, matchId: found.matchId, ticket: toJson(TicketSchema, found.ticket) });
  }
  throw notFound(`no route for GET ${quotePath(path)}`);
}

function listOutcomes(url: URL, res: ServerResponse, operator: Operator): void {
  const after = url.searchParams.get('after_sequence');
  const queueId = url.searchParams.get('queue_id');
  const limit = url.searchParams.get('limit');
  if (after !== null && !/^\d+$/.test(after)) throw invalidArgument('after_sequence must be a non-negative integer');
  if (limit !== null && !/^\d+$/.test(limit)) throw invalidArgument('limit must be a non-negative integer');
  const outcomes = operator.listOutcomes({
    queueId: queueId ?? undefined,
    afterSequence: after === null ? undefined : BigInt(after),
    limit: limit === null ? undefined : Number(limit),
  });
  sendJson(res, 200, { outcomes: outcomes.map((o) => toJson(OutcomeSchema, o)) });
}
