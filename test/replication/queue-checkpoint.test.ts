// A queue's checkpoint (src/queue/queue-snapshot.ts, QueueState.snapshot / fromSnapshot): a state restored
// from a snapshot taken after any prefix of a record sequence applies the rest exactly as the original
// state does: the same state, the same store changes and outcomes, the same results. In process.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BackfillRequestSchema, TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import {
  ActiveTicketSchema,
  ConsumerPositionSchema,
  ParkedDeliverySchema,
  QueueCheckpointSchema,
} from '../../src/gen/matchmaker/replication/v1/checkpoint_pb.js';
import {
  type Checkpoint,
  CheckpointDecodeError,
  CheckpointEncodeError,
  encodeCheckpoint,
  encodeCheckpointInSlices,
} from '../../src/replication/wire/checkpoint-codec.js';
import { decodeCheckpoint } from '../../src/replication/wire/checkpoint-decode.js';
import { QueueState } from '../../src/queue/queue-state.js';
import { commitSnapshot, ticketRunOf, ticketsOf, type QueueSnapshotData } from '../../src/queue/queue-snapshot.js';
import type { QueueRecord } from '../../src/queue/records.js';
import { activeTicketAt, type ActiveTicketParts } from '../../src/replication/wire/wire-walk.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { applyRecord, opArb, QUEUE, run, type Op, type Run } from '../support/queue-records.js';

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
    active: ticketsOf(data.active).map(({ ticketId, position }) => ({ ticketId, position })),
    resolved: data.resolved.map(({ ticket: _bytes, ...rest }) => rest),
    backfills: data.backfills.map((b) => ({ id: b.request.id, matchId: b.request.matchId, version: b.version })),
    nextBackfillVersion: data.nextBackfillVersion,
    nextPosition: data.nextPosition,
  };
};

/** A fresh state and store restored from `data`, as a replica starting from a checkpoint would be. */
async function restored(data: QueueSnapshotData): Promise<Run> {
  const store = new MemoryStore({ producerId: 'p' });
  await commitSnapshot(store, QUEUE, data);
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

const EMPTY_OUTBOX = { nextSequence: 1n, deliveryCursor: 0n, parked: undefined, consumers: [], outcomes: [] };

/** The trip a checkpoint takes: encoded, decoded (as read back from the object store). */
const throughWire = (data: QueueSnapshotData) =>
  decodeCheckpoint(encodeCheckpoint({ queueId: QUEUE, appliedSeq: 9, term: 4, outbox: EMPTY_OUTBOX, state: data }), QUEUE).state;

/** The split property for a trip. */
const splitProperty = (trip: (data: QueueSnapshotData) => QueueSnapshotData) =>
  fc.asyncProperty(splitArb, async ({ ops, k }) => {
    const records = (await run(ops)).applied.map((a) => a.record);
    await checkSplit(records, k, trip);
  });

const MUTATION_SEED = 20261124;

describe('a queue snapshot', () => {
  it('restores a state that applies the rest of the records exactly as the original', async () => {
    await fc.assert(
      splitProperty((data) => data),
      { numRuns: 200 },
    );
  });

  it('does so after the trip through the checkpoint’s wire form', async () => {
    await fc.assert(splitProperty(throughWire), { numRuns: 300 });
  });

  // The property sees a snapshot that leaves something out: each of these lost fields is caught.
  it.each<[string, (data: QueueSnapshotData) => QueueSnapshotData]>([
    ['the book’s next version', (d) => ({ ...d, nextBackfillVersion: 1 + Math.max(0, ...d.backfills.map((b) => b.version)) })],
    [
      'the next position (taken as after the highest held, as a store restore does)',
      (d) => ({
        ...d,
        nextPosition: 1 + Math.max(0, ...ticketsOf(d.active).map((t) => t.position), ...d.resolved.map((t) => t.position)),
      }),
    ],
    ['the posting versions (renumbered)', (d) => ({ ...d, backfills: d.backfills.map((b, i) => ({ ...b, version: i + 1 })) })],
    ['the resolved tickets', (d) => ({ ...d, resolved: [] })],
    ['the resolution times', (d) => ({ ...d, resolved: d.resolved.map((t) => ({ ...t, resolvedAtMs: 0 })) })],
  ])('fails when the snapshot drops %s', async (_what, drop) => {
    // A fixed seed: whether 1,000 random runs happen to hit a case that shows the loss is chance (one in
    // CI did not, for the posting versions); with this seed each loss is shown, every time.
    const report = await fc.check(
      splitProperty((data) => throughWire(drop(data))),
      { numRuns: 1000, seed: MUTATION_SEED },
    );
    expect(report.failed).toBe(true);
  });
});

/**
 * A checkpoint with BackfillRequest messages as bytes (messages compare by their encoding), and without the
 * decoder's map of the active tickets, which must hold exactly those tickets' ids and positions.
 */
const comparable = (c: Checkpoint) => {
  const { activeIds, ...state } = c.state;
  if (activeIds) {
    expect(activeIds.size).toBe(state.active.length);
    for (const t of ticketsOf(state.active)) expect(activeIds.get(t.ticketId)).toBe(t.position);
  }
  return {
    ...c,
    state: {
      ...state,
      active: ticketsOf(state.active),
      backfills: state.backfills.map((b) => ({ ...b, request: toBinary(BackfillRequestSchema, b.request) })),
    },
  };
};

/** A checkpoint after a random run. */
const checkpointArb = fc
  .record({ ops: fc.array(opArb, { maxLength: 60 }), appliedSeq: fc.nat({ max: 1_000_000 }), term: fc.nat({ max: 1_000_000 }) })
  .map(({ ops, appliedSeq, term }) => ({ ops, appliedSeq: Math.max(appliedSeq, term), term }));

/** A checkpoint of a run: its state and its store's outbox. */
async function checkpointOf(ops: Op[], appliedSeq = 7, term = 3): Promise<Checkpoint> {
  const r = await run(ops);
  return { queueId: QUEUE, appliedSeq, term, outbox: r.store.outboxSnapshot(QUEUE), state: r.state.snapshot() };
}

function decodeError(bytes: Uint8Array): CheckpointDecodeError {
  try {
    decodeCheckpoint(bytes, QUEUE);
  } catch (err) {
    expect(err).toBeInstanceOf(CheckpointDecodeError);
    return err as CheckpointDecodeError;
  }
  throw new Error('decoded a corrupt checkpoint');
}

/** A valid checkpoint's wire message, changed as a faulty writer would. */
async function corrupt(change: (wire: ReturnType<typeof create<typeof QueueCheckpointSchema>>) => void): Promise<Uint8Array> {
  const ops: Op[] = [
    { op: 'create', id: 0 },
    { op: 'create', id: 1 },
    { op: 'create', id: 2 },
    { op: 'match', ids: [2], stale: false, match: 0, atMs: 5 },
    { op: 'backfill', match: 1, slots: 1 },
    { op: 'backfill', match: 2, slots: 1 },
  ];
  const bytes = encodeCheckpoint(await checkpointOf(ops));
  const wire = fromBinary(QueueCheckpointSchema, bytes);
  change(wire);
  return toBinary(QueueCheckpointSchema, wire);
}

describe('the checkpoint codec', () => {
  it('gives back every checkpoint exactly', async () => {
    await fc.assert(
      fc.asyncProperty(checkpointArb, async ({ ops, appliedSeq, term }) => {
        const checkpoint = await checkpointOf(ops, appliedSeq, term);
        const decoded = decodeCheckpoint(encodeCheckpoint(checkpoint), QUEUE);
        expect(comparable(decoded)).toStrictEqual(comparable(checkpoint));
      }),
      { numRuns: 100 },
    );
  });

  it('writes in slices exactly what encoding the whole message gives', async () => {
    await fc.assert(
      fc.asyncProperty(checkpointArb, fc.integer({ min: 1, max: 4 }), async ({ ops, appliedSeq, term }, slice) => {
        const checkpoint = await checkpointOf(ops, appliedSeq, term);
        const sliced = await encodeCheckpointInSlices(checkpoint, slice);
        expect(sliced).toEqual(encodeCheckpoint(checkpoint));
        // protobuf-es re-encoding the decoded message whole gives the same bytes.
        expect(toBinary(QueueCheckpointSchema, fromBinary(QueueCheckpointSchema, sliced))).toEqual(sliced);
      }),
      { numRuns: 100 },
    );
  });

  it('writes active tickets of any length and position as the generated schema writes them', async () => {
    // Lengths and positions either side of each varint width, up to the largest whole number a position holds.
    const positions = [1, 127, 128, 16_383, 16_384, 2 ** 31 - 1, 2 ** 31, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER - 1];
    const padding = [0, 60, 90, 16_300, 16_400, 3, 2 ** 17, 1, 5];
    const active = positions.map((position, i) => {
      const ticketId = `t-${i}`;
      const ticket = toBinary(
        TicketSchema,
        create(TicketSchema, { id: ticketId, queueId: QUEUE, engineInput: new Uint8Array(padding[i]!).fill(i) }),
      );
      return { ticketId, position, ticket };
    });
    const state: QueueSnapshotData = {
      active: ticketRunOf(active),
      resolved: [],
      backfills: [],
      nextBackfillVersion: 1,
      nextPosition: Number.MAX_SAFE_INTEGER,
    };
    const bytes = encodeCheckpoint({ queueId: QUEUE, appliedSeq: 9, term: 4, outbox: EMPTY_OUTBOX, state });
    expect(await encodeCheckpointInSlices({ queueId: QUEUE, appliedSeq: 9, term: 4, outbox: EMPTY_OUTBOX, state }, 2)).toEqual(bytes);
    const wire = fromBinary(QueueCheckpointSchema, bytes);
    expect(toBinary(QueueCheckpointSchema, wire)).toEqual(bytes);
    expect(wire.state!.active.map((t) => Number(t.position))).toEqual(positions);
    expect(wire.state!.active.map((t) => t.ticket)).toEqual(active.map((t) => t.ticket));
    expect(ticketsOf(decodeCheckpoint(bytes, QUEUE).state.active)).toEqual(active);
  });

  it('refuses every strict prefix of a checkpoint (the state is written last, as one field)', async () => {
    const bytes = encodeCheckpoint(
      await checkpointOf([
        { op: 'create', id: 0 },
        { op: 'backfill', match: 1, slots: 1 },
      ]),
    );
    for (let cut = 0; cut < bytes.length; cut++)
      expect(decodeError(bytes.subarray(0, cut)).field).toMatch(/^(checkpoint|queue_id|applied_seq|term|outbox|state)$/);
  });

  it.each<[string, (wire: ReturnType<typeof create<typeof QueueCheckpointSchema>>) => void, string, RegExp]>([
    ['another queue’s', (w) => (w.queueId = 'other.q'), 'queue_id', /not "state.q"/],
    ['no applied position', (w) => (w.appliedSeq = undefined), 'applied_seq', /is missing/],
    ['a term after its position', (w) => (w.term = 8n), 'term', /after applied_seq/],
    ['no state', (w) => (w.state = undefined), 'state', /is missing/],
    ['no outbox', (w) => (w.outbox = undefined), 'outbox', /is missing/],
    [
      'a delivery cursor at the next sequence',
      (w) => (w.outbox!.deliveryCursor = w.outbox!.nextProducerSequence),
      'outbox.delivery_cursor',
      /not below next_producer_sequence/,
    ],
    [
      'an outcome at the delivery cursor',
      (w) => (w.outbox!.deliveryCursor = w.outbox!.outcomes[0]!.sequence),
      'outbox.outcomes[0].sequence',
      /not above/,
    ],
    [
      'an outcome at the next sequence',
      (w) => (w.outbox!.nextProducerSequence = w.outbox!.outcomes[0]!.sequence),
      'outbox.outcomes[0].sequence',
      /not below next_producer_sequence/,
    ],
    [
      'an outcome whose bytes carry another sequence',
      (w) => {
        w.outbox!.nextProducerSequence = 9n;
        w.outbox!.outcomes[0]!.sequence = 5n;
      },
      'outbox.outcomes[0].outcome',
      /carries producer_sequence 1, not 5/,
    ],
    [
      'bytes that are no Outcome',
      (w) => (w.outbox!.outcomes[0]!.outcome = new Uint8Array([0xff])),
      'outbox.outcomes[0].outcome',
      /not an Outcome/,
    ],
    [
      'a consumer named twice',
      (w) =>
        w.outbox!.consumers.push(
          create(ConsumerPositionSchema, { consumer: 'c', sequence: 1n }),
          create(ConsumerPositionSchema, { consumer: 'c', sequence: 0n }),
        ),
      'outbox.consumers[1].consumer',
      /named twice/,
    ],
    [
      'a parked delivery without its error',
      (w) => (w.outbox!.parked = create(ParkedDeliverySchema, { sequence: 1n, attempts: 3n, parkedAtMs: 5n })),
      'outbox.parked.last_error',
      /missing/,
    ],
    ['no next position', (w) => (w.state!.nextPosition = undefined), 'state.next_position', /is missing/],
    ['a position at next_position', (w) => (w.state!.active[0]!.position = w.state!.nextPosition), 'state.active[0].position', /not below/],
    ['a negative position', (w) => (w.state!.active[0]!.position = -1n), 'state.active[0].position', /out of range/],
    ['tickets out of order', (w) => w.state!.active.reverse(), 'state.active[1].position', /arrival order/],
    ['a ticket twice', (w) => (w.state!.resolved[0]!.ticket = w.state!.active[0]!.ticket), 'state.resolved[0].ticket', /second time/],
    ['a position twice', (w) => (w.state!.resolved[0]!.position = w.state!.active[0]!.position), 'state.resolved[0].position', /another/],
    ['bytes that are no Ticket', (w) => (w.state!.active[0]!.ticket = new Uint8Array([0xff])), 'state.active[0].ticket', /not a Ticket/],
    [
      'a resolution without its time',
      (w) => (w.state!.resolved[0]!.resolvedAtMs = undefined),
      'state.resolved[0].resolved_at_ms',
      /missing/,
    ],
    ['a request without a version', (w) => (w.state!.backfills[0]!.version = undefined), 'state.backfills[0].version', /missing/],
    [
      'a version at next_backfill_version',
      (w) => (w.state!.backfills[0]!.version = w.state!.nextBackfillVersion),
      'state.backfills[0].version',
      /not below/,
    ],
    [
      'two open requests for one match',
      (w) => (w.state!.backfills[1]!.request!.matchId = w.state!.backfills[0]!.request!.matchId),
      'state.backfills[1].request.match_id',
      /another open request/,
    ],
    [
      'a field this version does not know',
      (w) => (w.state!.$unknown = [{ no: 9, wireType: 2, data: new Uint8Array([1, 0]) }]),
      'state',
      /does not know/,
    ],
  ])('refuses %s by name', async (_what, change, field, problem) => {
    const err = decodeError(await corrupt(change));
    expect(err.field).toBe(field);
    expect(err.message).toMatch(problem);
  });

  it('gives back the outbox exactly: cursor, parked delivery, consumers and the outcomes above the cursor', async () => {
    const r = await run([
      { op: 'create', id: 0 },
      { op: 'create', id: 1 },
      { op: 'match', ids: [0], stale: false, match: 0, atMs: 5 },
      { op: 'expire', ids: [1], atMs: 6 },
      { op: 'create', id: 2 },
      { op: 'clear', atMs: 7 },
    ]);
    await r.store.commit([
      { type: 'delivery.advance', queueId: QUEUE, sequence: 1n },
      { type: 'delivery.park', queueId: QUEUE, parked: { sequence: 2n, attempts: 4, lastError: 'sink down', parkedAtMs: 99 } },
      { type: 'consumer.advance', consumer: 'dashboard', sequence: 2n },
      { type: 'consumer.advance', consumer: 'backend', sequence: 1n, owner: 'game-backend' },
    ]);
    const outbox = r.store.outboxSnapshot(QUEUE);
    expect(outbox.outcomes.map((o) => o.sequence)).toEqual([2n, 3n]);
    expect(outbox).toMatchObject({
      nextSequence: 4n,
      deliveryCursor: 1n,
      consumers: [
        { consumer: 'dashboard', sequence: 2n },
        { consumer: 'backend', sequence: 1n, owner: 'game-backend' },
      ],
    });
    const checkpoint: Checkpoint = { queueId: QUEUE, appliedSeq: 7, term: 3, outbox, state: r.state.snapshot() };
    expect(comparable(decodeCheckpoint(encodeCheckpoint(checkpoint), QUEUE))).toStrictEqual(comparable(checkpoint));
    // A store that takes it over holds the same outbox and numbers on from it.
    const other = new MemoryStore({ producerId: 'p' });
    other.restoreOutbox(QUEUE, outbox);
    expect(other.outboxSnapshot(QUEUE)).toStrictEqual(outbox);
    expect(other.queueOutcomes(QUEUE, 0n, 10).map((o) => o.producerSequence)).toEqual([2n, 3n]);
    await other.commit(r.applied.at(-1)!.applied.changes.filter((c) => c.type === 'outcome.record'));
    expect(other.queueOutcomes(QUEUE, 3n, 10).map((o) => o.producerSequence)).toEqual([4n]);
    expect(other.lastSequence()).toBe(4n);
  });

  it('refuses to write what it could not give back', async () => {
    const checkpoint = await checkpointOf([{ op: 'create', id: 0 }]);
    const wrongId = {
      ...checkpoint,
      state: { ...checkpoint.state, active: ticketRunOf([{ ...ticketsOf(checkpoint.state.active)[0]!, ticketId: 'x' }]) },
    };
    const fractional = { ...checkpoint, appliedSeq: 1.5 };
    for (const [bad, field] of [
      [wrongId, 'state.active[0].ticket'],
      [fractional, 'applied_seq'],
    ] as const) {
      try {
        encodeCheckpoint(bad);
        expect.fail('encoded');
      } catch (err) {
        expect(err).toBeInstanceOf(CheckpointEncodeError);
        expect((err as CheckpointEncodeError).field).toBe(field);
      }
    }
  });
  it('reads an active ticket without its schema exactly as the schema reads it, and leaves every other shape to the schema', () => {
    // Positions around the edges the shortcut checks: 0, 1, a varint byte's, 2^53 - 1 and past it, negative.
    const position = fc.oneof(
      fc.bigInt({ min: 0n, max: 300n }),
      fc.bigInt({ min: 1n, max: BigInt(Number.MAX_SAFE_INTEGER) }),
      fc.bigInt({ min: BigInt(Number.MAX_SAFE_INTEGER) - 2n, max: BigInt(Number.MAX_SAFE_INTEGER) + 2n }),
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
    );
    const message = fc.record(
      { ticket: fc.uint8Array({ maxLength: 300 }), position, unknown: fc.boolean() },
      { requiredKeys: ['unknown'] },
    );
    const flip = fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }));
    fc.assert(
      fc.property(message, fc.option(flip), ({ ticket, position, unknown }, flipped) => {
        const init = create(ActiveTicketSchema, { ticket, position });
        if (unknown) init.$unknown = [{ no: 9, wireType: 0, data: new Uint8Array([1]) }];
        const bytes = toBinary(ActiveTicketSchema, init);
        if (flipped && bytes.length > 0) bytes[flipped[0] % bytes.length] = flipped[1];
        // Read where it sits inside a larger buffer, between bytes that would carry a varint on past its end.
        const padded = new Uint8Array(bytes.length + 6).fill(0xff);
        padded.set(bytes, 3);
        const parts: ActiveTicketParts = { ticketStart: 0, ticketEnd: 0, position: 0 };
        const quick = activeTicketAt(padded, 3, 3 + bytes.length, parts)
          ? { ticket: padded.subarray(parts.ticketStart, parts.ticketEnd), position: parts.position }
          : undefined;
        let whole: ReturnType<typeof fromBinary<typeof ActiveTicketSchema>>;
        try {
          whole = fromBinary(ActiveTicketSchema, bytes);
        } catch {
          expect(quick).toBeUndefined(); // what the schema refuses is left to it, to refuse by name
          return;
        }
        if (quick) {
          expect(quick.position >= 1 && quick.position <= Number.MAX_SAFE_INTEGER).toBe(true);
          expect(whole.$unknown ?? []).toEqual([]);
          expect([...quick.ticket]).toEqual([...(whole.ticket ?? [])]);
          expect(BigInt(quick.position)).toBe(whole.position);
        }
        // The encoder's own output, in range, takes the shortcut.
        const inRange = position !== undefined && position >= 1n && position <= BigInt(Number.MAX_SAFE_INTEGER);
        if (!flipped && !unknown && ticket !== undefined && inRange) expect(quick).toBeDefined();
      }),
      { numRuns: 2000 },
    );
  });
});
