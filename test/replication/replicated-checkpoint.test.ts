// Checkpoints of a replicated queue, on a real nats-server with replicas in this process: the acting leader
// saves one every N records, N bytes of log or N ms, keeps two and purges the log below the older; a replica
// started later restores the newest usable one and reads only the entries after it, and ends with the same
// state and the same outcomes, numbered alike, as a replica that followed the whole log; its later outcomes go
// on with that numbering. And the schedule alone (CheckpointSchedule): when a checkpoint is due, how a large
// pool stretches the intervals, what a failed save does.
import { randomUUID } from 'node:crypto';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BackfillRequestSchema, TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { OutcomeSchema } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { createLogger } from '../../src/log.js';
import { ticketRunOf, ticketsOf, type QueueSnapshotData } from '../../src/queue/queue-snapshot.js';
import { CheckpointSchedule, QueueCheckpoints } from '../../src/replication/queue-checkpoints.js';
import { ReplicatedHistory } from '../../src/replication/replicated-history.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { type CheckpointCompression, checkpointSequences } from '../../src/replication/jetstream/checkpoint-objects.js';
import { LogPositionError } from '../../src/replication/jetstream/errors.js';
import { LeaderLease } from '../../src/replication/jetstream/leader-lease.js';
import { ReplicationLog } from '../../src/replication/jetstream/replication-log.js';
import { engineInput, uuid } from '../support/fixtures.js';
import { natsClient, startNatsServer, type TestNatsServer } from '../support/nats.js';
import { duelQueue } from '../support/queues.js';
import { createTicket, matchesOf, startReplica as startReplicaOf, until, type QueueLog, type Replica } from '../support/replicas.js';

const LEASE_MS = 1_000;
const BUCKET = 'TEST_CHECKPOINT_COORD';

let server: TestNatsServer;
let admin: NatsConnection;
beforeAll(async () => {
  server = await startNatsServer();
  admin = await natsClient(server);
  await new Kvm(admin).create(BUCKET, { history: 1, ttl: LEASE_MS });
});
afterAll(async () => {
  await admin?.close();
  await server?.dispose();
});

const replicas: Replica[] = [];
afterEach(async () => {
  await Promise.all(replicas.splice(0).map((r) => r.stop()));
});

/** A fresh queue with its own log stream and its own checkpoint object store. */
async function newQueue(): Promise<QueueLog & { objects: ObjectStore; bucket: string }> {
  const n = randomUUID().slice(0, 8);
  const queueId = `ckpt.q${n}`;
  const subjects = { req: `test.ckpt.req.${queueId}`, lead: `test.ckpt.lead.${queueId}`, term: `test.ckpt.term.${queueId}` };
  const stream = `TEST_CKPT_${n}`;
  await (await jetstreamManager(admin)).streams.add({
    name: stream,
    subjects: [`test.ckpt.*.${queueId}`],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    duplicate_window: 120_000_000_000,
  });
  const bucket = `TEST_CKPT_OBJ_${n}`;
  return { queueId, stream, subjects, bucket, objects: await new Objm(admin).create(bucket) };
}

interface Checkpointing {
  /** Save a checkpoint after this many records (the replica takes none without it, everyBytes or everyMs)... */
  every?: number;
  /** ...or this many bytes of log entries... */
  everyBytes?: number;
  /** ...or this long after the last one. */
  everyMs?: number;
}

/** A duel queue whose tickets never match (they name no host within 5 ms): its log holds only what a test sends. */
const UNMATCHABLE = duelQueue(20, 5);

async function startReplica(
  name: string,
  q: QueueLog & { bucket: string },
  options: Checkpointing & { restore?: boolean; yaml?: string } = {},
) {
  const nc = await natsClient(server);
  const objects = options.restore || options.every || options.everyBytes || options.everyMs ? await new Objm(nc).open(q.bucket) : undefined;
  const replica = await startReplicaOf({
    name,
    queue: q,
    yaml: options.yaml ?? duelQueue(20),
    nc,
    kv: await new Kvm(nc).open(BUCKET),
    leaseMs: LEASE_MS,
    checkpoints: objects && {
      objects,
      intervalRecords: options.every ?? 1_000_000,
      intervalBytes: options.everyBytes ?? 1_000_000_000,
      intervalMs: options.everyMs ?? 600_000,
    },
  });
  replicas.push(replica);
  return replica;
}

async function stopReplica(replica: Replica): Promise<void> {
  replicas.splice(replicas.indexOf(replica), 1);
  await replica.stop();
}

const streamState = async (stream: string) => (await (await jetstreamManager(admin)).streams.info(stream)).state;

/** Resolves once every replica has applied the whole log. */
async function settled(q: QueueLog, group: readonly Replica[]): Promise<void> {
  for (;;) {
    const last = (await streamState(q.stream)).last_seq;
    await until('every replica at the end of the log', () => group.every((r) => r.history.appliedSeq >= last));
    if ((await streamState(q.stream)).last_seq === last) return;
  }
}

/** Polls an async condition. */
async function eventually(what: string, done: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const started = Date.now();
  while (!(await done())) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** What every later entry depends on, without ticket bytes (those are compared by the store's lookups). */
function stateOf(replica: Replica) {
  const data = (replica.runtime as unknown as { queue: { snapshot(): QueueSnapshotData } }).queue.snapshot();
  return {
    active: ticketsOf(data.active).map((t) => [t.ticketId, t.position, [...t.ticket]]),
    resolved: data.resolved.map((t) => [t.ticketId, t.position, t.matchId, t.resolvedAtMs, [...t.ticket]]),
    backfills: data.backfills.map((b) => [toBinary(BackfillRequestSchema, b.request), b.version]),
    nextPosition: data.nextPosition,
    nextBackfillVersion: data.nextBackfillVersion,
  };
}

/** The replica's recorded outcomes above `after`, as delivered: sequence and bytes. */
const outcomesOf = (replica: Replica, after = 0n) =>
  replica.store.queueOutcomes(replica.runtime.queueId, after, 1_000_000).map((o) => [o.producerSequence, [...toBinary(OutcomeSchema, o)]]);

const backfillRequest = (queueId: string) =>
  create(BackfillRequestSchema, {
    id: uuid(),
    queueId,
    matchId: uuid(),
    rulesetId: 'duel',
    slotsRequested: 1,
    createdAt: timestampNow(),
    engineInput: engineInput({ players: [{ playerId: 'host', mmr: 0.5 }] }),
  });

/** `n` tickets, one request at a time (one log entry each), alternating between replicas. */
async function tickets(n: number, via: readonly Replica[]): Promise<void> {
  for (let i = 0; i < n; i++) await createTicket(via[i % via.length]!);
}

describe('checkpoints of a replicated queue', () => {
  it('lets a replica started later restore the leader’s checkpoint and read only the entries after it', async () => {
    const q = await newQueue();
    const a = await startReplica('a', q, { every: 25 });
    await until('a leads', () => a.history.leading);
    // b follows the whole log: the reference.
    const b = await startReplica('b', q);
    await tickets(30, [a, b]);
    await until('the matches', () => matchesOf(b).length === 15);
    await b.runtime.createBackfillRequest(backfillRequest(q.queueId));
    await a.runtime.createBackfillRequest(backfillRequest(q.queueId));
    await tickets(3, [b]);
    await until('a checkpoint saved', () => a.history.savedSeq !== undefined);
    const saved = a.history.savedSeq!;

    const c = await startReplica('c', q, { restore: true });
    expect(c.history.restoredSeq).toBeGreaterThanOrEqual(saved);
    await settled(q, [a, b, c]);
    // It read the entries after its checkpoint only; b read them all.
    expect(c.history.entriesRead).toBe(c.history.appliedSeq - c.history.restoredSeq!);
    expect(b.history.entriesRead).toBe(b.history.appliedSeq);
    // Fewer by at least the checkpoint's entries (how many entries the log holds on either side of it
    // depends on how the ticks batched their matches: a check against half of b's failed on a loaded machine).
    expect(c.history.entriesRead).toBeLessThanOrEqual(b.history.entriesRead - saved);
    expect(stateOf(c)).toEqual(stateOf(b));
    expect(stateOf(c).backfills.length + stateOf(c).resolved.length).toBeGreaterThan(30);
    expect(outcomesOf(c)).toEqual(outcomesOf(b));
    expect(outcomesOf(c).length).toBeGreaterThanOrEqual(15);
    expect(c.store.lastSequence()).toBe(b.store.lastSequence());
  });

  it('purges the log below the older of two kept checkpoints, and a fresh replica still starts', async () => {
    const q = await newQueue();
    const a = await startReplica('a', q, { every: 10 });
    await until('a leads', () => a.history.leading);
    await tickets(36, [a]);
    let kept: number[] = [];
    // The first checkpoint comes at position 10 or before (every 10 records): an older kept one past it means
    // at least three were saved. (Two saved already purge the log below the older: polled between the second
    // save and the third, the rest of the condition holds too.)
    await eventually('three checkpoints saved, two kept, the log purged below the older', async () => {
      kept = await checkpointSequences(q.objects, q.queueId);
      return (
        kept.length === 2 && kept[1]! > 10 && a.history.savedSeq === kept[0] && (await streamState(q.stream)).first_seq === kept[1]! + 1
      );
    });
    expect(kept[1]).toBeGreaterThan(10);
    const fresh = await startReplica('fresh', q, { restore: true });
    expect(fresh.history.restoredSeq).toBeGreaterThanOrEqual(kept[0]!);
    await settled(q, [a, fresh]);
    expect(stateOf(fresh)).toEqual(stateOf(a));
    expect(outcomesOf(fresh)).toEqual(outcomesOf(a));
    expect(outcomesOf(a)).toHaveLength(18);
  });

  it('keeps numbering outcomes after a restore with no gap and no repeat, and holds only those above the cursor', async () => {
    const q = await newQueue();
    const a = await startReplica('a', q, { every: 30 });
    await until('a leads', () => a.history.leading);
    const b = await startReplica('b', q);
    await tickets(10, [a, b]);
    await until('five matches on a', () => matchesOf(a).length === 5);
    // A push sink acknowledged the first two outcomes on the leader (the delivery cursor is local so far).
    await a.store.commit([{ type: 'delivery.advance', queueId: q.queueId, sequence: 2n }]);
    await tickets(20, [a, b]);
    await until('a checkpoint saved', () => a.history.savedSeq !== undefined);
    const c = await startReplica('c', q, { restore: true });
    expect(c.history.restoredSeq).toBeDefined();
    expect(c.store.deliveryCursor(q.queueId)).toBe(2n);
    // The leader goes; b or c leads and matches the next tickets, which every replica numbers alike.
    await stopReplica(a);
    await until('a new leader', () => b.history.leading || c.history.leading);
    await tickets(10, [c, b]);
    // Twenty matches in all; c holds those above the cursor.
    await until('the last matches on c', () => matchesOf(c).length === 18);
    await settled(q, [b, c]);
    const sequences = outcomesOf(c).map(([s]) => s);
    const last = b.store.lastSequence();
    expect(last).toBe(20n);
    expect(sequences).toEqual(Array.from({ length: Number(last) - 2 }, (_, i) => BigInt(i + 3)));
    expect(outcomesOf(c)).toEqual(outcomesOf(b, 2n));
    expect(stateOf(c)).toEqual(stateOf(b));
  });

  it('takes a checkpoint after the interval in time when fewer entries came, and none while nothing comes', async () => {
    const q = await newQueue();
    const a = await startReplica('a', q, { everyMs: 300 });
    await until('a leads', () => a.history.leading);
    await tickets(3, [a]);
    await until('a checkpoint saved', () => a.history.savedSeq !== undefined);
    expect(a.history.savedSeq).toBe(a.history.appliedSeq);
    const first = a.history.savedSeq;
    // Nothing applied since: no new checkpoint.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(await checkpointSequences(q.objects, q.queueId)).toEqual([first]);
  });

  it('takes a checkpoint once the log since the last holds the interval in bytes, however few records came', async () => {
    const q = await newQueue();
    const everyBytes = 4_096;
    // No matches: no entries after the checkpoint, so no second one, and no purge of the entries measured below.
    const a = await startReplica('a', q, { everyBytes, yaml: UNMATCHABLE });
    await until('a leads', () => a.history.leading);
    const grow = async () => {
      for (let i = 0; i < 200 && a.history.savedSeq === undefined; i++) await createTicket(a);
    };
    await grow();
    await until('a checkpoint saved', () => a.history.savedSeq !== undefined);
    const saved = a.history.savedSeq!;
    // It is of the first entry at which the log's bytes reached the interval: before it they had not.
    const jsm = await jetstreamManager(admin);
    const sizes: number[] = [];
    for (let seq = 1; seq <= saved; seq++) sizes.push((await jsm.streams.getMessage(q.stream, { seq }))!.data.length);
    const total = sizes.reduce((sum, n) => sum + n, 0);
    expect(total).toBeGreaterThanOrEqual(everyBytes);
    expect(total - sizes.at(-1)!).toBeLessThan(everyBytes);
    // Far fewer records than the records interval (a million) came.
    expect(saved).toBeLessThan(200);
    expect(await checkpointSequences(q.objects, q.queueId)).toEqual([saved]);
  });

  it('counts records, not entries: an entry of many requests counts each', async () => {
    const q = await newQueue();
    // No matches: the log holds the claim and the requests' entries only.
    const a = await startReplica('a', q, { every: 20, yaml: UNMATCHABLE });
    await until('a leads', () => a.history.leading);
    // Forty requests in one event turn: one entry (group commit), or a few.
    await Promise.all(Array.from({ length: 40 }, () => createTicket(a)));
    await until('a checkpoint saved', () => a.history.savedSeq !== undefined);
    // The log holds fewer than twenty entries: counting entries, no checkpoint would be due yet.
    expect(a.history.savedSeq).toBeLessThan(20);
    expect((await streamState(q.stream)).last_seq).toBeLessThan(20);
  });

  it('falls back to the older checkpoint when the newest is corrupt', async () => {
    const q = await newQueue();
    const a = await startReplica('a', q, { every: 10 });
    await until('a leads', () => a.history.leading);
    const b = await startReplica('b', q);
    await tickets(30, [a, b]);
    await eventually('two checkpoints kept', async () => (await checkpointSequences(q.objects, q.queueId)).length === 2);
    // No more checkpoints: the leader goes (its save in flight completes; b takes over, without a checkpoint store).
    await stopReplica(a);
    const kept = await checkpointSequences(q.objects, q.queueId);
    expect((await streamState(q.stream)).first_seq).toBe(kept[1]! + 1);
    const newest = `${q.queueId}@${kept[0]}`;
    const older = await q.objects.info(`${q.queueId}@${kept[1]}`);
    await q.objects.putBlob({ name: newest, metadata: { seq: String(kept[0]), sha256: older!.metadata!.sha256! } }, new Uint8Array(64));
    const c = await startReplica('c', q, { restore: true });
    expect(c.history.restoredSeq).toBe(kept[1]);
    await settled(q, [b, c]);
    expect(stateOf(c)).toEqual(stateOf(b));
    expect(outcomesOf(c)).toEqual(outcomesOf(b));
  });

  it('refuses to start, naming the queue, stream and positions, when the log was purged past where it must read', async () => {
    const q = await newQueue();
    const a = await startReplica('a', q);
    await tickets(5, [a]);
    await stopReplica(a);
    const last = (await streamState(q.stream)).last_seq;
    await (await jetstreamManager(admin)).streams.purge(q.stream, { seq: last });
    const log = createLogger('silent');
    const store = new MemoryStore();
    const history = new ReplicatedHistory(
      {
        apply: () => expect.fail('applied'),
        committed: () => undefined,
        snapshot: () => expect.fail('snapshot'),
        restore: () => undefined,
        load: () => undefined,
      },
      {
        queueId: q.queueId,
        replicaId: 'late',
        replicationLog: new ReplicationLog(
          (await import('@nats-io/jetstream')).jetstream(admin),
          await jetstreamManager(admin),
          q.stream,
          q.subjects,
          log,
        ),
        lease: new LeaderLease(await new Kvm(admin).open(BUCKET), `leader.${q.queueId}`, { leaseMs: LEASE_MS, replicaId: 'late', log }),
        store,
        log,
        checkpoints: q.objects,
      },
    );
    const err = await history.start().then(
      () => expect.fail('started'),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(LogPositionError);
    expect((err as LogPositionError).message).toBe(
      `queue "${q.queueId}": this replica must read the log from position 1 (no usable checkpoint, so from the log's start), but the log (stream "${q.stream}") was purged up to ${last - 1}`,
    );
    expect((err as LogPositionError).held).toEqual({ first: last, last });
  });
});

describe('checkpoint schedule', () => {
  const intervals = { records: 100, bytes: 10_000, ms: 60_000 };
  function schedule() {
    const clock = { ms: 0 };
    return { clock, s: new CheckpointSchedule(intervals, () => clock.ms) };
  }

  it('is due by records, by bytes, or by time once something came, whichever comes first', () => {
    const { clock, s } = schedule();
    clock.ms = 120_000;
    // Nothing came: never due by time.
    expect(s.dueByTime).toBe(false);
    s.applied(50, 99);
    expect(s.dueBySize).toBe(false);
    expect(s.dueByTime).toBe(true);
    s.applied(50, 1);
    expect(s.dueBySize).toBe(true);
    s.taken();
    s.saved(1_000);
    expect([s.dueBySize, s.dueByTime]).toEqual([false, false]);
    s.applied(9_999, 1);
    expect(s.dueBySize).toBe(false);
    s.applied(1, 1);
    expect(s.dueBySize).toBe(true);
    s.taken();
    // A claim (no records) counts one.
    for (let i = 0; i < 100; i++) s.applied(10, 0);
    expect(s.since.records).toBe(100);
    expect(s.dueBySize).toBe(true);
  });

  it('stretches every interval for a pool whose checkpoint is larger than the bytes interval', () => {
    const { clock, s } = schedule();
    // A checkpoint of 50 000 bytes: five times the bytes interval, so the intervals stretch five times.
    s.restored(50_000);
    expect(s.scale).toBe(5);
    s.applied(49_999, 1);
    expect(s.dueBySize).toBe(false);
    s.applied(1, 1);
    expect(s.dueBySize).toBe(true);
    s.taken();
    s.saved(50_000);
    s.applied(10, 499);
    expect(s.dueBySize).toBe(false);
    s.applied(10, 1);
    expect(s.dueBySize).toBe(true);
    s.taken();
    s.saved(50_000);
    s.applied(10, 1);
    clock.ms += 5 * 60_000 - 1;
    expect(s.dueByTime).toBe(false);
    clock.ms += 1;
    expect(s.dueByTime).toBe(true);
    // Up to the bytes interval, nothing stretches.
    s.taken();
    s.saved(10_000);
    expect(s.scale).toBe(1);
  });

  it('counts the log since the previous checkpoint again after a failed save, and tries again after a while', () => {
    const { clock, s } = schedule();
    s.applied(10_000, 10);
    expect(s.dueBySize).toBe(true);
    s.taken();
    s.applied(100, 1);
    expect(s.dueBySize).toBe(false);
    s.failed();
    expect(s.since).toMatchObject({ records: 11, bytes: 10_100 });
    expect(s.dueBySize).toBe(false);
    clock.ms += 10_000;
    expect(s.dueBySize).toBe(true);
  });

  it.each<CheckpointCompression>(['zstd', 'none'])(
    'stretches the intervals by the size a checkpoint is stored at (%s), when saved and when restored',
    async (compression) => {
      const q = await newQueue();
      const log = createLogger('silent');
      // Saving one checkpoint prunes nothing, so the log is not touched.
      const unusedLog = {} as ReplicationLog;
      const active = Array.from({ length: 2_000 }, (_, i) => {
        const ticketId = uuid();
        const input = engineInput({ players: [{ playerId: `player-${i}` }] });
        return {
          ticketId,
          position: i + 1,
          ticket: toBinary(TicketSchema, create(TicketSchema, { id: ticketId, queueId: q.queueId, engineInput: input })),
        };
      });
      const checkpoint = {
        queueId: q.queueId,
        appliedSeq: 5,
        term: 0,
        outbox: { nextSequence: 1n, deliveryCursor: 0n, parked: undefined, consumers: [], outcomes: [] },
        state: { active: ticketRunOf(active), resolved: [], backfills: [], nextPosition: 2_001, nextBackfillVersion: 1 },
      };
      const saving = new QueueCheckpoints(q.queueId, q.objects, unusedLog, log, intervals, compression);
      const saved = await saving.save(checkpoint);
      if (compression === 'zstd') expect(saved.storedBytes).toBeLessThan(saved.bytes * 0.7);
      else expect(saved.storedBytes).toBe(saved.bytes);
      const expected = saved.storedBytes / intervals.bytes;
      expect(expected).toBeGreaterThan(2);
      expect(saving.schedule.scale).toBeCloseTo(expected, 9);
      const restarting = new QueueCheckpoints(q.queueId, q.objects, unusedLog, log, intervals, 'none');
      expect((await restarting.latest())?.appliedSeq).toBe(5);
      expect(restarting.schedule.scale).toBeCloseTo(expected, 9);
    },
  );
});
