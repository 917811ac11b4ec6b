// A queue's checkpoint (src/queue/queue-snapshot.ts, QueueState.snapshot / fromSnapshot): a state restored
// from a snapshot taken after any prefix of a record sequence applies the rest exactly as the original
// state does: the same state, the same store changes and outcomes, the same results. In process.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QueueState } from '../src/queue/queue-state.js';
import { snapshotStoreChanges, type QueueSnapshotData } from '../src/queue/queue-snapshot.js';
import type { QueueRecord } from '../src/queue/records.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { applyRecord, opArb, QUEUE, run, type Run } from './support/queue-records.js';

/** What applying records gave, compared byte for byte (changes as JSON, bytes as byte lists). */
const appliedBytes = (applied: Run['applied']) =>
  applied.map(({ applied }) => ({
    ...applied,
    changes: JSON.stringify(applied.changes, (_k, v) => (typeof v === 'bigint' ? `${v}` : v instanceof Uint8Array ? [...v] : v)),
  }));

/** What every later record can depend on: ids, positions, resolutions, backfill postings and the counters. */
const stateOf = (state: QueueState) => {
  const data = state.snapshot();
  return {
    active: data.active.map(({ ticketId, position }) => ({ ticketId, position })),
    resolved: data.resolved.map(({ ticket: _bytes, ...rest }) => rest),
    backfills: data.backfills.map((b) => ({ id: b.request.id, matchId: b.request.matchId, version: b.version })),
    nextBackfillVersion: data.nextBackfillVersion,
    nextPosition: data.nextPosition,
  };
};

/** A fresh state and store restored from `data`, as a replica starting from a checkpoint would be. */
async function restored(data: QueueSnapshotData): Promise<Run> {
  const store = new MemoryStore({ producerId: 'p' });
  await store.commit(snapshotStoreChanges(QUEUE, data));
  const bytes = new Map<string, Uint8Array>();
  const state = QueueState.fromSnapshot(
    QUEUE,
    (id, position) => store.readTicket({ queueId: QUEUE, ticketId: id, position })?.ticket ?? bytes.get(id)!,
    data,
  );
  return { state, store, applied: [], bytes };
}

/**
 * Applies records[0..k) to one state, takes a snapshot and passes it through `trip`, restores it, applies
 * records[k..n); compares with applying all n to one state.
 */
async function checkSplit(records: readonly QueueRecord[], k: number, trip: (data: QueueSnapshotData) => QueueSnapshotData) {
  const whole = await run([]);
  for (const record of records) await applyRecord(whole, record);
  const prefix = await run([]);
  for (const record of records.slice(0, k)) await applyRecord(prefix, record);
  const rest = await restored(trip(prefix.state.snapshot()));
  for (const record of records.slice(k)) await applyRecord(rest, record);
  expect(appliedBytes(rest.applied)).toEqual(appliedBytes(whole.applied.slice(k)));
  expect(stateOf(rest.state)).toEqual(stateOf(whole.state));
  expect(rest.store.loadQueue(QUEUE)).toEqual(whole.store.loadQueue(QUEUE));
}

const splitArb = fc.array(opArb, { maxLength: 60 }).chain((ops) => fc.record({ ops: fc.constant(ops), k: fc.nat({ max: ops.length }) }));

describe('a queue snapshot', () => {
  it('restores a state that applies the rest of the records exactly as the original', async () => {
    await fc.assert(
      fc.asyncProperty(splitArb, async ({ ops, k }) => {
        const records = (await run(ops)).applied.map((a) => a.record);
        await checkSplit(records, k, (data) => data);
      }),
      { numRuns: 200 },
    );
  });
});
