// A copy of a queue that follows (a replica that does not lead it) makes its pool rows late
// (src/queue/waiting-rows.ts): none for a ticket that leaves first, the oldest once too many wait, all of
// them before the pool is read whole. Here: the waiting list against a model; a following queue against a
// leading one applying the same random records (the same pool once read, the same statistics and explain
// reach); and a follower that takes the lead matching tickets whose rows waited. In process, memory store.
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { queueFileSchema } from '../../src/config/queue-config.js';
import { parseTicketEngineInput } from '../../src/engine/engine-input.js';
import type { TicketPool } from '../../src/engine/ticket-pool.js';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { createLogger } from '../../src/log.js';
import type { MatchHistory } from '../../src/queue/match-history.js';
import type { QueueApplier, QueueHistory } from '../../src/queue/queue-history.js';
import { QueueRuntime } from '../../src/queue/queue-runtime.js';
import type { QueueRecord, TicketAt } from '../../src/queue/records.js';
import { WaitingRows } from '../../src/queue/waiting-rows.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { engineInput } from '../support/fixtures.js';
import { applyRecord, freshRun, opArb, QUEUE, recordOf, type Op } from '../support/queue-records.js';
import { duelQueue, pollUntil } from '../support/queues.js';

describe('WaitingRows', () => {
  type Step = { add: number } | { drop: number } | { buildAll: boolean } | { clear: true };
  const stepArb: fc.Arbitrary<Step> = fc.oneof(
    { weight: 5, arbitrary: fc.record({ add: fc.nat({ max: 9 }) }) },
    { weight: 3, arbitrary: fc.record({ drop: fc.nat({ max: 9 }) }) },
    // true: in slices (buildAllInSlices), false: at once (buildAll).
    fc.record({ buildAll: fc.boolean() }),
    fc.record({ clear: fc.constant(true as const) }),
  );

  it('makes each ticket that stays its row once, the oldest first when more than its bound wait, and none for one that left', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArb, { maxLength: 80 }), fc.integer({ min: 1, max: 4 }), async (steps, most) => {
        const built: TicketAt[] = [];
        const rows = new WaitingRows((at) => built.push(at), most);
        // The model: what waits, oldest first; what has a row.
        let waiting: TicketAt[] = [];
        const withRow = new Set<string>();
        let position = 0;
        for (const step of steps) {
          const seen = built.length;
          if ('add' in step) {
            const id = `t${step.add}`;
            // A ticket is activated only while it is not active: one that waits or has a row leaves first.
            if (waiting.some((t) => t.ticketId === id) || withRow.has(id)) continue;
            const at = { ticketId: id, position: ++position };
            rows.add(at);
            waiting.push(at);
            const over = waiting.length - most;
            if (over > 0) {
              expect(built.slice(seen)).toEqual(waiting.slice(0, over));
              waiting = waiting.slice(over);
            } else expect(built.length).toBe(seen);
          } else if ('drop' in step) {
            const id = `t${step.drop}`;
            expect(rows.drop(id)).toBe(waiting.some((t) => t.ticketId === id));
            waiting = waiting.filter((t) => t.ticketId !== id);
            withRow.delete(id);
          } else if ('buildAll' in step) {
            if (step.buildAll) await rows.buildAllInSlices();
            else rows.buildAll();
            expect(built.slice(seen)).toEqual(waiting);
            waiting = [];
          } else {
            rows.clear();
            // The pool is rebuilt: every active ticket gets its row there.
            for (const t of waiting) withRow.add(t.ticketId);
            waiting = [];
          }
          for (const at of built.slice(seen)) withRow.add(at.ticketId);
          expect(rows.size).toBe(waiting.length);
          expect(rows.size).toBeLessThanOrEqual(most);
          for (const t of waiting) expect(rows.positionOf(t.ticketId)).toBe(t.position);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('makes the rows in slices that let the event loop run, one pass for every caller, the rows added meanwhile included', async () => {
    const built: string[] = [];
    // About half a millisecond a row: a 2 ms slice makes a few.
    const rows = new WaitingRows((at) => {
      const until = performance.now() + 0.5;
      while (performance.now() < until);
      built.push(at.ticketId);
    }, 1_000);
    const ids = Array.from({ length: 30 }, (_, i) => `t${i}`);
    for (const [i, id] of ids.slice(0, 20).entries()) rows.add({ ticketId: id, position: i + 1 });
    const pass = rows.buildAllInSlices();
    expect(rows.buildAllInSlices()).toBe(pass);
    let turns = 0;
    const addMore = new Promise<void>((resolve) =>
      setImmediate(() => {
        turns++;
        for (const [i, id] of ids.slice(20).entries()) rows.add({ ticketId: id, position: 21 + i });
        resolve();
      }),
    );
    await pass;
    await addMore;
    expect(turns).toBe(1);
    expect(built).toEqual(ids);
    expect(rows.size).toBe(0);
    // The pass is over: the next call makes another.
    rows.add({ ticketId: 'late', position: 31 });
    const next = rows.buildAllInSlices();
    expect(next).not.toBe(pass);
    await next;
    expect(built.at(-1)).toBe('late');
  });
});

/** A history that applies what it is given and whose leadership the test sets. */
class SteeredHistory implements QueueHistory {
  leading: boolean;
  constructor(
    readonly applier: QueueApplier,
    private readonly store: MemoryStore,
    leading: boolean,
  ) {
    this.leading = leading;
  }
  begin(caughtUp: () => void): void {
    caughtUp();
  }
  /** Another copy's record, as the log delivers it. */
  async deliver(record: QueueRecord): Promise<void> {
    const applied = this.applier.apply(record);
    await this.store.commit(applied.changes);
    this.applier.committed([record]);
  }
  async propose<R extends QueueRecord>(records: readonly R[]) {
    const applied = records.map((r) => this.applier.apply(r));
    await this.store.commit(applied.flatMap((a) => a.changes));
    this.applier.committed(records);
    return applied as never;
  }
  async stop(): Promise<void> {}
}

function steered(queueFile: string, leading: boolean): { runtime: QueueRuntime; history: SteeredHistory } {
  const config = queueFileSchema.parse(parse(queueFile)).config;
  const store = new MemoryStore({ producerId: 'p' });
  let history: SteeredHistory | undefined;
  const runtime = new QueueRuntime(QUEUE, config, store, createLogger('silent'), (_id, applier) => {
    history = new SteeredHistory(applier, store, leading);
    return history;
  });
  runtime.start();
  return { runtime, history: history! };
}

const historyOf = (runtime: QueueRuntime) => (runtime.insight as unknown as { history: MatchHistory }).history;
const poolOf = (runtime: QueueRuntime) => (runtime as unknown as { columns: { pool: TicketPool } }).columns.pool;
const rowIds = (pool: TicketPool) => Array.from({ length: pool.count }, (_, row) => pool.idAt(row)).sort();

/**
 * A ticket created at `ms` (so that its wait reads the same on every copy), of one to three players by `ms`
 * (so that the party sizes the statistics count come from parsed rows and from counted players alike).
 */
function ticketAt(id: string, ms: number, mmr = 0.5, size = 1 + (ms % 3)): Uint8Array {
  const players = Array.from({ length: size }, (_, i) => ({ playerId: `p-${id}-${i}`, mmr, latencies: { 'eu-west': 20 } }));
  const input = engineInput({ players });
  return toBinary(TicketSchema, create(TicketSchema, { id, queueId: QUEUE, engineInput: input, createdAt: timestampFromMs(ms) }));
}

/** Any op, but mostly creates and matches of active tickets, so that matches commit and fill the history. */
const followedOpArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: opArb },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('create' as const), id: fc.nat({ max: 5 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('match' as const),
      ids: fc.uniqueArray(fc.nat({ max: 5 }), { minLength: 1, maxLength: 2 }),
      stale: fc.constant(false),
      match: fc.nat({ max: 3 }),
      atMs: fc.integer({ min: 1, max: 100 }),
    }),
  },
);

describe('a queue that follows', () => {
  it('makes no row until its pool is read, then holds the same rows, statistics and reach as a copy that leads', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(followedOpArb, { minLength: 8, maxLength: 40 }), async (ops) => {
        const whole = freshRun();
        // One follower read through statistics first, one through explain first: each reading makes the rows.
        const [byStatistics, byExplain] = [steered(duelQueue(3_600_000), false), steered(duelQueue(3_600_000), false)];
        const leader = steered(duelQueue(3_600_000), true);
        const copies = [byStatistics, byExplain, leader];
        try {
          for (const [step, op] of ops.entries()) {
            let record = recordOf(op, whole.state, step);
            if (record.type === 'ticket.create') record = { ...record, ticket: ticketAt(record.ticketId, 1_000 + step) };
            // The queue's own ruleset, so that the match history's waits show in its statistics.
            if (record.type === 'match.commit') record = { ...record, rulesetId: 'duel', atMs: 5_000 + step };
            await applyRecord(whole, record);
            for (const copy of copies) await copy.history.deliver(record);
          }
          const active = whole.state
            .activeInArrivalOrder()
            .map((t) => t.ticketId)
            .sort();
          expect(rowIds(poolOf(leader.runtime))).toEqual(active);
          expect(poolOf(byStatistics.runtime).count).toBe(0);
          expect(poolOf(byExplain.runtime).count).toBe(0);

          const nowMs = 10_000;
          const { leading: _f, notes: _fn, ...followed } = await byStatistics.runtime.insight.statistics(nowMs);
          const { leading: _l, notes: _ln, ...led } = await leader.runtime.insight.statistics(nowMs);
          expect(rowIds(poolOf(byStatistics.runtime))).toEqual(active);
          expect(followed).toEqual(led);
          // The match history behind them, its players included.
          expect(historyOf(byStatistics.runtime).window(['duel'], nowMs)).toEqual(historyOf(leader.runtime).window(['duel'], nowMs));
          for (const id of active) {
            expect((await byExplain.runtime.insight.explain(id, nowMs))?.rulesets).toEqual(
              (await leader.runtime.insight.explain(id, nowMs))?.rulesets,
            );
          }
          expect(rowIds(poolOf(byExplain.runtime))).toEqual(active);
        } finally {
          await Promise.all(copies.map((c) => c.runtime.stop()));
        }
      }),
      { numRuns: 60 },
    );
  });

  it('puts in at once the row of a ticket it took the request for, which it has made already', async () => {
    const { runtime, history } = steered(duelQueue(3_600_000), false);
    const id = (i: number) => `00000000-0000-4000-8000-00000000000${i}`;
    try {
      await history.deliver({ type: 'ticket.create', ticketId: id(1), ticket: ticketAt(id(1), 1_000) });
      // A read makes the first row: its values are in the tables, so a request with the same ones builds nothing.
      await runtime.insight.statistics(10_000);
      await history.deliver({ type: 'ticket.create', ticketId: id(2), ticket: ticketAt(id(2), 2_000) });
      const input = engineInput({ players: [{ playerId: 'p-taken', mmr: 0.5, latencies: { 'eu-west': 20 } }] });
      const ticket = create(TicketSchema, { id: id(3), queueId: QUEUE, engineInput: input, createdAt: timestampFromMs(3_000) });
      await runtime.createTicket(ticket, toBinary(TicketSchema, ticket), parseTicketEngineInput(input, id(3), 'engine_input'));
      expect(rowIds(poolOf(runtime))).toEqual([id(1), id(3)]);
      // A request with a host key new to the tables: the rows that wait are made before its row is checked.
      const other = engineInput({ players: [{ playerId: 'p-other', mmr: 0.5, latencies: { 'us-east': 20 } }] });
      const fourth = create(TicketSchema, { id: id(4), queueId: QUEUE, engineInput: other, createdAt: timestampFromMs(4_000) });
      await runtime.createTicket(fourth, toBinary(TicketSchema, fourth), parseTicketEngineInput(other, id(4), 'engine_input'));
      expect(rowIds(poolOf(runtime))).toEqual([id(1), id(2), id(3), id(4)]);
    } finally {
      await runtime.stop();
    }
  });

  it('matches the tickets whose rows waited once it takes the lead', async () => {
    const { runtime, history } = steered(duelQueue(20), false);
    try {
      for (let i = 0; i < 11; i++) {
        const ticketId = `00000000-0000-4000-8000-0000000000${String(i).padStart(2, '0')}`;
        await history.deliver({ type: 'ticket.create', ticketId, ticket: ticketAt(ticketId, Date.now(), 0.5 + i * 0.001, 1) });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
      // A follower does not tick: nothing matched, and no row made.
      expect(runtime.activeTicketCount).toBe(11);
      expect(poolOf(runtime).count).toBe(0);
      history.leading = true;
      expect(
        await pollUntil(
          async () => runtime.activeTicketCount,
          (n) => n === 1,
          5_000,
          10,
        ),
      ).toBe(1);
      expect(poolOf(runtime).count).toBe(1);
    } finally {
      await runtime.stop();
    }
  });
});
