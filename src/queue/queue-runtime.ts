// One queue's runtime: its active pool, resolved tickets kept for reactivation, backfill requests, and
// their lifecycle. Every change is applied to memory in the same synchronous step that issues its store
// commit. The store applies commits in call order, so anything later derived from the pool (a match,
// a removal) is never durable before the changes it depends on; callers are answered once their own
// commit is durable.
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import type { Logger } from 'pino';
import {
  BackfillRequestSchema,
  TicketSchema,
  type BackfillRequest,
  type Ticket,
} from '../gen/matchmaker/core/v1/resources_pb.js';
import type { EngineInput } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import { RemovalReason } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { QueueConfig } from '../config/queue-config.js';
import { failedPrecondition } from '../core/errors.js';
import { parseBackfillEngineInput, parseTicketEngineInput } from '../engine/engine-input.js';
import { backfillRequestsRemoved, ticketsRemoved } from '../outcomes/outcome-factory.js';
import type { Store, StoreChange, StoredTicket } from '../store/store.js';

export type QueueState = 'starting' | 'running' | 'retiring' | 'retired' | 'stopped';

/** A ticket in the active pool, with its engine input parsed once at ingestion. */
export interface PoolTicket {
  ticket: Ticket;
  input: EngineInput;
}

interface ResolvedTicket {
  ticket: Ticket;
  matchId: string;
  resolvedAtMs: number;
}

interface PoolBackfill {
  request: BackfillRequest;
  input: EngineInput;
}

export interface ClearResult {
  ticketsCleared: number;
  backfillRequestsCleared: number;
}

export class QueueRuntime {
  state: QueueState = 'starting';
  private readonly active = new Map<string, PoolTicket>();
  private readonly resolved = new Map<string, ResolvedTicket>();
  private readonly backfills = new Map<string, PoolBackfill>();
  /** match_id -> backfill id: one open request per running match. */
  private readonly backfillByMatch = new Map<string, string>();

  constructor(
    readonly queueId: string,
    public config: QueueConfig,
    private readonly store: Store,
    private readonly log: Logger,
  ) {}

  /** Restores the pool from the store. Synchronous: reads are memory-mapped. */
  start(): void {
    const snapshot = this.store.loadQueue(this.queueId);
    for (const stored of snapshot.tickets) {
      const ticket = fromBinary(TicketSchema, stored.ticket);
      if (stored.state === 'resolved') {
        this.resolved.set(ticket.id, { ticket, matchId: stored.matchId ?? '', resolvedAtMs: stored.resolvedAtMs ?? 0 });
      } else {
        this.active.set(ticket.id, { ticket, input: parseTicketEngineInput(ticket.engineInput, ticket.id, 'engine_input') });
      }
    }
    for (const stored of snapshot.backfills) {
      const request = fromBinary(BackfillRequestSchema, stored.request);
      this.addBackfill({ request, input: parseBackfillEngineInput(request.engineInput, 'engine_input') });
    }
    this.state = 'running';
    this.log.info({ queue: this.queueId, tickets: this.active.size, resolved: this.resolved.size, backfills: this.backfills.size }, 'queue started');
  }

  get activeTicketCount(): number {
    return this.active.size;
  }

  get backfillRequestCount(): number {
    return this.backfills.size;
  }

  /** Where a ticket is now, for the admin view: active in the pool, resolved into a match, or unknown. */
  lookupTicket(ticketId: string): { state: 'active' | 'resolved'; ticket: Ticket; matchId?: string } | undefined {
    const active = this.active.get(ticketId);
    if (active) return { state: 'active', ticket: active.ticket };
    const resolved = this.resolved.get(ticketId);
    return resolved && { state: 'resolved', ticket: resolved.ticket, matchId: resolved.matchId };
  }

  /** Adds the ticket to the pool. Idempotent on the ticket id: a retry never makes a second entry. */
  async createTicket(ticket: Ticket, input: EngineInput): Promise<void> {
    if (this.active.has(ticket.id) || this.resolved.has(ticket.id)) {
      // A retry (or a concurrent duplicate) of a create we already issued: answer once that one is durable.
      return this.store.whenDurable();
    }
    this.active.set(ticket.id, { ticket, input });
    await this.store.commit([{ type: 'ticket.put', ticket: this.storedActive(ticket) }]);
  }

  /**
   * Removes an active ticket. A ticket that is not in the pool (never created, already cancelled, expired
   * or removed) is not in matchmaking either, so the call succeeds: a retried cancel is safe.
   */
  async cancelTicket(ticketId: string): Promise<void> {
    const match = this.resolved.get(ticketId);
    if (match) {
      throw failedPrecondition(`ticket ${ticketId} is already in committed match ${match.matchId}; the match outcome will be delivered`);
    }
    if (!this.active.delete(ticketId)) return this.store.whenDurable();
    await this.store.commit([{ type: 'ticket.delete', queueId: this.queueId, ticketId }]);
  }

  /** Returns resolved tickets to the pool with their original created_at; answers the ids that could not be. */
  async reactivateTickets(ticketIds: readonly string[]): Promise<string[]> {
    const failed: string[] = [];
    const changes: StoreChange[] = [];
    const retentionMs = this.config.terminal_retention_ttl_secs * 1000;
    const now = Date.now();
    for (const id of new Set(ticketIds)) {
      if (this.active.has(id)) continue;
      const resolved = this.resolved.get(id);
      if (!resolved || now - resolved.resolvedAtMs > retentionMs) {
        failed.push(id);
        continue;
      }
      this.resolved.delete(id);
      const input = parseTicketEngineInput(resolved.ticket.engineInput, id, 'engine_input');
      this.active.set(id, { ticket: resolved.ticket, input });
      changes.push({ type: 'ticket.put', ticket: this.storedActive(resolved.ticket) });
    }
    await (changes.length > 0 ? this.store.commit(changes) : this.store.whenDurable());
    return failed;
  }

  /** Adds the request; an open request for the same match_id is cancelled and replaced. */
  async createBackfillRequest(request: BackfillRequest, input: EngineInput): Promise<void> {
    const changes: StoreChange[] = [];
    const replaced = this.backfillByMatch.get(request.matchId);
    if (replaced !== undefined && this.removeBackfill(replaced) && replaced !== request.id) {
      changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: replaced });
    }
    // The same request id re-posted for another match moves; the put below overwrites the stored one.
    this.removeBackfill(request.id);
    this.addBackfill({ request, input });
    changes.push({
      type: 'backfill.put',
      backfill: { queueId: this.queueId, backfillId: request.id, request: toBinary(BackfillRequestSchema, request) },
    });
    await this.store.commit(changes);
  }

  /** Hard removal; answers the ids that were not active requests of this queue. */
  async cancelBackfillRequests(backfillIds: readonly string[]): Promise<string[]> {
    const failed: string[] = [];
    const changes: StoreChange[] = [];
    for (const id of new Set(backfillIds)) {
      if (!this.removeBackfill(id)) {
        failed.push(id);
        continue;
      }
      changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: id });
    }
    await (changes.length > 0 ? this.store.commit(changes) : this.store.whenDurable());
    return failed;
  }

  /** Empties the pool and the backfill requests, recording the removal outcomes in the same commit. */
  async clear(reason: RemovalReason): Promise<ClearResult> {
    const ticketIds = [...this.active.keys()];
    const backfillIds = [...this.backfills.keys()];
    this.active.clear();
    this.backfills.clear();
    this.backfillByMatch.clear();
    const chunk = this.config.outcomes.batch_chunk_size;
    const changes: StoreChange[] = [
      ...ticketIds.map((ticketId): StoreChange => ({ type: 'ticket.delete', queueId: this.queueId, ticketId })),
      ...backfillIds.map((backfillId): StoreChange => ({ type: 'backfill.delete', queueId: this.queueId, backfillId })),
      ...ticketsRemoved(this.queueId, ticketIds, reason, chunk).map((outcome): StoreChange => ({ type: 'outcome.record', outcome })),
      ...backfillRequestsRemoved(this.queueId, backfillIds, reason, chunk).map((outcome): StoreChange => ({ type: 'outcome.record', outcome })),
    ];
    await (changes.length > 0 ? this.store.commit(changes) : this.store.whenDurable());
    return { ticketsCleared: ticketIds.length, backfillRequestsCleared: backfillIds.length };
  }

  /** The queue file was deleted: refuse new writes, then remove the pool with QUEUE_RETIRED. */
  async retire(): Promise<void> {
    this.state = 'retiring';
    const result = await this.clear(RemovalReason.QUEUE_RETIRED);
    this.state = 'retired';
    this.log.info({ queue: this.queueId, ...result }, 'queue retired');
  }

  stop(): void {
    this.state = 'stopped';
  }

  private storedActive(ticket: Ticket): StoredTicket {
    return { queueId: this.queueId, ticketId: ticket.id, ticket: toBinary(TicketSchema, ticket), state: 'active' };
  }

  private addBackfill(backfill: PoolBackfill): void {
    this.backfills.set(backfill.request.id, backfill);
    this.backfillByMatch.set(backfill.request.matchId, backfill.request.id);
  }

  private removeBackfill(id: string): boolean {
    const existing = this.backfills.get(id);
    if (!existing) return false;
    this.backfills.delete(id);
    if (this.backfillByMatch.get(existing.request.matchId) === id) this.backfillByMatch.delete(existing.request.matchId);
    return true;
  }
}

