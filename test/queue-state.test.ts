// QueueState.apply, the one function that changes a queue (src/queue/queue-state.ts), under random record
// sequences: it is deterministic (the same records give the same changes and outcomes, byte for byte), it
// keeps the state machine's invariants, and the store changes it emits, committed in order, rebuild exactly
// the state it holds. In process, on the memory store: milliseconds per run.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BackfillRequestSchema, TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { OutcomeSchema, RemovalReason } from '../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { QueueState, type Applied } from '../src/queue/queue-state.js';
import type { QueueRecord, TicketAt } from '../src/queue/records.js';
import { MemoryStore } from '../src/store/memory-store.js';
import type { StoreChange } from '../src/store/store.js';
import { engineInput } from './support/fixtures.js';

const QUEUE = 'state.q';
const IDS = Array.from({ length: 6 }, (_, i) => `00000000-0000-4000-8000-00000000000${i}`);
const MATCHES = Array.from({ length: 4 }, (_, i) => `10000000-0000-4000-8000-00000000000${i}`);
const INPUT = engineInput({ players: [{ playerId: 'p', mmr: 0.5 }] });
const ticketBytes = (id: string) => toBinary(TicketSchema, create(TicketSchema, { id, queueId: QUEUE, engineInput: INPUT }));

/** What a test asks for; turned into a record against the state as it is then (positions seen, or stale ones). */
type Op =
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
const opArb: fc.Arbitrary<Op> = fc.oneof(
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
function recordOf(op: Op, state: QueueState, step: number): QueueRecord {
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

interface Run {
  state: QueueState;
  store: MemoryStore;
  applied: { record: QueueRecord; applied: Applied; before: { active: Map<string, number>; resolved: Set<string> } }[];
}

/** Applies the ops in order to a fresh state, committing each record's changes to a memory store. */
async function run(ops: Op[]): Promise<Run> {
  const store = new MemoryStore({ producerId: 'p' });
  const bytes = new Map<string, Uint8Array>();
  const state = new QueueState(
    QUEUE,
    (id, position) => store.readTicket({ queueId: QUEUE, ticketId: id, position })?.ticket ?? bytes.get(id)!,
  );
  const applied: Run['applied'] = [];
  for (const [step, op] of ops.entries()) {
    const record = recordOf(op, state, step);
    if (record.type === 'ticket.create') bytes.set(record.ticketId, record.ticket);
    const before = { active: new Map(state.active), resolved: new Set(Array.from(state.resolved, ([id]) => id)) };
    const result = state.apply(record);
    applied.push({ record, applied: result, before });
    if (result.changes.length > 0) await store.commit(result.changes);
  }
  return { state, store, applied };
}

const outcomesOf = (changes: readonly StoreChange[]) =>
  changes.flatMap((c) => (c.type === 'outcome.record' ? [fromBinary(OutcomeSchema, c.outcome.bytes)] : []));

describe('QueueState.apply', () => {
  it('is deterministic: the same records give the same changes and outcomes, byte for byte', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 40 }), async (ops) => {
        const [a, b] = [await run(ops), await run(ops)];
        const bytesOf = (r: Run) =>
          r.applied.map(({ applied }) => ({
            ...applied,
            changes: JSON.stringify(applied.changes, (_k, v) => (typeof v === 'bigint' ? `${v}` : v)),
          }));
        expect(bytesOf(a)).toEqual(bytesOf(b));
      }),
      { numRuns: 150 },
    );
  });

  it('keeps the lifecycle invariants: active and resolved apart, a match only of active tickets, a failed cancel only for resolved ones', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 60 }), async (ops) => {
        const { state, applied } = await run(ops);
        for (const [id] of state.active) expect(state.resolved.has(id)).toBe(false);
        for (const { record, applied: result, before } of applied) {
          if (record.type === 'match.commit') {
            const allActive = record.tickets.every((t) => before.active.get(t.ticketId) === t.position);
            expect(result.result).toEqual({ committed: allActive });
            expect(outcomesOf(result.changes).map((o) => o.kind)).toEqual(allActive ? ['match.created'] : []);
          }
          if (record.type === 'ticket.cancel') {
            const inMatch = before.resolved.has(record.ticketId);
            expect((result.result as { matchId?: string }).matchId !== undefined).toBe(inMatch);
            if (!inMatch) expect(result.deactivated).toEqual(before.active.has(record.ticketId) ? [record.ticketId] : []);
          }
          if (record.type === 'ticket.create') {
            const known = before.active.has(record.ticketId) || before.resolved.has(record.ticketId);
            expect(result.result).toEqual({ created: !known });
          }
          // What leaves the pool was in it; what enters was not.
          for (const id of result.deactivated) expect(before.active.has(id)).toBe(true);
          for (const t of result.activated) expect(before.active.has(t.ticketId)).toBe(false);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('never resolves a ticket into two matches without a reactivation between, and gives every outcome its own id', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 60 }), async (ops) => {
        const { applied } = await run(ops);
        const matchOf = new Map<string, string>();
        const outcomeIds = new Set<string>();
        for (const { record, applied: result } of applied) {
          for (const change of result.changes) {
            if (change.type === 'ticket.resolve') {
              expect(matchOf.has(change.ref.ticketId)).toBe(false);
              matchOf.set(change.ref.ticketId, change.matchId);
            }
            if (change.type === 'ticket.reactivate' || change.type === 'ticket.delete') matchOf.delete(change.ref.ticketId);
          }
          for (const outcome of outcomesOf(result.changes)) {
            expect(outcomeIds.has(outcome.id)).toBe(false);
            outcomeIds.add(outcome.id);
          }
          if (record.type === 'ticket.create') matchOf.delete(record.ticketId);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('emits store changes that rebuild exactly the state it holds', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 60 }), async (ops) => {
        const { state, store } = await run(ops);
        const restored = new QueueState(QUEUE, () => new Uint8Array());
        restored.restore(store.loadQueue(QUEUE));
        expect(new Map(restored.active)).toEqual(new Map(state.active));
        expect(new Map(restored.resolved)).toEqual(new Map(state.resolved));
        expect(restored.backfills.ids().sort()).toEqual(state.backfills.ids().sort());
      }),
      { numRuns: 150 },
    );
  });
});
