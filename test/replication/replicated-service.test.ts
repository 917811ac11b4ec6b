// The replicated mode with the real parts: three service processes (the built CLI) on a three-node NATS
// cluster, R3 streams, LEADER_LEASE_MS=2000. Tickets go to every replica over both transports; outcomes are
// read back from the outcome stream as a customer would (deduplicated by outcome id). Each describe has a
// cluster and three replicas of its own.
import { PROBE_PREFIX } from '../../bench/nats-cluster.js';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import { describe, expect, it } from 'vitest';
import { replicationStreamName } from '../../src/replication/jetstream/names.js';
import { party, uuid } from '../support/fixtures.js';
import { adminTicket, duelQueue, pollUntil } from '../support/queues.js';
import {
  counts,
  expectGapFree,
  expectNoTicketLost,
  expiredTickets,
  LEASE_MS,
  matchedTickets,
  matchesOf,
  timestampMs,
  useGroup,
} from '../support/replicated-group.js';
import { sleep } from '../support/service-cluster.js';
import { serveProcess } from '../support/serve-process.js';
import { removeDirs, tempDir, writeQueues } from '../support/service.js';
import { TicketLoad } from '../support/ticket-load.js';

/**
 * The longest a client sees no create acknowledged after the NATS node leading the queue's stream is killed
 * (nats-server 2.9): the stream stores nothing until the two other nodes elect its new leader, 4 to 9 s
 * after the kill (nats-server's Raft election timeout), and creates come back within about a second of that
 * (test/replication/nats-faults.test.ts measures it per replica). The bound leaves room for the slowest election on a
 * slow machine.
 */
const UNAVAILABILITY_BOUND_MS = 15_000;
/** A 1v1 queue ticking every 50 ms, outcomes to the broker. */
const DUEL = duelQueue(50, { outcomes: { sink: 'broker' } });
/** A 1v1 queue ticking every 200 ms: a cancel sent within a tick of the create may come before the match. */
const SLOW_DUEL = duelQueue(200, { outcomes: { sink: 'broker' } });

describe('three replicas under concurrent load', () => {
  const group = useGroup({ 'eu.duel': DUEL, 'eu.race': SLOW_DUEL });

  it('matches tickets created on every replica over both transports exactly once, delivered with gap-free numbering', async () => {
    const g = group.g;
    const started = Date.now();
    const load = await new TicketLoad(g.clients, 'eu.duel', { count: 600, retryForMs: 0 }).done();
    expect(load.unacked).toEqual([]);
    const acked = load.acked.map((a) => a.id);
    const created = Date.now() - started;

    const unique = await g.outcomes.until((u) => matchesOf(u, 'eu.duel').length >= 300);
    const inMatch = matchedTickets(unique, 'eu.duel');
    expect(new Set(inMatch.keys())).toEqual(new Set(acked));
    expect(matchesOf(unique, 'eu.duel')).toHaveLength(300);
    expectGapFree(unique, 'eu.duel');
    // Every replica applied the same log: all 600 resolved, none active; every match delivered.
    for (const i of [0, 1, 2]) {
      const q = (await g.cluster.summaries(i)).find((s) => s.queueId === 'eu.duel');
      expect(q).toMatchObject({ queueId: 'eu.duel', state: 'running', activeTickets: 0, resolvedTickets: 600 });
    }
    const leader = await g.cluster.leaderOf('eu.duel');
    // The leader records its delivery progress in the log after the sink acknowledged: it follows shortly.
    const delivery = await pollUntil(
      async () => (await g.cluster.deliveries(leader)).find((d) => d.queueId === 'eu.duel'),
      (d) => d?.deliveredThrough === '300',
    );
    expect(delivery).toMatchObject({ queueId: 'eu.duel', deliveredThrough: '300', lastRecorded: '300' });
    console.log(`600 tickets created in ${created} ms`);
  }, 60_000);

  it('answers a CancelTicket racing the match of its ticket through another replica either OK (no match holds it) or FAILED_PRECONDITION (a match does)', async () => {
    const g = group.g;
    const PAIRS = 60;
    /** One round of the race: every answer checked against the outcomes; answers how many cancels won. */
    const race = async (round: number) => {
      const cancels = await Promise.all(
        Array.from({ length: PAIRS }, async (_, i) => {
          const [ticket, partner] = [uuid(), uuid()];
          // The ticket and its would-be partner through two replicas, the cancel through the third up to five
          // ticks (200 ms each) later: sometimes the leader matches first, sometimes the cancel is applied first.
          await sleep((i * 7) % 200);
          const created = await Promise.all([
            g.clients.of(i % 3)[i % 2]!.createTicket({ id: ticket, queueId: 'eu.race', engineInput: party(1) }),
            g.clients.of((i + 1) % 3)[(i + 1) % 2]!.createTicket({ id: partner, queueId: 'eu.race', engineInput: party(1) }),
          ]);
          expect(created.map((c) => c.ok)).toEqual([true, true]);
          // Spread over five ticks: a leader slowed for a few hundred milliseconds (a busy CI machine) still
          // matches the later ones first, where a spread of 250 ms once saw every cancel first. Every fourth
          // cancel goes at once: with only the spread, a slow run once saw none of the 60 cancels first.
          await sleep(i % 4 === 0 ? 0 : (i * 37) % 1000);
          const cancel = await g.clients.of((i + 2) % 3)[i % 2]!.cancelTicket('eu.race', ticket);
          return { ticket, partner, cancel };
        }),
      );
      // Partners whose ticket was cancelled wait for another: the remaining active ones match among
      // themselves, at most one left over (of this round and the rounds before).
      const unique = await g.outcomes.until((u) => {
        const inMatch = new Set(matchesOf(u, 'eu.race').flatMap((m) => m.tickets));
        return (
          cancels.every((c) => c.cancel.ok || inMatch.has(c.ticket)) && cancels.filter((c) => !inMatch.has(c.partner)).length <= 1 + round
        );
      });
      if (matchesOf(unique, 'eu.race').length === 0) {
        // Once on Node 22 in CI: every cancel won and no match was read at all. Say what the replicas saw.
        const deliveries = await Promise.all([0, 1, 2].map((i) => g.cluster.deliveries(i).catch(String)));
        expect.fail(
          `no match of eu.race read from the outcome stream in round ${round} (${cancels.filter((c) => c.cancel.ok).length} of ${PAIRS}` +
            ` cancels won); deliveries: ${JSON.stringify(deliveries)}; leadership: ${await g.cluster.leadershipReport('eu.race')}`,
        );
      }
      const inMatch = matchedTickets(unique, 'eu.race');
      for (const { ticket, cancel } of cancels) {
        if (cancel.ok) expect(inMatch.has(ticket), `cancelled ticket ${ticket} in match ${inMatch.get(ticket)}`).toBe(false);
        else {
          expect(cancel.code, cancel.message).toBe('FAILED_PRECONDITION');
          expect(inMatch.has(ticket), `ticket ${ticket}: cancel refused, yet in no match`).toBe(true);
        }
      }
      expectGapFree(unique, 'eu.race');
      return cancels.filter((c) => c.cancel.ok).length;
    };
    // The race must go both ways. On a machine slowed by other work it once went one way for all 60 pairs
    // (a CI run on Node 22: every cancel lost): a round that goes one way is run again, up to three rounds.
    const won: number[] = [];
    for (let round = 0; round < 3 && !won.some((n) => n > 0 && n < PAIRS); round++) won.push(await race(round));
    expect(
      won.some((n) => n > 0 && n < PAIRS),
      `cancels that won, by round: ${won.join(', ')}`,
    ).toBe(true);
    console.log(`cancel race: ${won.join(', ')} of ${PAIRS} cancelled first, by round`);
  }, 60_000);

  it('a replica restarted (kill -9) catches up and reports the same counts as the others', async () => {
    const g = group.g;
    const leader = await g.cluster.leaderOf('eu.duel');
    const follower = (leader + 1) % 3;
    await g.cluster.kill(follower);
    // Tickets while it is gone: an odd number, so one stays active.
    const load = await new TicketLoad(g.clients, 'eu.duel', { count: 41, retryForMs: 0 }).done();
    const acked = load.acked.map((a) => a.id);
    expect(acked).toHaveLength(41);
    await g.cluster.start(follower);
    await g.cluster.untilRunning();
    const all = await pollUntil(
      () => Promise.all([0, 1, 2].map((i) => counts(g.cluster, i))),
      // Settled: the same everywhere, and every ticket matched but the odd one.
      (c) => c.every((x) => JSON.stringify(x) === JSON.stringify(c[0])) && c[0]!.find((q) => q.queueId === 'eu.duel')!.activeTickets === 1,
    );
    expect(all[leader]!.find((q) => q.queueId === 'eu.duel')!.activeTickets).toBe(1);
    expect(all[follower]).toEqual(all[leader]);
    expect(all[(follower + 1) % 3]).toEqual(all[leader]);
    // The restarted replica knows what happened while it was gone: the new tickets, each resolved or active.
    const states = await Promise.all(
      acked.map(async (id) => (await adminTicket(g.cluster.replicas[follower]!.service!, 'eu.duel', id)).body.state),
    );
    expect(states.filter((s) => s === 'resolved').length).toBeGreaterThanOrEqual(40);
    expect(states.every((s) => s === 'resolved' || s === 'active')).toBe(true);
  }, 60_000);
});

describe('leader failures under load (kill -9, SIGSTOP past the lease)', () => {
  /** A queue whose one-player tickets never match (teams of 50) and expire after a second. */
  const EXPIRING = duelQueue(50, { ruleset: { team_size: 50 }, config: { ticket_ttl_secs: 1 }, outcomes: { sink: 'broker' } });
  const group = useGroup({ 'eu.duel': DUEL, 'eu.expiring': EXPIRING });
  /** A leader that vanished is replaced (the lease ages out: LEASE_MS), and the new one has matched and
   *  delivered within this long of the kill. */
  const FAILOVER_BOUND_MS = LEASE_MS + 5000;

  it('kill -9 of the leader, three times while tickets are created: none lost, none in two matches, none expired twice, a new leader matches within the bound', async () => {
    const g = group.g;
    const load = new TicketLoad(g.clients, 'eu.duel', {
      queueOf: (n) => (n % 5 === 4 ? 'eu.expiring' : 'eu.duel'),
      concurrency: 4,
      paceMs: 20,
    });
    const failovers: number[] = [];
    try {
      for (let round = 0; round < 3; round++) {
        await sleep(500);
        const leader = await g.cluster.leaderOf('eu.duel');
        const survivors = [0, 1, 2].filter((i) => i !== leader);
        await g.cluster.kill(leader);
        const killedAt = Date.now();
        await g.cluster.leaderOf('eu.duel', { among: survivors, timeoutMs: FAILOVER_BOUND_MS });
        // Matched again: a match made after the kill, read back from the outcome stream.
        const after = await g.outcomes.until(
          (u) => matchesOf(u, 'eu.duel').length > 0 && u.some((o) => o.outcome.kind === 'match.created' && timestampMs(o) > killedAt),
          Math.max(0, killedAt + FAILOVER_BOUND_MS - Date.now()),
        );
        const firstMatch = after.find((o) => o.outcome.kind === 'match.created' && timestampMs(o) > killedAt);
        expect(firstMatch, `round ${round}: a match after the kill`).toBeDefined();
        failovers.push(Date.now() - killedAt);
        expect(failovers.at(-1)!).toBeLessThan(FAILOVER_BOUND_MS);
        await g.cluster.start(leader);
        await g.cluster.untilRunning();
      }
    } finally {
      await load.stop();
    }
    console.log(`failovers (kill to a new match read back): ${failovers.join(', ')} ms; unacked ${load.unacked.length}`);
    await expectNoTicketLost(
      g,
      'eu.duel',
      load.ackedIn('eu.duel').map((a) => a.id),
    );
    // Expiry: every acknowledged ticket of the expiring queue expires (a second after its creation), in one
    // tickets.expired outcome only, however often a leader delivered it.
    const expiring = load.ackedIn('eu.expiring').map((a) => a.id);
    expect(expiring.length).toBeGreaterThan(20);
    const unique = await g.outcomes.until((u) => {
      const expired = new Set(u.flatMap((o) => (o.outcome.payload.case === 'ticketsExpired' ? o.outcome.payload.value.ticketIds : [])));
      return expiring.every((id) => expired.has(id));
    }, 10_000);
    const expired = expiredTickets(unique, 'eu.expiring');
    expect(expiring.filter((id) => !expired.has(id))).toEqual([]);
    expect(matchesOf(unique, 'eu.expiring')).toEqual([]);
    expectGapFree(unique, 'eu.duel');
    expectGapFree(unique, 'eu.expiring');
    console.log(`outcome stream: ${g.outcomes.all.length} messages, ${unique.length} outcomes`);
  }, 60_000);

  it('SIGSTOP of the leader past its lease: another replica leads and matches meanwhile; after SIGCONT nothing the old leader appends takes effect', async () => {
    const g = group.g;
    const paused = new Set<number>();
    const load = new TicketLoad(g.clients, 'eu.duel', { concurrency: 4, paceMs: 20, skip: paused });
    let old: number | undefined;
    try {
      await sleep(500);
      old = await g.cluster.leaderOf('eu.duel');
      const process = g.cluster.replicas[old]!.service!.process;
      paused.add(old);
      process.kill('SIGSTOP');
      const stoppedAt = Date.now();
      const others = [0, 1, 2].filter((i) => i !== old);
      await g.cluster.leaderOf('eu.duel', { among: others, timeoutMs: FAILOVER_BOUND_MS });
      const unique = await g.outcomes.until(
        (u) => u.some((o) => o.outcome.kind === 'match.created' && timestampMs(o) > stoppedAt),
        Math.max(0, stoppedAt + FAILOVER_BOUND_MS - Date.now()),
      );
      expect(unique.some((o) => o.outcome.kind === 'match.created' && timestampMs(o) > stoppedAt)).toBe(true);
      // Well past its lease (and a second of matches by the new leader), the old leader wakes up with the
      // pool it last saw and its timers overdue: whatever it proposes or delivers now is from an old term.
      await sleep(Math.max(0, stoppedAt + LEASE_MS + 1500 - Date.now()));
      process.kill('SIGCONT');
      paused.delete(old!);
      // It finds out by its own clock that its lease is gone, and stops acting as the leader.
      await g.cluster.replicas[old!]!.service!.waitForLog(
        (l) => l.msg === 'leader lease expired unrenewed: no longer acting as leader',
        5000,
      );
      await sleep(1000);
    } finally {
      if (old !== undefined && paused.has(old)) g.cluster.replicas[old]!.service?.process.kill('SIGCONT');
      await load.stop();
    }
    expect(load.unacked).toEqual([]);
    // The three replicas (the old leader included) converge on the same counts; no ticket in two matches.
    expect([0, 1, 2].every((i) => g.cluster.replicas[i]!.running)).toBe(true);
    await expectNoTicketLost(
      g,
      'eu.duel',
      load.acked.map((a) => a.id),
    );
    expectGapFree(g.outcomes.unique, 'eu.duel');
  }, 40_000);
});

describe('a NATS node killed and restarted while tickets flow', () => {
  const group = useGroup({ 'eu.duel': DUEL });

  it('creates keep succeeding after a short unavailability and matching goes on, none lost', async () => {
    const g = group.g;
    const jsm = await jetstreamManager(g.nc);
    // The service made every stream R3, the outcome stream included.
    const logStream = replicationStreamName(g.cluster.env.BROKER_STREAM_REPLICATION_PREFIX!, 'eu.duel');
    expect((await jsm.streams.info(logStream)).config.num_replicas).toBe(3);
    expect((await jsm.streams.info(g.cluster.outcomeStream)).config.num_replicas).toBe(3);
    // The worst node to lose: the one leading the queue's log.
    const leaderName = (await jsm.streams.info(logStream)).cluster?.leader;
    const node = Number(leaderName?.replace(/^n/, ''));
    expect([0, 1, 2]).toContain(node);

    const load = new TicketLoad(g.clients, 'eu.duel', { concurrency: 4, paceMs: 20 });
    let killedAt = 0;
    let restartedAt = 0;
    try {
      await sleep(1000);
      await g.nats.kill(node);
      killedAt = Date.now();
      // The node stays down until creates have been acknowledged again for a while, and a match made
      // without it is read back from the outcome stream.
      const recovered = await pollUntil(
        async () => load.acked.filter((a) => a.at > killedAt).length,
        (n) => n >= 100,
        UNAVAILABILITY_BOUND_MS + 5000,
        100,
      );
      if (recovered < 100) {
        // What the broker and the replicas said: the log stream's leader now, and each replica's last lines.
        const now = await jsm.streams.info(logStream).then((i) => JSON.stringify(i.cluster), String);
        expect.fail(
          `${recovered} creates acknowledged in ${Date.now() - killedAt} ms since node ${node} was killed; log stream cluster: ${now};` +
            ` leadership: ${await g.cluster.leadershipReport('eu.duel')}`,
        );
      }
      const during = await g.outcomes.until((u) => u.some((o) => o.outcome.kind === 'match.created' && timestampMs(o) > killedAt + 1000));
      if (!during.some((o) => o.outcome.kind === 'match.created' && timestampMs(o) > killedAt + 1000)) {
        const deliveries = await Promise.all([0, 1, 2].map((i) => g.cluster.deliveries(i).catch(String)));
        expect.fail(
          `no match stored over ${Date.now() - killedAt} ms since node ${node} was killed (outcome stream read to ${during.length}` +
            ` outcomes); deliveries: ${JSON.stringify(deliveries)}; leadership: ${await g.cluster.leadershipReport('eu.duel')}`,
        );
      }
      await g.nats.restart(node);
      restartedAt = Date.now();
      await sleep(1000);
    } finally {
      if (!g.nats.running(node)) await g.nats.restart(node);
      await load.stop();
    }
    expect(load.unacked).toEqual([]);
    // The longest time without an acknowledged create while the node was down: a short unavailability.
    const acks = load.acked.map((a) => a.at).filter((at) => at >= killedAt && at <= restartedAt);
    const gaps = [...acks, restartedAt].map((at, i) => at - ([killedAt, ...acks][i] ?? killedAt));
    const longest = Math.max(...gaps);
    console.log(`NATS node down ${restartedAt - killedAt} ms: ${acks.length} creates acknowledged, longest gap ${longest} ms`);
    expect(longest).toBeLessThan(UNAVAILABILITY_BOUND_MS);
    const after = await g.outcomes.until((u) => u.some((o) => o.outcome.kind === 'match.created' && timestampMs(o) > restartedAt));
    expect(after.some((o) => o.outcome.kind === 'match.created' && timestampMs(o) > restartedAt)).toBe(true);
    await expectNoTicketLost(
      g,
      'eu.duel',
      load.acked.map((a) => a.id),
    );
    expectGapFree(g.outcomes.unique, 'eu.duel');
  }, 45_000);
});

describe('bind mode: resources provisioned by the operator', () => {
  const PREFIX = 'bind.repl';
  const names = {
    BROKER_RESOURCE_MODE: 'bind',
    BROKER_SUBJECT_PREFIX_REPLICATION: PREFIX,
    BROKER_KV_COORDINATION: 'BIND_COORD',
    BROKER_OBJECT_STORE_CHECKPOINTS: 'BIND_CKPT',
    BROKER_STREAM_OUTCOMES: 'BIND_OUTCOMES',
    BROKER_SUBJECT_PREFIX_OUTCOMES: 'bind.outcomes',
  };
  const bound = (stream: string) =>
    duelQueue(50, { outcomes: { sink: 'broker' }, config: { replication: { binding: { stream_name: stream } } } });
  const group = useGroup(
    { 'eu.duel': bound('BIND_EU_DUEL') },
    {
      env: names,
      provision: async (nc) => {
        const jsm = await jetstreamManager(nc);
        const stream = { storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: 3 };
        await jsm.streams.add({ ...stream, name: 'BIND_EU_DUEL', subjects: [`${PREFIX}.*.eu.duel`] });
        await jsm.streams.add({ ...stream, name: 'BIND_OUTCOMES', subjects: ['bind.outcomes.>'] });
        await new Kvm(nc).create('BIND_COORD', { ttl: LEASE_MS, history: 1, replicas: 3 });
        await new Objm(nc).create('BIND_CKPT', { replicas: 3 });
      },
    },
  );

  it('replicas start on the provisioned resources and serve', async () => {
    const g = group.g;
    const load = await new TicketLoad(g.clients, 'eu.duel', { count: 60, retryForMs: 0 }).done();
    expect(load.unacked).toEqual([]);
    const unique = await g.outcomes.until((u) => matchesOf(u, 'eu.duel').length >= 30);
    expect(new Set(matchedTickets(unique, 'eu.duel').keys())).toEqual(new Set(load.acked.map((a) => a.id)));
    expectGapFree(unique, 'eu.duel');
    // Nothing else was made: the streams are the ones provisioned.
    const jsm = await jetstreamManager(g.nc);
    const streams: string[] = [];
    for await (const s of jsm.streams.list()) if (!s.config.name.startsWith(PROBE_PREFIX)) streams.push(s.config.name);
    expect(streams.sort()).toEqual(['BIND_EU_DUEL', 'BIND_OUTCOMES', 'KV_BIND_COORD', 'OBJ_BIND_CKPT']);
  });

  it("a replica whose queue's stream is missing exits non-zero, naming the stream", async () => {
    const g = group.g;
    const queueDir = tempDir('bind-missing');
    const dataDir = tempDir('bind-missing-data');
    writeQueues(queueDir, { 'eu.duel': bound('BIND_EU_DUEL'), 'eu.missing': bound('BIND_EU_MISSING') });
    const serve = serveProcess({ queueDir, dataDir, env: { ...g.cluster.env, REPLICA_ID: 'bind-missing' } });
    try {
      const code = await Promise.race([serve.exited, sleep(20_000).then(() => 'still running')]);
      expect(code).not.toBe('still running');
      expect(code).not.toBe(0);
      const said = `${serve.stderr()}\n${serve.logs.map((l) => JSON.stringify(l)).join('\n')}`;
      expect(said).toContain('BIND_EU_MISSING');
      expect(said).toContain('does not exist');
    } finally {
      await serve.kill();
      removeDirs(queueDir, dataDir);
    }
  });
});
