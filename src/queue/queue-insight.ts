// What a queue can tell about itself on demand (docs/explain-and-statistics.md): one ticket explained (its
// state and wait, per ruleset the bounds in force and how many tickets pass each rule, the rule the last tick
// recorded against it, an estimated time to match) and the queue's statistics (waiting tickets and players,
// recent waits and match rate, the estimated wait of a new ticket). The pool's columns answer for the present,
// the match history (match-history.ts) for the last minutes; nothing here runs in the tick.
import { fromBinary } from '@bufbuild/protobuf';
import { TicketSchema, type Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import { ticketReach, type RulesetReach } from '../engine/ticket-reach.js';
import { refusalName, type TicketRefusal } from '../engine/tick-runner.js';
import { createdAtMs, type QueueContext } from './queue-context.js';
import { estimateRemainingWait, HISTORY_WINDOW_MS, MatchHistory, waitQuantile, type WaitEstimate } from './match-history.js';
import type { Applied } from './queue-state.js';
import type { QueueRecord, RecordOf } from './records.js';

export type { WaitEstimate };

/** Where a ticket is now, for the admin views: active in the pool, or resolved into a match. */
export interface TicketLookup {
  state: 'active' | 'resolved';
  ticket: Ticket;
  matchId?: string;
  /** Resolved: when its match was committed. */
  resolvedAtMs?: number;
}

export interface RulesetExplanation extends RulesetReach {
  rulesetId: string;
  /** From the history of this ruleset alone. */
  estimate: WaitEstimate;
}

export interface TicketExplanation {
  ticketId: string;
  state: 'active' | 'resolved';
  /** Resolved: its match. */
  matchId?: string;
  createdAtMs: number;
  /** Active: until now; resolved: until its match. */
  waitMs: number;
  /** Active, with its row in the pool: per ruleset it competes in. */
  rulesets: RulesetExplanation[];
  /** The rule the last tick recorded against it, and when that tick ran; absent when none is known here. */
  lastRefusal?: { rule: TicketRefusal; atMs: number };
  /** Active: from the history of all its rulesets. */
  estimate?: WaitEstimate;
  /** Whether this copy of the queue leads it (and so ticks it): the tick-recorded `lastRefusal` is known only there. */
  leading: boolean;
  /** What the answer lacks and why, in words. */
  notes: string[];
  atMs: number;
}

export interface WaitStatistics {
  /** Empty for the whole queue. */
  rulesetId: string;
  ticketsWaiting: number;
  playersWaiting: number;
  matches: number;
  matchedTickets: number;
  matchesPerMinute: number;
  /** Waits of the tickets matched in the window; absent without any. */
  waitP50Ms?: number;
  waitP95Ms?: number;
  waitP99Ms?: number;
  /** The estimated wait of a ticket created now. */
  newTicketEstimate: WaitEstimate;
}

export interface QueueStatistics {
  /** The span the history covers: the window, or less while this process has followed the queue for less. */
  windowMs: number;
  queue: WaitStatistics;
  rulesets: WaitStatistics[];
  leading: boolean;
  notes: string[];
  atMs: number;
}

const FOLLOWER_NOTE =
  'this replica follows the queue: its pool and match history are replicated, but the tick runs on the leader, so what the tick records (the refusing rule) is known only there';

export class QueueInsight {
  private readonly history = new MatchHistory();
  /** When this process began recording (the start of its history). */
  private sinceMs: number;

  constructor(
    private readonly q: QueueContext,
    now: number = Date.now(),
  ) {
    this.sinceMs = now;
  }

  /** A record applied to the queue: a committed match's waits join the history (before its rows leave the pool). */
  applied(record: QueueRecord, applied: Applied): void {
    if (record.type !== 'match.commit' || !(applied as Applied<'match.commit'>).result.committed) return;
    const { tickets, rulesetId, atMs } = record as RecordOf<'match.commit'>;
    const pool = this.q.columns.pool;
    const waitsMs: number[] = [];
    let players = 0;
    for (const { ticketId } of tickets) {
      const row = pool.rowOf(ticketId);
      if (row !== undefined) {
        waitsMs.push(atMs - pool.arrivalMs[row]!);
        players += pool.partySize[row]!;
        continue;
      }
      // A follower's row that was never made, or a pool being rebuilt (the ticket's wait is not known here).
      const waiting = this.q.waitingTicket(ticketId);
      if (waiting === undefined) continue;
      waitsMs.push(atMs - waiting.arrivalMs);
      players += waiting.partySize;
    }
    this.history.record(rulesetId, atMs, waitsMs, players);
    this.sinceMs = Math.min(this.sinceMs, atMs);
  }

  lookup(ticketId: string): TicketLookup | undefined {
    const { state, ticketBytes } = this.q;
    const active = state.active.get(ticketId);
    if (active !== undefined) return { state: 'active', ticket: fromBinary(TicketSchema, ticketBytes(ticketId, active)) };
    const resolved = state.resolved.get(ticketId);
    return (
      resolved && {
        state: 'resolved',
        ticket: fromBinary(TicketSchema, ticketBytes(ticketId, resolved.position)),
        matchId: resolved.matchId,
        resolvedAtMs: resolved.resolvedAtMs,
      }
    );
  }

  /** The ticket explained at `nowMs`; undefined when the queue does not know it. */
  async explain(ticketId: string, nowMs: number): Promise<TicketExplanation | undefined> {
    await this.q.buildWaitingRows();
    const found = this.lookup(ticketId);
    if (!found) return undefined;
    const { config, columns, leading } = this.q;
    const pool = columns.pool;
    const row = found.state === 'active' ? pool.rowOf(ticketId) : undefined;
    const createdMs = row === undefined ? createdAtMs(found.ticket) : pool.arrivalMs[row]!;
    const base = { ticketId, state: found.state, createdAtMs: createdMs, leading, atMs: nowMs, notes: [] as string[] };
    if (found.state === 'resolved') {
      return { ...base, matchId: found.matchId, waitMs: (found.resolvedAtMs ?? nowMs) - createdMs, rulesets: [] };
    }
    const waitMs = nowMs - createdMs;
    const ids = config.rulesets.map((r) => r.id);
    const explanation: TicketExplanation = { ...base, waitMs, rulesets: [] };
    if (row === undefined) {
      explanation.notes.push('the pool is being rebuilt (a restart or a reload): per-ruleset counts are absent until it is full');
      const all = found.ticket.rulesetIds.length > 0 ? found.ticket.rulesetIds : ids;
      explanation.estimate = estimateRemainingWait(this.history.window(all, nowMs), waitMs);
      return explanation;
    }
    explanation.rulesets = ticketReach(pool, row, config, nowMs).map((reach) => {
      const rulesetId = ids[reach.rulesetIndex]!;
      return { ...reach, rulesetId, estimate: estimateRemainingWait(this.history.window([rulesetId], nowMs), waitMs) };
    });
    const mine = explanation.rulesets.map((r) => r.rulesetId);
    explanation.estimate = estimateRemainingWait(this.history.window(mine, nowMs), waitMs);
    const rule = refusalName(pool.refusal[row]!);
    if (rule !== undefined && pool.refusalsAtMs !== undefined) explanation.lastRefusal = { rule, atMs: pool.refusalsAtMs };
    else if (!leading) explanation.notes.push(FOLLOWER_NOTE);
    else if (pool.refusalsAtMs === undefined) explanation.notes.push('no tick has run over this pool yet: no refusal recorded');
    else explanation.notes.push('no tick has examined this ticket yet (it entered the pool after the last one)');
    return explanation;
  }

  async statistics(nowMs: number): Promise<QueueStatistics> {
    await this.q.buildWaitingRows();
    const { config, columns, leading } = this.q;
    const pool = columns.pool;
    const windowMs = Math.max(0, Math.min(HISTORY_WINDOW_MS, nowMs - this.sinceMs));
    const perMinute = (matches: number) => (windowMs > 0 ? (matches * 60_000) / windowMs : 0);
    const stats = (rulesetId: string, ids: readonly string[], mask: number): WaitStatistics => {
      let ticketsWaiting = 0;
      let playersWaiting = 0;
      for (let i = 0; i < pool.count; i++) {
        if ((pool.rulesetMask[i]! & mask) === 0) continue;
        ticketsWaiting++;
        playersWaiting += pool.partySize[i]!;
      }
      const history = this.history.window(ids, nowMs);
      const quantile = (q: number) => waitQuantile(history.waits, q);
      return {
        rulesetId,
        ticketsWaiting,
        playersWaiting,
        matches: history.matches,
        matchedTickets: history.tickets,
        matchesPerMinute: perMinute(history.matches),
        waitP50Ms: quantile(0.5),
        waitP95Ms: quantile(0.95),
        waitP99Ms: quantile(0.99),
        newTicketEstimate: estimateRemainingWait(history, 0),
      };
    };
    const ids = config.rulesets.map((r) => r.id);
    const notes: string[] = [];
    if (!columns.ready) notes.push('the pool is being rebuilt (a restart or a reload): the waiting counts are partial until it is full');
    if (!leading) notes.push(FOLLOWER_NOTE);
    return {
      windowMs,
      queue: stats('', ids, 0xffff_ffff),
      rulesets: ids.map((id, r) => stats(id, [id], (1 << r) >>> 0)),
      leading,
      notes,
      atMs: nowMs,
    };
  }
}
