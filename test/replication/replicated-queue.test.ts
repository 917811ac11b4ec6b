// Three replicas of one queue in this process, each with its own store and its own connection, sharing a
// replication log on a real nats-server: every replica holds the same pool, the leader matches, a match or
// a cancel wins for everyone alike, and a deposed leader's records take no effect. (Separate processes on a
// three-node cluster come with the service wiring; this pins down the protocol.)
import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ServiceError } from '../../src/errors.js';
import { decodeLogEntry, encodeLogEntry, type LogEntry } from '../../src/replication/wire/record-codec.js';
import type { LeaderLease } from '../../src/replication/jetstream/leader-lease.js';
import { ReplicationLog } from '../../src/replication/jetstream/replication-log.js';
import { LOG_DIVERGED, ReplicatedHistory, TERM_SKIPPED } from '../../src/replication/replicated-history.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { pino } from 'pino';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { parseTicketEngineInput } from '../../src/engine/engine-input.js';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { engineInput, uuid } from '../support/fixtures.js';
import { natsClient, startNatsServer, type TestNatsServer } from '../support/nats.js';
import { duelQueue } from '../support/queues.js';
import {
  createTicket,
  leaderOf,
  matchedIds,
  matchesOf,
  startReplica as startReplicaOf,
  until,
  type QueueLog,
  type Replica,
} from '../support/replicas.js';

const LEASE_MS = 1_000;
const BUCKET = 'TEST_REPLICATION_COORD';

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

/** A fresh queue with its own log stream. */
async function newQueue(): Promise<QueueLog> {
  const n = randomUUID().slice(0, 8);
  const queueId = `repl.q${n}`;
  const subjects = { req: `test.repl.req.${queueId}`, lead: `test.repl.lead.${queueId}`, term: `test.repl.term.${queueId}` };
  const stream = `TEST_REPL_${n}`;
  const jsm = await jetstreamManager(admin);
  await jsm.streams.add({
    name: stream,
    subjects: [`test.repl.*.${queueId}`],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    duplicate_window: 120_000_000_000,
  });
  return { queueId, stream, subjects };
}

async function startReplica(name: string, queue: QueueLog, yaml: string, applyTimeoutMs?: number): Promise<Replica> {
  const nc = await natsClient(server);
  const replica = await startReplicaOf({ name, queue, yaml, nc, kv: await new Kvm(nc).open(BUCKET), leaseMs: LEASE_MS, applyTimeoutMs });
  replicas.push(replica);
  return replica;
}

describe('a replicated queue', () => {
  it('holds the same pool on every replica, one entry per ticket id whichever replica took the create', async () => {
    const q = await newQueue();
    const group = await Promise.all(['a', 'b', 'c'].map((name) => startReplica(name, q, duelQueue(3_600_000))));
    const [a, b, c] = group as [Replica, Replica, Replica];
    const id = uuid();
    await createTicket(a, id);
    // The same id through two other replicas at once (a retry after a timeout, say).
    await Promise.all([createTicket(b, id), createTicket(c, id)]);
    await createTicket(b);
    await until('every replica has both tickets', () => group.every((r) => r.runtime.activeTicketCount === 2));
    for (const r of group) expect(r.runtime.lookupTicket(id)?.state).toBe('active');
  });

  it('has one leader, which matches; every replica records the same match outcome', async () => {
    const q = await newQueue();
    const group = await Promise.all(['a', 'b', 'c'].map((name) => startReplica(name, q, duelQueue(20))));
    await until('a leader', () => leaderOf(group) !== undefined);
    expect(group.filter((r) => r.history.leading)).toHaveLength(1);
    const ids = [uuid(), uuid()];
    await createTicket(group[0]!, ids[0]);
    await createTicket(group[2]!, ids[1]);
    await until('the match on every replica', () => group.every((r) => matchesOf(r).length === 1));
    const [first, ...others] = group.map((r) => matchesOf(r)[0]!);
    expect(matchedIds(first!).sort()).toEqual([...ids].sort());
    for (const other of others) {
      expect(other.id).toBe(first!.id);
      expect(other.payload.value).toEqual(first!.payload.value);
    }
    for (const r of group) expect(r.runtime.resolvedTicketCount).toBe(2);
  });

  it('settles a cancel racing a match the same way everywhere: either the cancel or the match, never both', async () => {
    const q = await newQueue();
    const group = await Promise.all(['a', 'b', 'c'].map((name) => startReplica(name, q, duelQueue(10))));
    await until('a leader', () => leaderOf(group) !== undefined);
    const follower = group.find((r) => !r.history.leading)!;
    let cancelled = 0;
    let refused = 0;
    for (let round = 0; round < 15; round++) {
      const [x, y] = [uuid(), uuid()];
      await Promise.all([createTicket(group[round % 3]!, x), createTicket(group[(round + 1) % 3]!, y)]);
      await new Promise((resolve) => setTimeout(resolve, round % 7));
      const answer = await follower.runtime.cancelTicket(x).then(
        () => 'OK',
        (err: unknown) => (err instanceof ServiceError ? err.code : String(err)),
      );
      // Let the log settle, then look at every replica.
      await new Promise((resolve) => setTimeout(resolve, 30));
      for (const r of group) {
        const holding = matchesOf(r).filter((m) => matchedIds(m).includes(x));
        if (answer === 'OK') expect(holding).toHaveLength(0);
        else {
          expect(answer).toBe('FAILED_PRECONDITION');
          expect(holding).toHaveLength(1);
        }
      }
      if (answer === 'OK') cancelled++;
      else refused++;
      // A cancelled x leaves y alone in the pool: take it out for the next round.
      await follower.runtime.cancelTicket(y).catch(() => undefined);
    }
    expect(cancelled + refused).toBe(15);
  });

  it('ignores a deposed leader’s records on every replica', async () => {
    const q = await newQueue();
    const group = await Promise.all(['a', 'b'].map((name) => startReplica(name, q, duelQueue(3_600_000))));
    await until('a leader', () => leaderOf(group) !== undefined);
    const old = leaderOf(group)!;
    const oldTerm = (old.history as unknown as { ownTerm: number }).ownTerm;
    const id = uuid();
    await createTicket(old, id);
    const position = (old.runtime as unknown as { queue: { active: Map<string, number> } }).queue.active.get(id) ?? -1;
    // The old leader stops (its lease released); the other claims a new term.
    await old.stop();
    replicas.splice(replicas.indexOf(old), 1);
    const successor = group.find((r) => r !== old)!;
    await until('a new leader', () => successor.history.leading);
    // A late record of the old term (a paused leader waking up): an expiry of the ticket.
    const late = encodeLogEntry({
      kind: 'records',
      replicaId: old.name,
      term: oldTerm,
      records: [{ type: 'tickets.expire', tickets: [{ ticketId: id, position }], atMs: Date.now(), operationId: uuid(), chunkSize: 100 }],
    });
    await successor.log.append('lead', late, uuid());
    // A request after it, so we know the late entry was applied before we look.
    await createTicket(successor);
    expect(successor.runtime.lookupTicket(id)?.state).toBe('active');
    expect(successor.store.queueOutcomes(q.queueId, 0n, 100).filter((o) => o.kind === 'ticket.expired')).toEqual([]);
  });

  it('puts the matches a tick forms in a slice together in one entry', async () => {
    const q = await newQueue();
    // Ticks 2 s apart: twenty creates straddle at most one tick even on a loaded machine (at 500 ms they
    // straddled two once, with other tests running beside).
    const group = await Promise.all(['a', 'b'].map((name) => startReplica(name, q, duelQueue(2000))));
    await until('a leader', () => leaderOf(group) !== undefined);
    const leader = leaderOf(group)!;
    await Promise.all(Array.from({ length: 20 }, () => createTicket(leader)));
    await until('ten matches on every replica', () => group.every((r) => matchesOf(r).length === 10));
    const jsm = await jetstreamManager(admin);
    const last = (await jsm.streams.info(q.stream)).state.last_seq;
    const entries = new Map<number, number>();
    for (let seq = 1; seq <= last; seq++) {
      const message = await jsm.streams.getMessage(q.stream, { seq });
      if (message?.subject !== q.subjects.lead) continue;
      const entry = decodeLogEntry(message.data);
      const matches = entry.kind === 'records' ? entry.records.filter((r) => r.type === 'match.commit').length : 0;
      if (matches > 0) entries.set(seq, matches);
    }
    // One tick of twenty waiting tickets makes its ten matches in one slice; two if the creates straddle a tick.
    expect([...entries.values()].reduce((a, b) => a + b, 0)).toBe(10);
    expect(entries.size).toBeLessThanOrEqual(2);
  });

  it('appends a leader’s records larger than an entry may be as several entries, applied in order, each record answered', async () => {
    const q = await newQueue();
    const group = await Promise.all(['a', 'b'].map((name) => startReplica(name, q, duelQueue(3_600_000))));
    await until('a leader', () => leaderOf(group) !== undefined);
    const leader = leaderOf(group)!;
    const follower = group.find((r) => r !== leader)!;
    const ids = Array.from({ length: 24 }, () => uuid());
    for (const id of ids) await createTicket(leader, id);
    const active = (leader.runtime as unknown as { queue: { active: { get(id: string): number | undefined } } }).queue.active;
    // Twelve matches of 60 KiB each (what a tick's slice proposes together): about 720 KiB, over one entry's 512.
    const engineOutput = new Uint8Array(60 * 1024).fill(7);
    const records = Array.from({ length: 12 }, (_, m) => ({
      type: 'match.commit' as const,
      matchId: uuid(),
      rulesetId: 'duel',
      atMs: Date.now(),
      engineOutput,
      tickets: [ids[2 * m]!, ids[2 * m + 1]!].map((ticketId) => ({ ticketId, position: active.get(ticketId)! })),
    }));
    const jsm = await jetstreamManager(admin);
    const before = (await jsm.streams.info(q.stream)).state.last_seq;
    const applied = await leader.history.propose(records);
    expect(applied.map((a) => a.result.committed)).toEqual(records.map(() => true));
    const last = (await jsm.streams.info(q.stream)).state.last_seq;
    const sizes: number[] = [];
    for (let seq = before + 1; seq <= last; seq++) {
      const message = await jsm.streams.getMessage(q.stream, { seq });
      if (message?.subject === q.subjects.lead) sizes.push(message.data.length);
    }
    expect(sizes.length).toBeGreaterThan(1);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(512 * 1024);
    await until('the follower has every match', () => matchesOf(follower).length === records.length);
    expect(matchesOf(follower).map((o) => o.id)).toEqual(matchesOf(leader).map((o) => o.id));
    expect(matchesOf(follower).map(matchedIds)).toEqual(records.map((r) => r.tickets.map((t) => t.ticketId)));
  });

  it('lets a replica started later catch up from the log before it answers', async () => {
    const q = await newQueue();
    const first = await startReplica('a', q, duelQueue(3_600_000));
    const ids = Array.from({ length: 50 }, () => uuid());
    await Promise.all(ids.map((id) => createTicket(first, id)));
    const late = await startReplica('b', q, duelQueue(3_600_000));
    expect(late.runtime.activeTicketCount).toBe(50);
    for (const id of ids) expect(late.runtime.lookupTicket(id)?.state).toBe('active');
  });

  it('answers UNAVAILABLE when it cannot apply what it appended, and the request still takes effect', async () => {
    const q = await newQueue();
    const stuck = await startReplica('a', q, duelQueue(3_600_000), 300);
    const other = await startReplica('b', q, duelQueue(3_600_000));
    // Its log reader stops: it can append but no longer apply.
    await (stuck.history as unknown as { reader: { stop(): Promise<void> } }).reader.stop();
    const id = uuid();
    const started = Date.now();
    const answer = await createTicket(stuck, id).then(
      () => 'OK',
      (err: unknown) => (err instanceof ServiceError ? err.code : String(err)),
    );
    expect(answer).toBe('UNAVAILABLE');
    expect(Date.now() - started).toBeLessThan(5_000);
    await until('the ticket on the other replica', () => other.runtime.lookupTicket(id)?.state === 'active');
  });
});

describe("a replica whose log is not the broker's", () => {
  it('says so at error level, once a term, when an entry names a claim at a position where it applied another entry', async () => {
    const q = await newQueue();
    const js = jetstream(admin);
    const entry = (e: LogEntry) => encodeLogEntry(e);
    // 1: x claims (term 1). 2: a request. 3 and 4: records of term 2, as if position 2 held a claim: the log a
    // replica sees when the broker replaced an entry it delivered. 5: w claims (term 5). 6: x's late records of
    // term 1, a deposed leader's, skipped (said once, at info). 7: records of term 4, where position 4 held records.
    const records = (replicaId: string, term: number): LogEntry => ({
      kind: 'records',
      replicaId,
      term,
      records: [{ type: 'resolved.forget', tickets: [] }],
    });
    await js.publish(q.subjects.term, entry({ kind: 'claim', replicaId: 'x', incarnation: 'i1' }));
    await js.publish(
      q.subjects.req,
      entry({ kind: 'records', replicaId: 'y', term: 0, records: [{ type: 'ticket.cancel', ticketId: 't' }] }),
    );
    await js.publish(q.subjects.lead, entry(records('z', 2)));
    await js.publish(q.subjects.lead, entry(records('z', 2)));
    await js.publish(q.subjects.term, entry({ kind: 'claim', replicaId: 'w', incarnation: 'i2' }));
    await js.publish(q.subjects.lead, entry(records('x', 1)));
    await js.publish(q.subjects.lead, entry(records('v', 4)));
    const lines: { msg: string; seq?: number; claimAt?: number; term?: number; current?: number; leader?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const applied: string[] = [];
    const never = () => expect.fail('not expected here');
    const history = new ReplicatedHistory(
      {
        apply: (record) => {
          applied.push(record.type);
          return { changes: [], activated: [], deactivated: [], result: {} } as never;
        },
        committed: () => undefined,
        snapshot: never,
        restore: never,
        load: never,
      },
      {
        queueId: q.queueId,
        replicaId: 'late',
        replicationLog: new ReplicationLog(js, await jetstreamManager(admin), q.stream, q.subjects, log),
        // A lease it never holds: this replica only follows.
        lease: { leading: false, onChange: () => undefined, start: () => undefined, stop: async () => undefined } as unknown as LeaderLease,
        store: new MemoryStore(),
        log,
      },
    );
    await history.start();
    try {
      expect(history.appliedSeq).toBe(7);
      expect(history.appliedTerm).toBe(5);
      expect(applied).toEqual(['ticket.cancel']);
      expect(lines.filter((l) => l.msg === LOG_DIVERGED)).toEqual([
        expect.objectContaining({ seq: 3, claimAt: 2, term: 1 }),
        expect.objectContaining({ seq: 7, claimAt: 4, term: 5 }),
      ]);
      expect(lines.filter((l) => l.msg === TERM_SKIPPED)).toEqual([expect.objectContaining({ seq: 6, term: 1, current: 5, leader: 'x' })]);
    } finally {
      await history.stop();
    }
  });
});

describe('queue files that differ between replicas (a rollout)', () => {
  /** Ruleset `duel`, and `squad` unless `withSquad` is false; the queue never ticks (nothing matches). */
  const file = (withSquad: boolean) => `
config:
  tick_interval_ms: 3600000
  rulesets:
    - { id: duel, teams: 2, team_size: 1 }
${withSquad ? '    - { id: squad, teams: 4, team_size: 1 }' : ''}
`;

  it('the leader\u2019s file governs: a replica taking the lead removes what its own file no longer admits, once for all', async () => {
    const q = await newQueue();
    const old = await startReplica('old', q, file(true));
    await until('the old file leads', () => old.history.leading);
    const newer = await startReplica('new', q, file(false));
    const squad = [uuid(), uuid(), uuid()];
    for (const id of squad) await createTicketFor(old, id, ['squad']);
    await createTicketFor(newer, uuid(), ['duel']);
    // A follower's file does not remove anything: all four stay while the old file leads.
    await until('four tickets everywhere', () => [old, newer].every((r) => r.runtime.activeTicketCount === 4));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(newer.runtime.activeTicketCount).toBe(4);

    // The old replica goes (rollout); the new one leads and its file governs from its term on.
    await old.stop();
    replicas.splice(replicas.indexOf(old), 1);
    await until('the new file leads', () => newer.history.leading, 10_000);
    await until('the squad tickets gone', () => newer.runtime.activeTicketCount === 1, 10_000);
    const orphaned = newer.store.queueOutcomes(q.queueId, 0n, 100).filter((o) => o.kind === 'ticket.orphaned');
    expect(orphaned.map((o) => (o.payload.case === 'ticketOrphaned' ? o.payload.value.ticket!.id : '')).sort()).toEqual([...squad].sort());
    // A replica joining now applies the same removals from the log: the same state, the same outcomes.
    const late = await startReplica('late', q, file(true));
    expect(late.runtime.activeTicketCount).toBe(1);
    expect(late.store.queueOutcomes(q.queueId, 0n, 100).map((o) => o.id)).toEqual(
      newer.store.queueOutcomes(q.queueId, 0n, 100).map((o) => o.id),
    );
  });
});

/** A one-player ticket naming `rulesetIds`, through `replica`. */
function createTicketFor(replica: Replica, id: string, rulesetIds: string[]): Promise<void> {
  const ticket = create(TicketSchema, {
    id,
    queueId: replica.runtime.queueId,
    createdAt: timestampNow(),
    rulesetIds,
    engineInput: engineInput({ players: [{ playerId: `p-${id}`, mmr: 0.5 }] }),
  });
  return replica.runtime.createTicket(
    ticket,
    toBinary(TicketSchema, ticket),
    parseTicketEngineInput(ticket.engineInput, id, 'engine_input'),
  );
}
