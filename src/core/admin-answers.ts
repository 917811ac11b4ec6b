// The admin service's answers (matchmaker.admin.v1, docs/explain-and-statistics.md) built from what a queue
// tells about itself (src/queue/queue-insight.ts): the one place its explanations and statistics become
// protobuf messages, which both transports encode (gRPC in binary, HTTP in the canonical JSON mapping).
import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import {
  AnswerScope,
  ExplainTicketResponseSchema,
  GetQueueStatisticsResponseSchema,
  type ExplainTicketResponse,
  type GetQueueStatisticsResponse,
  type WaitEstimate as WaitEstimateMessage,
  WaitEstimateSchema,
  type WaitStatistics as WaitStatisticsMessage,
  WaitStatisticsSchema,
} from '../gen/matchmaker/admin/v1/admin_pb.js';
import type { QueueStatistics, TicketExplanation, WaitEstimate, WaitStatistics } from '../queue/queue-insight.js';

const secs = (ms: number) => ms / 1000;
const scopeOf = (leading: boolean) => (leading ? AnswerScope.LEADER : AnswerScope.FOLLOWER);

function estimate(e: WaitEstimate): WaitEstimateMessage {
  return e.available
    ? create(WaitEstimateSchema, { available: true, remainingSecs: secs(e.remainingMs), basedOnTickets: e.basedOnTickets })
    : create(WaitEstimateSchema, { available: false, basedOnTickets: e.basedOnTickets, reason: e.reason });
}

export function explainTicketResponse(queueId: string, x: TicketExplanation): ExplainTicketResponse {
  return create(ExplainTicketResponseSchema, {
    queueId,
    ticketId: x.ticketId,
    state: x.state,
    matchId: x.matchId ?? '',
    createdAt: timestampFromMs(x.createdAtMs),
    waitSecs: secs(x.waitMs),
    rulesets: x.rulesets.map((r) => ({
      rulesetId: r.rulesetId,
      bounds: {
        maxSkillSpread: r.bounds.maxSkillSpread,
        maxTeamImbalance: r.bounds.maxTeamImbalance,
        maxLatencyMs: r.bounds.maxLatencyMs,
        requireHost: r.requireHost,
        hostRequired: r.hostRequired,
      },
      nextRelaxation: r.nextWidening && {
        atWaitSecs: secs(r.nextWidening.atWaitMs),
        inSecs: secs(Math.max(0, r.nextWidening.atWaitMs - x.waitMs)),
        continuous: r.nextWidening.continuous,
      },
      candidates: { ...r.counts, playersNeeded: r.playersNeeded },
      estimatedWait: estimate(r.estimate),
    })),
    lastRefusal: x.lastRefusal && { rule: x.lastRefusal.rule, tickAt: timestampFromMs(x.lastRefusal.atMs) },
    estimatedWait: x.estimate && estimate(x.estimate),
    scope: scopeOf(x.leading),
    notes: x.notes,
    answeredAt: timestampFromMs(x.atMs),
  });
}

function waitStatistics(s: WaitStatistics): WaitStatisticsMessage {
  return create(WaitStatisticsSchema, {
    rulesetId: s.rulesetId,
    ticketsWaiting: s.ticketsWaiting,
    playersWaiting: s.playersWaiting,
    matches: s.matches,
    matchedTickets: s.matchedTickets,
    matchesPerMinute: s.matchesPerMinute,
    waitP50Secs: secs(s.waitP50Ms ?? 0),
    waitP95Secs: secs(s.waitP95Ms ?? 0),
    waitP99Secs: secs(s.waitP99Ms ?? 0),
    estimatedWaitNewTicket: estimate(s.newTicketEstimate),
  });
}

export function queueStatisticsResponse(queueId: string, s: QueueStatistics): GetQueueStatisticsResponse {
  return create(GetQueueStatisticsResponseSchema, {
    queueId,
    windowSecs: secs(s.windowMs),
    queue: waitStatistics(s.queue),
    rulesets: s.rulesets.map(waitStatistics),
    scope: scopeOf(s.leading),
    notes: s.notes,
    answeredAt: timestampFromMs(s.atMs),
  });
}
