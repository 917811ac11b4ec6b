// QueueState.apply, the one function that changes a queue (src/queue/queue-state.ts), under random record
// sequences: it is deterministic (the same records give the same changes and outcomes, byte for byte), it
// keeps the state machine's invariants, and the store changes it emits, committed in order, rebuild exactly
// the state it holds. In process, on the memory store: milliseconds per run.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueState } from '../../src/queue/queue-state.js';
import { opArb, outcomesOf, QUEUE, run, type Run } from '../support/queue-records.js';

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
