// The replicated mode with the real parts: three service processes (the built CLI) on a three-node NATS
// cluster, R3 streams, LEADER_LEASE_MS=2000. Tickets go to every replica over both transports; outcomes are
// read back from the outcome stream as a customer would (deduplicated by outcome id). Each describe has a
// cluster and three replicas of its own.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { party, uuid } from './support/fixtures.js';
import { startNatsCluster, type TestNatsCluster } from './support/nats-cluster.js';
import { adminTicket, duelQueue, pollUntil } from './support/queues.js';
import { OutcomeLog, sleep, startServiceCluster, type ServiceCluster, type StreamedOutcome } from './support/service-cluster.js';
import type { Result, Transport } from './support/transports.js';

const LEASE_MS = 2000;
/** A 1v1 queue ticking every 50 ms, outcomes to the broker. */
const DUEL = duelQueue(50, { outcomes: { sink: 'broker' } });
/** A 1v1 queue ticking every 200 ms: a cancel sent within a tick of the create may come before the match. */
const SLOW_DUEL = duelQueue(200, { outcomes: { sink: 'broker' } });

interface Group {
  nats: TestNatsCluster;
  cluster: ServiceCluster;
  nc: NatsConnection;
  outcomes: OutcomeLog;
}

/** A NATS cluster and three replicas serving `queues`, for one describe. */
function useGroup(queues: Record<string, string>): { readonly g: Group } {
  let group: Group | undefined;
  beforeAll(async () => {
    const nats = await startNatsCluster();
    try {
      const cluster = await startServiceCluster({ nats, queues, leaseMs: LEASE_MS });
      const nc = await connect({ servers: [...nats.servers], maxReconnectAttempts: -1, reconnectTimeWait: 100 });
      group = { nats, cluster, nc, outcomes: new OutcomeLog(nc, cluster.outcomeStream) };
      await cluster.untilRunning();
    } catch (err) {
      await group?.cluster.dispose();
      await nats.dispose();
      throw err;
    }
  }, 60_000);
  afterAll(async () => {
    if (!group) return;
    await group.nc.close();
    await group.cluster.dispose();
    await group.nats.dispose();
  });
  return {
    get g() {
      if (!group) throw new Error('the group is not started');
      return group;
    },
  };
}

/** Every transport to every running replica: the clients a load balancer would spread requests over. */
function clients(cluster: ServiceCluster): Transport[][] {
  return cluster.replicas.map((r) => (r.running ? [r.grpc(), r.http()] : []));
}

/**
 * CreateTicket as a real client does it: on UNAVAILABLE (or a connection that fails) it waits, backing off,
 * and retries the same ticket id on the next replica. Resolves whether the create was acknowledged.
 */
async function createTicket(
  cluster: ServiceCluster,
  pool: Transport[][],
  ticket: { id: string; queueId: string },
  start: number,
  deadline: number,
): Promise<boolean> {
  for (let attempt = 0, backoff = 50; ; attempt++, backoff = Math.min(backoff * 2, 1000)) {
    const replica = (start + attempt) % pool.length;
    const transports = pool[replica]!;
    let result: Result<unknown> | undefined;
    if (cluster.replicas[replica]!.running && transports.length > 0) {
      const t = transports[(start + attempt) % transports.length]!;
      result = await t.createTicket({ ...ticket, engineInput: party(1) }).catch(() => undefined);
    }
    if (result?.ok) return true;
    if (result && result.code !== 'UNAVAILABLE') throw new Error(`CreateTicket ${ticket.id}: ${result.code} ${result.message}`);
    if (Date.now() + backoff >= deadline) return false;
    await sleep(backoff);
  }
}

/** Creates `count` tickets, `concurrency` at a time, spread over the replicas; answers the acknowledged ids. */
async function createMany(
  cluster: ServiceCluster,
  queueId: string,
  count: number,
  options: { concurrency?: number; timeoutMs?: number; paceMs?: number } = {},
): Promise<{ acked: string[]; unacked: string[] }> {
  const pool = clients(cluster);
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  const acked: string[] = [];
  const unacked: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      const id = uuid();
      ((await createTicket(cluster, pool, { id, queueId }, i, deadline)) ? acked : unacked).push(id);
      if (options.paceMs) await sleep(options.paceMs);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 24 }, worker));
  return { acked, unacked };
}

const matchesOf = (outcomes: readonly StreamedOutcome[], queueId: string) =>
  outcomes
    .filter((o) => o.outcome.queueId === queueId && o.outcome.kind === 'match.created')
    .map((o) => {
      if (o.outcome.payload.case !== 'matchCreated') throw new Error(`match.created ${o.outcome.id} without its payload`);
      return { id: o.outcome.id, tickets: o.outcome.payload.value.match!.tickets.map((t) => t.id) };
    });

/** Ticket id -> the match ids holding it; fails the test if one is in two matches. */
function matchedTickets(outcomes: readonly StreamedOutcome[], queueId: string): Map<string, string> {
  const inMatch = new Map<string, string>();
  for (const match of matchesOf(outcomes, queueId)) {
    for (const id of match.tickets) {
      expect(inMatch.get(id), `ticket ${id} in matches ${inMatch.get(id)} and ${match.id}`).toBeUndefined();
      inMatch.set(id, match.id);
    }
  }
  return inMatch;
}

/** A queue's outcomes (deduplicated, in stream order) are numbered 1, 2, 3... by one producer. */
function expectGapFree(outcomes: readonly StreamedOutcome[], queueId: string): void {
  const mine = outcomes.filter((o) => o.outcome.queueId === queueId);
  expect(new Set(mine.map((o) => o.outcome.producerId)).size).toBe(1);
  expect(mine.map((o) => Number(o.outcome.producerSequence))).toEqual(mine.map((_, i) => i + 1));
}

/** Each queue's counts on replica `i` (state, active, resolved, backfill requests), by queue id. */
async function counts(cluster: ServiceCluster, i: number) {
  const summaries = await cluster.summaries(i);
  return summaries
    .map(({ queueId, state, activeTickets, resolvedTickets, backfillRequests }) => ({
      queueId,
      state,
      activeTickets,
      resolvedTickets,
      backfillRequests,
    }))
    .sort((a, b) => a.queueId.localeCompare(b.queueId));
}

describe('three replicas under concurrent load', () => {
  const group = useGroup({ 'eu.duel': DUEL, 'eu.race': SLOW_DUEL });

  it('matches tickets created on every replica over both transports exactly once, delivered with gap-free numbering', async () => {
    const g = group.g;
    const started = Date.now();
    const { acked, unacked } = await createMany(g.cluster, 'eu.duel', 600);
    expect(unacked).toEqual([]);
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
    expect(leader).toBeDefined();
    const delivery = (await g.cluster.deliveries(leader!)).find((d) => d.queueId === 'eu.duel');
    expect(delivery).toMatchObject({ queueId: 'eu.duel', deliveredThrough: '300', lastRecorded: '300' });
    console.log(`600 tickets created in ${created} ms`);
  }, 60_000);

  it('answers a CancelTicket racing the match of its ticket through another replica either OK (no match holds it) or FAILED_PRECONDITION (a match does)', async () => {
    const g = group.g;
    const pool = clients(g.cluster);
    const PAIRS = 60;
    const cancels = await Promise.all(
      Array.from({ length: PAIRS }, async (_, i) => {
        const [ticket, partner] = [uuid(), uuid()];
        // The ticket and its would-be partner through two replicas, the cancel through the third up to a tick
        // (200 ms) later: sometimes the leader matches first, sometimes the cancel is applied first.
        await sleep((i * 7) % 200);
        const created = await Promise.all([
          pool[i % 3]![i % 2]!.createTicket({ id: ticket, queueId: 'eu.race', engineInput: party(1) }),
          pool[(i + 1) % 3]![(i + 1) % 2]!.createTicket({ id: partner, queueId: 'eu.race', engineInput: party(1) }),
        ]);
        expect(created.map((c) => c.ok)).toEqual([true, true]);
        await sleep((i * 37) % 250);
        const cancel = await pool[(i + 2) % 3]![i % 2]!.cancelTicket('eu.race', ticket);
        return { ticket, partner, cancel };
      }),
    );
    // Partners whose ticket was cancelled wait for another: the remaining active ones match among themselves,
    // at most one left over.
    const cancelled = cancels.filter((c) => c.cancel.ok);
    const unique = await g.outcomes.until((u) => {
      const inMatch = new Set(matchesOf(u, 'eu.race').flatMap((m) => m.tickets));
      return cancels.every((c) => c.cancel.ok || inMatch.has(c.ticket)) && cancels.filter((c) => !inMatch.has(c.partner)).length <= 1;
    });
    const inMatch = matchedTickets(unique, 'eu.race');
    for (const { ticket, cancel } of cancels) {
      if (cancel.ok) expect(inMatch.has(ticket), `cancelled ticket ${ticket} in match ${inMatch.get(ticket)}`).toBe(false);
      else {
        expect(cancel.code, cancel.message).toBe('FAILED_PRECONDITION');
        expect(inMatch.has(ticket), `ticket ${ticket}: cancel refused, yet in no match`).toBe(true);
      }
    }
    // The race went both ways (the delays spread the cancels over the ticks).
    expect(cancelled.length).toBeGreaterThan(0);
    expect(cancelled.length).toBeLessThan(PAIRS);
    expectGapFree(unique, 'eu.race');
    console.log(`cancel race: ${cancelled.length} of ${PAIRS} cancelled first`);
  }, 30_000);

  it('a replica restarted (kill -9) catches up and reports the same counts as the others', async () => {
    const g = group.g;
    const leader = await g.cluster.leaderOf('eu.duel');
    expect(leader).toBeDefined();
    const follower = (leader! + 1) % 3;
    await g.cluster.kill(follower);
    // Tickets while it is gone: an odd number, so one stays active.
    const { acked } = await createMany(g.cluster, 'eu.duel', 41);
    expect(acked).toHaveLength(41);
    await g.cluster.start(follower);
    await g.cluster.untilRunning();
    const all = await pollUntil(
      () => Promise.all([0, 1, 2].map((i) => counts(g.cluster, i))),
      (c) => c.every((x) => JSON.stringify(x) === JSON.stringify(c[0])),
    );
    expect(all[leader!]!.find((q) => q.queueId === 'eu.duel')!.activeTickets).toBe(1);
    expect(all[follower]).toEqual(all[leader!]);
    expect(all[(follower + 1) % 3]).toEqual(all[leader!]);
    // The restarted replica knows what happened while it was gone: the new tickets, each resolved or active.
    const states = await Promise.all(
      acked.map(async (id) => (await adminTicket(g.cluster.replicas[follower]!.service!, 'eu.duel', id)).body.state),
    );
    expect(states.filter((s) => s === 'resolved').length).toBeGreaterThanOrEqual(40);
    expect(states.every((s) => s === 'resolved' || s === 'active')).toBe(true);
  }, 30_000);
});
