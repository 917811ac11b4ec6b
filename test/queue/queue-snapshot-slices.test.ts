// QueueState.snapshotInSlices (what a replicated leader's checkpoint reads, src/queue/queue-snapshot.ts):
// the same data as the synchronous snapshot, active tickets in position order, whatever the positions
// (the packed sort and its fallback) and however many slices the bytes take. In process.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ticketsOf } from '../../src/queue/queue-snapshot.js';
import { QueueState } from '../../src/queue/queue-state.js';
import { listed } from '../support/queue-records.js';

/** A state holding the given tickets (active or resolved), each with bytes naming it. */
function stateOf(tickets: { id: string; position: number; resolved: boolean }[]): QueueState {
  const bytes = new Map(tickets.map((t) => [t.id, new TextEncoder().encode(`${t.id}@${t.position}`)]));
  const state = new QueueState('q', (id) => bytes.get(id)!);
  for (const t of tickets) {
    if (t.resolved) state.resolved.set(t.id, { position: t.position, matchId: `m-${t.id}`, resolvedAtMs: t.position });
    else state.active.set(t.id, t.position);
  }
  return state;
}

const ticketsArb = (maxPosition: number) =>
  fc
    .uniqueArray(fc.integer({ min: 1, max: maxPosition }), { maxLength: 300 })
    .chain((positions) =>
      fc.tuple(fc.constant(positions), fc.array(fc.boolean(), { minLength: positions.length, maxLength: positions.length })),
    )
    .map(([positions, resolved]) => positions.map((position, i) => ({ id: `t${i}`, position, resolved: resolved[i]! })));

describe('a snapshot read in slices', () => {
  it('equals the synchronous one, with active tickets in position order (small and huge positions)', async () => {
    for (const maxPosition of [1_000, Number.MAX_SAFE_INTEGER]) {
      await fc.assert(
        fc.asyncProperty(ticketsArb(maxPosition), async (tickets) => {
          const state = stateOf(tickets);
          const sliced = await state.snapshotInSlices();
          expect(listed(sliced)).toEqual(listed(state.snapshot()));
          const positions = ticketsOf(sliced.active).map((t) => t.position);
          expect(positions).toEqual([...positions].sort((a, b) => a - b));
          expect(positions).toEqual(
            tickets
              .filter((t) => !t.resolved)
              .map((t) => t.position)
              .sort((a, b) => a - b),
          );
          for (const t of [...ticketsOf(sliced.active), ...sliced.resolved])
            expect(new TextDecoder().decode(t.ticket)).toBe(`${t.ticketId}@${t.position}`);
        }),
        { numRuns: 100 },
      );
    }
  });

  it('reads a large queue over several turns of the event loop', async () => {
    const n = 200_000;
    const state = stateOf(Array.from({ length: n }, (_, i) => ({ id: `t${i}`, position: n - i, resolved: i % 4 === 0 })));
    let turns = 0;
    const counting = setInterval(() => turns++, 0);
    const sliced = await state.snapshotInSlices();
    clearInterval(counting);
    expect(sliced.active).toHaveLength(n * 0.75);
    expect(sliced.resolved).toHaveLength(n * 0.25);
    expect(sliced.active.position(0)).toBe(1);
    expect(turns).toBeGreaterThan(0);
  });
});
