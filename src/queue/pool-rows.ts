// Which rows a running queue's pool gets, and when: a request's row is prepared against the pool before its
// record is applied (prepared-rows.ts); the row of a ticket a record activated goes in at once while this
// copy leads the queue or has that row prepared, and later otherwise (waiting-rows.ts); the rows of tickets
// that left go.
// (While the queue starts, no row is made: queue-runtime.ts lists what to build once it runs.)
import type { Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import { parseTicketEngineInput, partySizeOf, type ParsedEngineInput } from '../engine/engine-input.js';
import type { PoolRow } from '../engine/ticket-pool.js';
import { poolFieldsOf, waitFieldsOf } from '../store/ticket-encoding.js';
import { PreparedRows } from './prepared-rows.js';
import { createdAtMs, type QueueContext } from './queue-context.js';
import type { Applied } from './queue-state.js';
import type { TicketAt } from './records.js';
import { WaitingRows } from './waiting-rows.js';

/** What the rows need of the queue's runtime. */
type RowSource = Pick<QueueContext, 'queueId' | 'log' | 'state' | 'leading' | 'columns' | 'lendTicketBytes'>;

export class PoolRows {
  /** Rows requests prepared for records not yet applied, each holding its values in the pool's tables. */
  readonly prepared = new PreparedRows();
  /** The rows of tickets this copy applied while following, not made yet. */
  private readonly waiting = new WaitingRows((at) => this.insert(at));

  constructor(private readonly q: RowSource) {}

  /**
   * Before `prepare`: the tables' limits count the values of every active ticket, and a follower's tables lack
   * those its waiting rows will hold, so a value new to them may not be new to the queue. Then the waiting rows
   * are made first, in slices: the promise of that, else undefined.
   */
  readyFor(input: ParsedEngineInput): Promise<void> | undefined {
    return this.waitsFor(input) ? this.waiting.buildAllInSlices() : undefined;
  }

  /** Whether rows wait and the tables lack one of `input`'s values (`readyFor`). */
  private waitsFor(input: ParsedEngineInput): boolean {
    return this.waiting.size > 0 && !this.q.columns.pool.holdsValuesOf(input);
  }

  /** A request's row for a ticket, prepared against the current pool before its record is applied (after `readyFor`). */
  prepare(ticketId: string, ticket: Ticket, input: ParsedEngineInput): PoolRow {
    // Rows that began to wait since `readyFor` (a few at most) are made at once, for the same reason.
    if (this.waitsFor(input)) this.waiting.buildAll();
    const pool = this.q.columns.pool;
    const row = pool.prepare(input, ticket.rulesetIds, createdAtMs(ticket));
    this.prepared.add(ticketId, pool, row);
    return row;
  }

  /** A record applied while the queue runs: the rows of the tickets it deactivated go, those it activated come. */
  follow(applied: Applied): void {
    const { deactivated, activated } = applied;
    const waiting = this.waiting;
    if (deactivated.length > 0) this.q.columns.remove(waiting.size > 0 ? deactivated.filter((id) => !waiting.drop(id)) : deactivated);
    const leading = this.q.leading;
    // A row this copy's request prepared is made already: it goes in, following or not.
    for (const at of activated) {
      if (leading || this.prepared.has(at.ticketId)) this.insert(at);
      else waiting.add(at);
    }
  }

  /** Makes the rows that wait, in slices: before anything reads the pool whole (QueueContext.buildWaitingRows). */
  buildWaiting(): Promise<void> {
    return this.waiting.buildAllInSlices();
  }

  /** The pool is rebuilt from every active ticket: no row waits any longer. */
  forgetWaiting(): void {
    this.waiting.clear();
  }

  /** QueueContext.waitingTicket: what the match history needs of a ticket whose row waits, from its bytes. */
  waitingTicket(ticketId: string): { arrivalMs: number; partySize: number } | undefined {
    const position = this.waiting.positionOf(ticketId);
    if (position === undefined) return undefined;
    const bytes = this.q.lendTicketBytes(ticketId, position);
    const ticket = waitFieldsOf(bytes) ?? poolFieldsOf(bytes);
    const partySize = partySizeOf(ticket.engineInput);
    return partySize === undefined ? undefined : { arrivalMs: createdAtMs(ticket), partySize };
  }

  /** A ticket a record activated goes into the pool: with the row its request prepared, else built from its bytes. */
  private insert(at: TicketAt): void {
    const stillActive = () => this.q.state.isActiveAt(at);
    const prepared = this.prepared.take(at.ticketId);
    if (prepared) {
      this.q.columns.insert(prepared.pool, at.ticketId, prepared.row, stillActive);
      return;
    }
    const pool = this.q.columns.pool;
    const ticket = poolFieldsOf(this.q.lendTicketBytes(at.ticketId, at.position));
    try {
      const input = parseTicketEngineInput(ticket.engineInput, at.ticketId, 'engine_input');
      this.q.columns.insert(pool, at.ticketId, pool.prepare(input, ticket.rulesetIds, createdAtMs(ticket)), stillActive);
    } catch (err) {
      this.q.log.error(
        { queue: this.q.queueId, ticket: at.ticketId, err: (err as Error).message },
        'ticket does not fit the pool; it stays stored but cannot match',
      );
    }
  }
}
