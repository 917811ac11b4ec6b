// A queue restored whole from a snapshot (a replica's checkpoint), then brought up to date by the records
// after it, builds its pool's rows from the snapshot's list and what those records activated
// (queue-snapshot.ts withActivated): one row for each ticket then active, in arrival order, as a pool
// built from the whole state would be, and none while the records are replayed. Random runs split anywhere,
// or replayed from the log's start; in process, on the memory store. Also
// the local store's part of a restore (commitSnapshot), over several of its slices.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { queueFileSchema } from '../../src/config/queue-config.js';
import { createLogger } from '../../src/log.js';
import type { QueueApplier, QueueHistory } from '../../src/queue/queue-history.js';
import { QueueRuntime } from '../../src/queue/queue-runtime.js';
import { commitSnapshot, inArrivalOrder, ticketRunOf, withActivated, type QueueSnapshotData } from '../../src/queue/queue-snapshot.js';
import type { QueueRecord, TicketAt } from '../../src/queue/records.js';
import type { TicketPool } from '../../src/engine/ticket-pool.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { applyRecord, freshRun, opArb, QUEUE, recordOf } from '../support/queue-records.js';
import { duelQueue, pollUntil } from '../support/queues.js';

/**
 * A history that restores `data` (none: a replica whose log has no checkpoint), applies `records` as a
 * replica replays its log, then lets the queue run; `replayed` is called between the two.
 */
function replayingHistory(
  applier: QueueApplier,
  store: MemoryStore,
  data: QueueSnapshotData | undefined,
  records: readonly QueueRecord[],
  replayed: () => void,
): QueueHistory {
  return {
    leading: false,
    begin(caughtUp) {
      void (async () => {
        if (data) {
          await commitSnapshot(store, QUEUE, data);
          applier.restore(data);
        }
        for (const record of records) {
          const applied = applier.apply(record);
          await store.commit(applied.changes);
          applier.committed([record]);
        }
        replayed();
        caughtUp();
      })();
    },
    propose: () => Promise.reject(new Error('this test proposes nothing')),
    stop: async () => undefined,
  };
}

function columnsOf(runtime: QueueRuntime): { pool: TicketPool; ready: boolean } {
  return (runtime as unknown as { columns: { pool: TicketPool; ready: boolean } }).columns;
}

/** The pool's ticket ids, row by row, once its rows are all built (undefined before). */
function rowIds(runtime: QueueRuntime): string[] | undefined {
  const columns = columnsOf(runtime);
  if (runtime.lifecycle !== 'running' || !columns.ready) return undefined;
  return Array.from({ length: columns.pool.count }, (_, row) => columns.pool.idAt(row));
}

describe('a pool restored from a snapshot', () => {
  // Without a snapshot: a replica whose log has no checkpoint replays it from the start.
  for (const from of ['a snapshot', 'the log alone'] as const) {
    it(`holds a row for each ticket active once the records after ${from} are applied, in arrival order, and none before`, async () => {
      const config = queueFileSchema.parse(parse(duelQueue(60_000))).config;
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { maxLength: 40 }), fc.nat(), async (ops, cut) => {
          // The whole run on one state: its records, and the snapshot after the first k.
          const whole = freshRun();
          const records: QueueRecord[] = [];
          let data: QueueSnapshotData | undefined;
          const k = from === 'a snapshot' ? cut % (ops.length + 1) : 0;
          for (const [i, op] of ops.entries()) {
            if (i === k) data = whole.state.snapshot();
            const record = recordOf(op, whole.state, i);
            records.push(record);
            await applyRecord(whole, record);
          }
          data ??= whole.state.snapshot();
          const store = new MemoryStore({ producerId: 'p' });
          // Rows made while the replay runs would be thrown away by the rebuild at `running`: none is made.
          let rowsDuringReplay = -1;
          const runtime = new QueueRuntime(QUEUE, config, store, createLogger('silent'), (_id, applier) =>
            replayingHistory(applier, store, from === 'a snapshot' ? data : undefined, records.slice(k), () => {
              rowsDuringReplay = columnsOf(runtime).pool.count;
            }),
          );
          runtime.start();
          try {
            const expected = whole.state.activeInArrivalOrder().map((t) => t.ticketId);
            expect(
              await pollUntil(
                async () => rowIds(runtime),
                (ids) => ids !== undefined,
                5_000,
                5,
              ),
            ).toEqual(expected);
            expect(rowsDuringReplay).toBe(0);
          } finally {
            await runtime.stop();
          }
        }),
        { numRuns: 60 },
      );
    });
  }
});

describe('commitSnapshot', () => {
  it('gives the store every ticket of the snapshot, active and resolved, across its slices', async () => {
    const bytesOf = (position: number) => new Uint8Array([position & 255, position >> 8]);
    const active = Array.from({ length: 25_003 }, (_, i) => ({ ticketId: `a${i}`, position: 2 * i + 1, ticket: bytesOf(2 * i + 1) }));
    const resolved = Array.from({ length: 10_007 }, (_, i) => ({
      ticketId: `r${i}`,
      position: 2 * i + 2,
      ticket: bytesOf(2 * i + 2),
      matchId: `m${i}`,
      resolvedAtMs: i,
    }));
    const store = new MemoryStore({ producerId: 'p' });
    await commitSnapshot(store, QUEUE, {
      active: ticketRunOf(active),
      resolved,
      backfills: [],
      nextBackfillVersion: 1,
      nextPosition: 60_000,
    });
    const { tickets } = store.loadQueue(QUEUE);
    expect(tickets).toEqual(
      [
        ...active.map(({ ticketId, position }) => ({ queueId: QUEUE, ticketId, position, state: 'active' })),
        ...resolved.map(({ ticket: _bytes, ...r }) => ({ queueId: QUEUE, ...r, state: 'resolved' })),
      ].sort((a, b) => a.position - b.position),
    );
    for (const t of [...active, ...resolved]) expect(store.readTicket({ queueId: QUEUE, ...t })?.ticket).toEqual(t.ticket);
  });
});

describe('withActivated', () => {
  it('merges the restored list and the tickets activated since by position, each position once', () => {
    const at = (position: number): TicketAt => ({ ticketId: `t${position}`, position });
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 200 }), { maxLength: 40 }),
        fc.array(fc.integer({ min: 1, max: 300 }), { maxLength: 40 }),
        (restored, activated) => {
          const restoredList = [...restored].sort((a, b) => a - b).map(at);
          const order = withActivated(inArrivalOrder(restoredList), activated.map(at));
          const merged = Array.from({ length: order.length }, (_, k) => ({ ticketId: order.ticketId(k), position: order.position(k) }));
          expect(merged.map((t) => t.ticketId)).toEqual(merged.map((t) => `t${t.position}`));
          expect(merged.map((t) => t.position)).toEqual([...new Set([...restored, ...activated])].sort((a, b) => a - b));
        },
      ),
    );
  });
});
