// The transport-neutral service core: every operation of matchmaker.core.v1.MatchmakerService with all
// of its validation. The gRPC and HTTP adapters decode a request message, call one method here and encode
// the answer or the ServiceError; nothing else.
import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import type { QueueConfig } from '../config/queue-config.js';
import { BackfillRequestSchema } from '../gen/matchmaker/core/v1/resources_pb.js';
import {
  CancelBackfillRequestsResponseSchema,
  CancelTicketResponseSchema,
  ClearQueuePoolResponseSchema,
  CreateBackfillRequestResponseSchema,
  CreateTicketResponseSchema,
  type MatchmakerService,
  ReactivateTicketsResponseSchema,
  type CancelBackfillRequestsRequest,
  type CancelBackfillRequestsResponse,
  type CancelTicketRequest,
  type CancelTicketResponse,
  type ClearQueuePoolRequest,
  type ClearQueuePoolResponse,
  type CreateBackfillRequestRequest,
  type CreateBackfillRequestResponse,
  type CreateTicketRequest,
  type CreateTicketResponse,
  type ReactivateTicketsRequest,
  type ReactivateTicketsResponse,
} from '../gen/matchmaker/core/v1/service_pb.js';
import { RemovalReason } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { parseBackfillEngineInput, parseTicketEngineInput } from '../engine/engine-input.js';
import { missingRuleset, rulesetTooSmall } from '../queue/admission.js';
import type { QueueRegistry } from '../queue/queue-registry.js';
import type { QueueRuntime } from '../queue/queue-runtime.js';
import { acknowledgedTicketBytes } from '../store/ticket-encoding.js';
import { clip, failedPrecondition, invalidArgument, notFound, quote, ServiceError, unavailable, type ErrorCode } from '../errors.js';

export type ServiceState = 'starting' | 'serving' | 'stopping';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** UUIDs are compared and stored in lowercase, so one id in two spellings is still one ticket. */
export function requireUuid(value: string, field: string): string {
  if (value === '') throw invalidArgument(`${field} is required`);
  if (!UUID.test(value)) throw invalidArgument(`${field} must be a UUID, got ${quote(value)}`);
  return value.toLowerCase();
}

export function requireQueueId(value: string, field: string): string {
  if (value === '') throw invalidArgument(`${field} is required`);
  return value;
}

function checkSize(bytes: Uint8Array | undefined, limit: number, field: string, limitName: string): void {
  if (bytes !== undefined && bytes.length > limit) {
    throw invalidArgument(`${field} is ${bytes.length} bytes, over the queue's ${limitName} of ${limit}`);
  }
}

/** Unknown or repeated ruleset ids are refused. */
function checkRulesetIds(config: QueueConfig, queueId: string, ids: readonly string[], field: string): void {
  const seen = new Set<string>();
  ids.forEach((id, i) => {
    if (seen.has(id)) throw failedPrecondition(`${field}[${i}]: ruleset ${quote(id)} is listed twice`);
    seen.add(id);
    if (missingRuleset(config, [id]) !== undefined)
      throw failedPrecondition(`${field}[${i}]: queue ${quote(queueId)} has no ruleset ${quote(id)}`);
  });
}

export class MatchmakerCore {
  state: ServiceState = 'starting';
  private registry: QueueRegistry | undefined;
  private inFlight = 0;
  private onIdle: (() => void) | undefined;

  /** Called once the store is open and the queues are loaded. */
  serve(registry: QueueRegistry): void {
    this.registry = registry;
    this.state = 'serving';
  }

  /** New requests are refused with UNAVAILABLE from now on; resolves when in-flight ones have finished. */
  stopAccepting(): Promise<void> {
    this.state = 'stopping';
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => (this.onIdle = resolve));
  }

  /**
   * The error for a request that did not decode (bad bytes, bad JSON, a path/body conflict). ClearQueuePool
   * reports every failure as NOT_FOUND, as the spec says; every other operation INVALID_ARGUMENT.
   */
  malformed(operation: keyof typeof MatchmakerService.method, message: string): ServiceError {
    return operation === 'clearQueuePool' ? notFound(message) : invalidArgument(message);
  }

  /** `encoded`: the request as received, when it came in binary (its ticket bytes are reused). */
  createTicket(req: CreateTicketRequest, encoded?: Uint8Array): Promise<CreateTicketResponse> {
    return this.track(async () => {
      const t = req.ticket;
      if (!t) throw invalidArgument('ticket is required');
      const id = requireUuid(t.id, 'ticket.id');
      const queue = this.queueFor(requireQueueId(t.queueId, 'ticket.queue_id'), 'NOT_FOUND');
      const { limits } = queue.config;
      checkSize(t.engineInput, limits.max_engine_input_bytes, 'ticket.engine_input', 'max_engine_input_bytes');
      checkSize(t.metadata, limits.max_metadata_bytes, 'ticket.metadata', 'max_metadata_bytes');
      checkRulesetIds(queue.config, queue.queueId, t.rulesetIds, 'ticket.ruleset_ids');
      const input = parseTicketEngineInput(t.engineInput, id, 'ticket.engine_input');
      const party = input.playerIds.length;
      const tooSmall = rulesetTooSmall(queue.config, t.rulesetIds, party);
      if (tooSmall) {
        throw failedPrecondition(
          `ticket.engine_input: a party of ${party} players does not fit a team of ${tooSmall.team_size} in ruleset "${tooSmall.id}"`,
        );
      }
      const receivedId = t.id;
      // The decoded request is this call's own: it becomes the ticket as acknowledged.
      t.id = id;
      t.createdAt = timestampNow();
      await queue.createTicket(t, acknowledgedTicketBytes(t, receivedId, encoded), input);
      return create(CreateTicketResponseSchema, { ticketId: id });
    });
  }

  cancelTicket(req: CancelTicketRequest): Promise<CancelTicketResponse> {
    return this.track(async () => {
      const id = requireUuid(req.ticketId, 'ticket_id');
      const queue = this.queueFor(requireQueueId(req.queueId, 'queue_id'), 'FAILED_PRECONDITION');
      await queue.cancelTicket(id);
      return create(CancelTicketResponseSchema);
    });
  }

  reactivateTickets(req: ReactivateTicketsRequest): Promise<ReactivateTicketsResponse> {
    return this.track(async () => {
      const ids = req.ticketIds.map((id, i) => requireUuid(id, `ticket_ids[${i}]`));
      const queue = this.queueFor(requireQueueId(req.queueId, 'queue_id'), 'FAILED_PRECONDITION');
      const failedTicketIds = await queue.reactivateTickets(ids);
      return create(ReactivateTicketsResponseSchema, { failedTicketIds });
    });
  }

  createBackfillRequest(req: CreateBackfillRequestRequest): Promise<CreateBackfillRequestResponse> {
    return this.track(async () => {
      const b = req.backfillRequest;
      if (!b) throw invalidArgument('backfill_request is required');
      const id = b.id === '' ? randomUUID() : requireUuid(b.id, 'backfill_request.id');
      const matchId = requireUuid(b.matchId, 'backfill_request.match_id');
      const queue = this.queueFor(requireQueueId(b.queueId, 'backfill_request.queue_id'), 'NOT_FOUND');
      const { limits, rulesets } = queue.config;
      checkSize(b.engineInput, limits.max_engine_input_bytes, 'backfill_request.engine_input', 'max_engine_input_bytes');
      checkSize(b.metadata, limits.max_metadata_bytes, 'backfill_request.metadata', 'max_metadata_bytes');
      let rulesetId = b.rulesetId;
      if (rulesetId === '') {
        if (rulesets.length > 1) {
          throw failedPrecondition(
            `backfill_request.ruleset_id is required: queue ${quote(queue.queueId)} has ${rulesets.length} rulesets`,
          );
        }
        rulesetId = rulesets[0]!.id;
      } else if (missingRuleset(queue.config, [rulesetId]) !== undefined) {
        throw failedPrecondition(`backfill_request.ruleset_id: queue ${quote(queue.queueId)} has no ruleset ${quote(rulesetId)}`);
      }
      // A payload that does not parse is refused here; the queue parses it again when it opens the request.
      parseBackfillEngineInput(b.engineInput, 'backfill_request.engine_input');
      const request = create(BackfillRequestSchema, {
        ...b,
        id,
        matchId,
        rulesetId,
        slotsRequested: Math.max(1, b.slotsRequested),
        createdAt: timestampNow(),
      });
      await queue.createBackfillRequest(request);
      return create(CreateBackfillRequestResponseSchema, { backfillId: id });
    });
  }

  cancelBackfillRequests(req: CancelBackfillRequestsRequest): Promise<CancelBackfillRequestsResponse> {
    return this.track(async () => {
      const ids = req.backfillIds.map((id, i) => requireUuid(id, `backfill_ids[${i}]`));
      const queue = this.queueFor(requireQueueId(req.queueId, 'queue_id'), 'FAILED_PRECONDITION');
      const failedBackfillIds = await queue.cancelBackfillRequests(ids);
      return create(CancelBackfillRequestsResponseSchema, { failedBackfillIds });
    });
  }

  /** Every failure of ClearQueuePool is NOT_FOUND, as the spec says. */
  clearQueuePool(req: ClearQueuePoolRequest): Promise<ClearQueuePoolResponse> {
    return this.track(async () => {
      try {
        const queue = this.queueFor(requireQueueId(req.queueId, 'queue_id'), 'NOT_FOUND');
        const result = await queue.clear(RemovalReason.CLEAR_COMMAND);
        return create(ClearQueuePoolResponseSchema, {
          ticketsCleared: BigInt(result.ticketsCleared),
          backfillRequestsCleared: BigInt(result.backfillRequestsCleared),
        });
      } catch (err) {
        throw notFound(err instanceof ServiceError ? err.message : `queue pool could not be cleared: ${clip((err as Error).message)}`);
      }
    });
  }

  /** The queue's runtime, if it can take writes now. */
  private queueFor(queueId: string, unknownCode: ErrorCode): QueueRuntime {
    if (this.state === 'starting' || !this.registry) throw unavailable('service is starting; retry with backoff');
    if (this.state === 'stopping') throw unavailable('service is shutting down; retry with backoff');
    const queue = this.registry.get(queueId);
    if (!queue) throw new ServiceError(unknownCode, `queue ${quote(queueId)} does not exist`);
    if (queue.lifecycle === 'retiring' || queue.lifecycle === 'retired') {
      throw failedPrecondition(
        `queue ${quote(queueId)} is retiring: its configuration was removed; do not retry against it`,
        'QUEUE_RETIRING',
      );
    }
    if (queue.lifecycle !== 'running') throw unavailable(`queue ${quote(queueId)} is ${queue.lifecycle}; retry with backoff`);
    if (!queue.serving) throw unavailable(`queue ${quote(queueId)}: its replication log is unreachable; retry with backoff`);
    return queue;
  }

  private async track<T>(op: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await op();
    } finally {
      if (--this.inFlight === 0) this.onIdle?.();
    }
  }
}
