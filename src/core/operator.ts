// What operators read and do through the admin routes, the admin gRPC service and /metrics: queue summaries,
// one ticket's state and its explanation, a queue's statistics, the outbox, outcome delivery (and releasing a
// parked one), and the numbers /metrics exports. Read-only but for the release; every answer is served while
// the service is serving.
import type { Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { failedPrecondition, notFound, quote, unavailable } from '../errors.js';
import { configHash } from '../config/queue-config.js';
import type {
  ExplainTicketRequest,
  ExplainTicketResponse,
  GetQueueStatisticsRequest,
  GetQueueStatisticsResponse,
} from '../gen/matchmaker/admin/v1/admin_pb.js';
import type { QueueRuntime } from '../queue/queue-runtime.js';
import { explainTicketResponse, queueStatisticsResponse } from './admin-answers.js';
import { requireQueueId, requireUuid, type MatchmakerCore } from './matchmaker-core.js';
import type { DeliveryStatus, OpenedService } from './service-parts.js';

export interface QueueSummary {
  queueId: string;
  state: string;
  activeTickets: number;
  resolvedTickets: number;
  backfillRequests: number;
  /** Whether this process leads the queue: always in the embedded mode; in the replicated mode, the one
   *  replica that runs its engine and delivers its outcomes. */
  leading: boolean;
  /** Whether the queue takes requests now (running, and in the replicated mode its log reachable). */
  serving: boolean;
  /** Fingerprint of the queue's file as this process runs it. */
  configHash: string;
  /** The replicated mode: the log position of the last entry this replica applied (replicas that agree on it
   *  hold the same state of the queue); absent, embedded. */
  logPosition?: number;
  /** The replicated mode: the term this replica applies the leader's entries under, the log position of the
   *  leader's claim (replicas at one position must agree on it); absent, embedded. */
  logTerm?: number;
  /** The replicated mode: each present replica's fingerprint of the queue's file (null: it has none). */
  replicaConfigHashes?: Record<string, string | null>;
  /** The replicated mode: whether the replicas run different versions of the queue's file. */
  configDiverges?: boolean;
}

export interface TicketLookup {
  state: 'active' | 'resolved';
  /** Empty unless resolved. */
  matchId: string;
  ticket: Ticket;
}

export interface OutcomeListing {
  queueId?: string;
  afterSequence?: bigint;
  /** Defaults to 1000, capped at 10,000. */
  limit?: number;
}

/** The numbers behind /metrics; `opened` is absent until the store is open. */
export interface MetricsSnapshot {
  serving: boolean;
  opened?: { queues: QueueSummary[]; deliveries: DeliveryStatus[]; lastSequence: bigint };
}

export class Operator {
  constructor(
    private readonly core: MatchmakerCore,
    private readonly opened: () => OpenedService | undefined,
  ) {}

  queueSummaries(): QueueSummary[] {
    return summaries(this.serving());
  }

  /**
   * Whether one queue takes requests here now, and if not why: the service's state, or the queue's
   * (`starting` while a replica catches up with its log, `unreachable` while its broker is).
   */
  queueReadiness(queueId: string): { ready: boolean; status: string } {
    const opened = this.opened();
    if (!opened || this.core.state !== 'serving') return { ready: false, status: this.core.state };
    const queue = opened.registry.get(queueId);
    if (!queue) throw notFound(`queue ${quote(queueId)} does not exist`);
    if (queue.serving) return { ready: true, status: 'ok' };
    return { ready: false, status: queue.lifecycle === 'running' ? 'unreachable' : queue.lifecycle };
  }

  lookupTicket(queueId: string, ticketId: string): TicketLookup {
    const queue = this.queue(queueId);
    const found = queue.lookupTicket(ticketId.toLowerCase());
    if (!found) throw notFound(`ticket ${quote(ticketId)} is not in queue ${quote(queueId)}`);
    return { state: found.state, matchId: found.matchId ?? '', ticket: found.ticket };
  }

  /** matchmaker.admin.v1 ExplainTicket: why the ticket waits (docs/explain-and-statistics.md). */
  async explainTicket(req: ExplainTicketRequest): Promise<ExplainTicketResponse> {
    const queue = this.queue(requireQueueId(req.queueId, 'queue_id'));
    const ticketId = requireUuid(req.ticketId, 'ticket_id');
    const explanation = await queue.insight.explain(ticketId, Date.now());
    if (!explanation) throw notFound(`ticket ${quote(req.ticketId)} is not in queue ${quote(queue.queueId)}`);
    return explainTicketResponse(queue.queueId, explanation);
  }

  /** matchmaker.admin.v1 GetQueueStatistics: the queue's and each ruleset's numbers now and over the last minutes. */
  async queueStatistics(req: GetQueueStatisticsRequest): Promise<GetQueueStatisticsResponse> {
    const queue = this.queue(requireQueueId(req.queueId, 'queue_id'));
    return queueStatisticsResponse(queue.queueId, await queue.insight.statistics(Date.now()));
  }

  listOutcomes(query: OutcomeListing): Outcome[] {
    const { queueId } = query;
    return this.serving().store.listOutcomes({
      afterSequence: query.afterSequence,
      queueFilter: queueId === undefined ? undefined : (id) => id === queueId,
      limit: query.limit === undefined ? 1000 : Math.min(10_000, query.limit),
    });
  }

  deliveryStatus(): DeliveryStatus[] {
    return this.serving().delivery.status();
  }

  async releaseParkedDelivery(queueId: string): Promise<void> {
    const released = await this.serving().delivery.release(queueId);
    if (!released) throw failedPrecondition(`queue ${quote(queueId)} has no parked delivery`);
  }

  /** Answers while starting and stopping too: /metrics shows the service is not up. */
  metricsSnapshot(): MetricsSnapshot {
    const opened = this.opened();
    const serving = this.core.state === 'serving';
    if (!opened) return { serving };
    return {
      serving,
      opened: { queues: summaries(opened), deliveries: opened.delivery.status(), lastSequence: opened.store.lastSequence() },
    };
  }

  private queue(queueId: string): QueueRuntime {
    const queue = this.serving().registry.get(queueId);
    if (!queue) throw notFound(`queue ${quote(queueId)} does not exist`);
    return queue;
  }

  private serving(): OpenedService {
    const opened = this.opened();
    if (!opened || this.core.state !== 'serving') throw unavailable('service is not serving; retry with backoff');
    return opened;
  }
}

function summaries(opened: OpenedService): QueueSummary[] {
  return opened.registry.all().map((q) => ({
    queueId: q.queueId,
    state: q.lifecycle,
    activeTickets: q.activeTicketCount,
    resolvedTickets: q.resolvedTicketCount,
    backfillRequests: q.backfillRequestCount,
    leading: q.leading,
    serving: q.serving,
    configHash: configHash(q.config),
    ...(q.logPosition === undefined ? {} : { logPosition: q.logPosition }),
    ...(q.logTerm === undefined ? {} : { logTerm: q.logTerm }),
    ...clusterView(opened, q.queueId),
  }));
}

function clusterView(opened: OpenedService, queueId: string): Pick<QueueSummary, 'replicaConfigHashes' | 'configDiverges'> {
  if (!opened.configHashes) return {};
  const replicaConfigHashes = opened.configHashes(queueId);
  return { replicaConfigHashes, configDiverges: new Set(Object.values(replicaConfigHashes)).size > 1 };
}
