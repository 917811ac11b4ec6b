// What a queue reports as it runs, for /metrics and the dashboard (src/api implements it). Counts come
// from the copy of the queue that leads it (always, embedded), so adding every replica's numbers counts
// each event once; a change of leader can drop or repeat the few events around the handover.
import { RemovalReason } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { Applied } from './queue-state.js';
import type { QueueRecord } from './records.js';

/** Why tickets left the pool other than by a match: the spec's removal reasons, `cancelled`, `expired`, `orphaned`. */
export type TicketExit = 'cancelled' | 'expired' | 'orphaned' | Lowercase<keyof typeof RemovalReason>;

/** A match the tick formed and committed. Skill units are those of the ruleset's bounds (÷ mmr_normalization_ref). */
export interface MatchFacts {
  queueId: string;
  rulesetId: string;
  matchId: string;
  atMs: number;
  /** Per ticket: from its creation to the match. */
  waitsMs: number[];
  players: number;
  skillSpread: number;
  teamImbalance: number;
  /** The preferred host's key; undefined when the match has none. */
  host: string | undefined;
  /** Player ids per team, in team order. */
  teams: string[][];
}

/** Candidate matches a ruleset's rule refused during one tick (the engine's counts). */
export interface RuleRejections {
  rulesetId: string;
  rule: string;
  count: number;
}

export interface TickFacts {
  queueId: string;
  /** From the tick's start until its last match was committed. */
  tickMs: number;
  /** The engine's run over the pool, as the tick waited for it. */
  engineMs: number;
  ticketsExamined: number;
  rejections: RuleRejections[];
}

export interface QueueTelemetry {
  ticketsCreated(queueId: string, count: number): void;
  ticketsLeft(queueId: string, exit: TicketExit, count: number): void;
  /** A backfill request of the ruleset was filled with `players` players. */
  backfillFilled(queueId: string, rulesetId: string, players: number): void;
  matchFormed(match: MatchFacts): void;
  tick(tick: TickFacts): void;
}

/** Reports nowhere: tests and tools that run queues without a service. */
export const noTelemetry: QueueTelemetry = {
  ticketsCreated() {},
  ticketsLeft() {},
  backfillFilled() {},
  matchFormed() {},
  tick() {},
};

/** Reports to each of `telemetries`, in order. */
export function fanOut(...telemetries: QueueTelemetry[]): QueueTelemetry {
  const each =
    <K extends keyof QueueTelemetry>(key: K) =>
    (...args: Parameters<QueueTelemetry[K]>) => {
      for (const t of telemetries) (t[key] as (...a: Parameters<QueueTelemetry[K]>) => void)(...args);
    };
  return {
    ticketsCreated: each('ticketsCreated'),
    ticketsLeft: each('ticketsLeft'),
    backfillFilled: each('backfillFilled'),
    matchFormed: each('matchFormed'),
    tick: each('tick'),
  };
}

const exitOf = (reason: RemovalReason) => RemovalReason[reason].toLowerCase() as TicketExit;

/** The tickets a record brought into the queue or took out of the pool other than by a match. */
export function reportExits(queueId: string, record: QueueRecord, applied: Applied, telemetry: QueueTelemetry): void {
  const left = applied.deactivated.length;
  switch (record.type) {
    case 'ticket.create':
      if (applied.activated.length > 0) telemetry.ticketsCreated(queueId, 1);
      return;
    case 'ticket.cancel':
      if (left > 0) telemetry.ticketsLeft(queueId, 'cancelled', left);
      return;
    case 'tickets.expire':
      if (left > 0) telemetry.ticketsLeft(queueId, 'expired', left);
      return;
    case 'pool.clear':
      if (left > 0) telemetry.ticketsLeft(queueId, exitOf(record.reason), left);
      return;
    case 'tickets.evict': {
      const gone = new Set(applied.deactivated);
      const counts = new Map<TicketExit, number>();
      for (const { ticketId, eviction } of record.evictions) {
        if (!gone.has(ticketId)) continue;
        const exit = eviction.kind === 'orphaned' ? 'orphaned' : exitOf(eviction.reason);
        counts.set(exit, (counts.get(exit) ?? 0) + 1);
      }
      for (const [exit, count] of counts) telemetry.ticketsLeft(queueId, exit, count);
      return;
    }
    default:
      return;
  }
}
