// Random record sequences for QueueState.apply (src/queue/queue-state.ts): ops a test asks for, the record
// each makes against the state as it is then, and a driver that applies them in order to a fresh state,
// committing each record's changes to a memory store. Shared by the state machine's tests and the log
// codec's, which applies the same records after a trip through the wire form.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { BackfillRequestSchema, TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { OutcomeSchema, RemovalReason } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { ticketsOf, type QueueSnapshotData } from '../../src/queue/queue-snapshot.js';
import { QueueState, type Applied } from '../../src/queue/queue-state.js';
import type { QueueRecord, TicketAt } from '../../src/queue/records.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { StoreChange } from '../../src/store/store.js';
import { engineInput } from './fixtures.js';

export const QUEUE = 'state.q';

/** Snapshot data with its active tickets listed, to compare (a run reads its tickets through functions). */
export const listed = (data: QueueSnapshotData) => ({ ...data, active: ticketsOf(data.active) });
const IDS = Array.from({ length: 6 }, (_, i) => `00000000-0000-4000-8000-00000000000${i}`);
const MATCHES = Array.from({ length: 4 }, (_, i) => `10000000-0000-4000-8000-00000000000${i}`);
const INPUT = engineInput({ players: [{ playerId: 'p', mmr: 0.5 }] });
export const ticketBytes = (id: string) => toBinary(TicketSchema, create(TicketSchema, { id, queueId: QUEUE, engineInput: INPUT }));

/** What a test asks for; turned into a record against the state as it is then (positions seen, or stale ones). */
export type Op =
  | { op: 'create'; id: number }
  | { op: 'cancel'; id: number }
  | { op: 'reactivate'; ids: number[]; sinceMs: number }
  | { op: 'match'; ids: number[]; stale: boolean; match: number; atMs: number }
  | { op: 'expire'; ids: number[]; atMs: number }
  | { op: 'evict'; ids: number[]; orphan: boolean; atMs: number }
  | { op: 'forget'; ids: number[] }
  | { op: 'clear'; atMs: number }
  | { op: 'backfill'; match: number; slots: number }
  | { op: 'fill'; match: number; ids: number[]; atMs: number }
  | { op: 'cancelBackfills'; match: number };

const idx = fc.nat({ max: IDS.length - 1 });
const some = fc.uniqueArray(idx, { minLength: 1, maxLength: 3 });
const at = fc.integer({ min: 1, max: 100 });
export const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('create' as const), id: idx }) },
  fc.record({ op: fc.constant('cancel' as const), id: idx }),
  fc.record({ op: fc.constant('reactivate' as const), ids: some, sinceMs: at }),
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('match' as const), ids: some, stale: fc.boolean(), match: fc.nat({ max: 3 }), atMs: at }),
  },
  fc.record({ op: fc.constant('expire' as const), ids: some, atMs: at }),
  fc.record({ op: fc.constant('evict' as const), ids: some, orphan: fc.boolean(), atMs: at }),
  fc.record({ op: fc.constant('forget' as const), ids: some }),
  fc.record({ op: fc.constant('clear' as const), atMs: at }),
  fc.record({ op: fc.constant('backfill' as const), match: fc.nat({ max: 3 }), slots: fc.nat({ max: 3 }) }),
  fc.record({ op: fc.constant('fill' as const), match: fc.nat({ max: 3 }), ids: some, atMs: at }),
  fc.record({ op: fc.constant('cancelBackfills' as const), match: fc.nat({ max: 3 }) }),
);

/** The record an op makes against `state`; operation ids come from the op's place in the run, so runs repeat. */
export function recordOf(op: Op, state: QueueState, step: number): QueueRecord {
  const operationId = `op-${step}`;
  const seen = (ids: number[], stale = false): TicketAt[] =>
    ids.map((i) => ({ ticketId: IDS[i]!, position: (state.active.get(IDS[i]!) ?? 999) + (stale ? 1000 : 0) }));
  switch (op.op) {
    case 'create':
      return { type: 'ticket.create', ticketId: IDS[op.id]!, ticket: ticketBytes(IDS[op.id]!) };
    case 'cancel':
      return { type: 'ticket.cancel', ticketId: IDS[op.id]! };
    case 'reactivate':
      return { type: 'tickets.reactivate', ticketIds: op.ids.map((i) => IDS[i]!), resolvedSinceMs: op.sinceMs };
    case 'match':
      return {
        type: 'match.commit',
        matchId: `${MATCHES[op.match]!}-${step}`,
        tickets: seen(op.ids, op.stale),
        rulesetId: 'r',
        engineOutput: new Uint8Array([step]),
        atMs: op.atMs,
      };
    case 'expire':
      return { type: 'tickets.expire', tickets: seen(op.ids), atMs: op.atMs, operationId, chunkSize: 2 };
    case 'evict':
      return {
        type: 'tickets.evict',
        evictions: seen(op.ids).map((t) => ({
          ...t,
          eviction: op.orphan
            ? { kind: 'orphaned' as const, rulesetId: 'gone' }
            : { kind: 'removed' as const, reason: RemovalReason.RULESET_PARAMS_CHANGED },
        })),
        atMs: op.atMs,
        operationId,
        chunkSize: 2,
      };
    case 'forget':
      return {
        type: 'resolved.forget',
        tickets: op.ids.map((i) => ({ ticketId: IDS[i]!, matchId: state.resolved.get(IDS[i]!)?.matchId ?? '' })),
      };
    case 'clear':
      return { type: 'pool.clear', reason: RemovalReason.CLEAR_COMMAND, atMs: op.atMs, operationId, chunkSize: 2 };
    case 'backfill':
      return {
        type: 'backfill.create',
        request: create(BackfillRequestSchema, {
          id: `b-${step}`,
          queueId: QUEUE,
          matchId: MATCHES[op.match]!,
          rulesetId: 'r',
          slotsRequested: op.slots,
        }),
      };
    case 'fill': {
      const backfillId = state.backfills.forMatch(MATCHES[op.match]!) ?? 'none';
      const version = state.backfills.get(backfillId)?.version ?? 0;
      return { type: 'backfill.fill', backfill: { backfillId, version }, fillId: `fill-${step}`, tickets: seen(op.ids), atMs: op.atMs };
    }
    case 'cancelBackfills':
      return { type: 'backfills.cancel', backfillIds: [state.backfills.forMatch(MATCHES[op.match]!) ?? 'none'] };
  }
}

export interface Run {
  state: QueueState;
  store: MemoryStore;
  applied: { record: QueueRecord; applied: Applied; before: { active: Map<string, number>; resolved: Set<string> } }[];
  /** Ticket bytes by id, for the reader before a ticket's commit is applied. */
  bytes: Map<string, Uint8Array>;
}

/** A fresh state on a fresh memory store; its ticket reader also sees tickets not yet committed. */
export function freshRun(): Run {
  const store = new MemoryStore({ producerId: 'p' });
  const bytes = new Map<string, Uint8Array>();
  const state = new QueueState(
    QUEUE,
    (id, position) => store.readTicket({ queueId: QUEUE, ticketId: id, position })?.ticket ?? bytes.get(id)!,
  );
  return { state, store, applied: [], bytes };
}

/** Applies one record and commits its changes. */
export async function applyRecord(r: Run, record: QueueRecord): Promise<void> {
  const { state, store } = r;
  if (record.type === 'ticket.create') r.bytes.set(record.ticketId, record.ticket);
  const before = { active: new Map(state.active), resolved: new Set(Array.from(state.resolved, ([id]) => id)) };
  const result = state.apply(record);
  r.applied.push({ record, applied: result, before });
  if (result.changes.length > 0) await store.commit(result.changes);
}

/** Applies the ops in order to a fresh state, committing each record's changes to a memory store. */
export async function run(ops: Op[]): Promise<Run> {
  const r = freshRun();
  for (const [step, op] of ops.entries()) await applyRecord(r, recordOf(op, r.state, step));
  return r;
}

export const outcomesOf = (changes: readonly StoreChange[]) =>
  changes.flatMap((c) => (c.type === 'outcome.record' ? [fromBinary(OutcomeSchema, c.outcome.bytes)] : []));
