// A NATS cluster and three replicas of the service on it, started once per describe (useGroup), and what
// the replicated tests check of them afterwards: no ticket in two matches or two expiries, gap-free
// numbering, nothing acknowledged lost once the queue has settled; and when the queue's matches took effect.
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { OUTCOME_STORED_LATE } from '../../src/outcomes/sinks/broker-sink.js';
import { decodeLogEntry } from '../../src/replication/wire/record-codec.js';
import { startNatsCluster, type TestNatsCluster } from './nats-cluster.js';
import { adminTicket, pollUntil } from './queues.js';
import { OutcomeLog, startServiceCluster, type ServiceCluster, type StreamedOutcome } from './service-cluster.js';
import { ClusterClients } from './ticket-load.js';

/** LEADER_LEASE_MS of the replicas a group starts. */
export const LEASE_MS = 2000;

export interface Group {
  nats: TestNatsCluster;
  cluster: ServiceCluster;
  clients: ClusterClients;
  nc: NatsConnection;
  outcomes: OutcomeLog;
}

export interface GroupOptions {
  /** LEADER_LEASE_MS of the replicas (default LEASE_MS). */
  leaseMs?: number;
  /** More environment of every replica. */
  env?: Record<string, string>;
  /** Runs before the replicas start (resources an operator provisions). */
  provision?: (nc: NatsConnection) => Promise<void>;
}

/** A NATS cluster and three replicas serving `queues`, for one describe; `provision` runs before they start. */
export function useGroup(queues: Record<string, string>, options: GroupOptions = {}): { readonly g: Group } {
  let group: Group | undefined;
  beforeAll(async () => {
    const nats = await startNatsCluster();
    let nc: NatsConnection | undefined;
    let cluster: ServiceCluster | undefined;
    try {
      nc = await connect({ servers: [...nats.servers], maxReconnectAttempts: -1, reconnectTimeWait: 100 });
      await options.provision?.(nc);
      cluster = await startServiceCluster({ nats, queues, leaseMs: options.leaseMs ?? LEASE_MS, env: options.env });
      await cluster.untilRunning();
    } catch (err) {
      await cluster?.dispose();
      await nc?.close();
      await nats.dispose();
      throw err;
    }
    group = { nats, cluster, clients: new ClusterClients(cluster), nc, outcomes: new OutcomeLog(nc, cluster.outcomeStream) };
  }, 90_000);
  beforeEach(({ onTestFailed }) => {
    const startedAt = Date.now();
    // What the replicas warned about during a failed test: the service's side of the story.
    onTestFailed(() => {
      for (const [i, r] of (group?.cluster.replicas ?? []).entries()) {
        for (const l of r.service?.logs ?? []) {
          if ((l.time as number) < startedAt || (l.level as number) < 40) continue;
          const err = l.err as { message?: string } | undefined;
          console.log(`replica ${i} +${(l.time as number) - startedAt} ms: ${String(l.msg)} ${err?.message?.slice(0, 200) ?? ''}`);
        }
      }
    });
  });
  afterEach(() => {
    // A replica that died by itself is a failure of the service, whatever the test asserted.
    expect(group?.cluster.unexpectedExits).toEqual([]);
  });
  afterAll(async () => {
    if (!group) return;
    group.clients.close();
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

export const matchesOf = (outcomes: readonly StreamedOutcome[], queueId: string) =>
  outcomes
    .filter((o) => o.outcome.queueId === queueId && o.outcome.kind === 'match.created')
    .map((o) => {
      if (o.outcome.payload.case !== 'matchCreated') throw new Error(`match.created ${o.outcome.id} without its payload`);
      return { id: o.outcome.id, tickets: o.outcome.payload.value.match!.tickets.map((t) => t.id) };
    });

/** Ticket id -> the match ids holding it; fails the test if one is in two matches. */
export function matchedTickets(outcomes: readonly StreamedOutcome[], queueId: string): Map<string, string> {
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
export function expectGapFree(outcomes: readonly StreamedOutcome[], queueId: string): void {
  const mine = outcomes.filter((o) => o.outcome.queueId === queueId);
  expect(new Set(mine.map((o) => o.outcome.producerId)).size).toBe(1);
  expect(mine.map((o) => Number(o.outcome.producerSequence))).toEqual(mine.map((_, i) => i + 1));
}

/**
 * expectGapFree through a NATS node's fault: every number from 1 on, none missing and none twice; and in the
 * stream in occurrence order unless a replica reported the one exception the broker sink documents
 * (docs/outcomes-broker.md, "Order": a publish lost while a later one of its batch was stored).
 */
export function expectGapFreeThroughFaults(g: Group, queueId: string): void {
  const reported = g.cluster.replicas.some((r) => (r.service?.logs ?? []).some((l) => l.msg === OUTCOME_STORED_LATE));
  if (!reported) return expectGapFree(g.outcomes.unique, queueId);
  const mine = g.outcomes.unique.filter((o) => o.outcome.queueId === queueId);
  expect(new Set(mine.map((o) => o.outcome.producerId)).size).toBe(1);
  const numbers = mine.map((o) => Number(o.outcome.producerSequence)).sort((a, b) => a - b);
  expect(numbers, 'the numbering from 1, without a gap').toEqual(numbers.map((_, i) => i + 1));
}

/** Each queue's counts on replica `i` (state, active, resolved, backfill requests), by queue id. */
export async function counts(cluster: ServiceCluster, i: number) {
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

/** When an outcome occurred (its occurred_at), in milliseconds since the epoch. */
export const timestampMs = (o: StreamedOutcome) => Number(o.outcome.occurredAt!.seconds) * 1000 + o.outcome.occurredAt!.nanos / 1e6;

/** Ticket id -> the tickets.expired outcome id holding it; fails the test if one is in two such outcomes. */
export function expiredTickets(outcomes: readonly StreamedOutcome[], queueId: string): Map<string, string> {
  const expired = new Map<string, string>();
  for (const o of outcomes) {
    if (o.outcome.queueId !== queueId || o.outcome.payload.case !== 'ticketsExpired') continue;
    for (const id of o.outcome.payload.value.ticketIds) {
      expect(expired.get(id), `ticket ${id} expired by ${expired.get(id)} and ${o.outcome.id}`).toBeUndefined();
      expired.set(id, o.outcome.id);
    }
  }
  return expired;
}

/**
 * Once the load stopped and the queue settled: every acknowledged ticket is in one match or still active on
 * every running replica (none lost), and the running replicas hold the same counts.
 */
export async function expectNoTicketLost(g: Group, queueId: string, acked: readonly string[], settleMs = 20_000): Promise<void> {
  const settleFrom = Date.now();
  const running = [0, 1, 2].filter((i) => g.cluster.replicas[i]!.running);
  // Settled: every replica holds the same counts, and the stream holds every match they resolved.
  // Once, halfway: the stream read again from its start, in case a read during the fault was served stale.
  let reread = false;
  const settled = await pollUntil(
    async () => {
      const all = await Promise.all(running.map((i) => counts(g.cluster, i)));
      if (!reread && Date.now() - settleFrom > settleMs / 2) {
        reread = true;
        const before = g.outcomes.unique.length;
        const again = await g.outcomes.reread().catch(() => undefined);
        if (again) console.log(`the outcome stream read again: ${again.length} outcomes, ${before} before`);
      }
      const unique = await g.outcomes.sync().catch(() => g.outcomes.unique);
      return { all, matched: matchesOf(unique, queueId).length * 2 };
    },
    // In a 1v1 queue of like tickets, any two active ones match at the next tick: at most one stays active.
    ({ all, matched }) =>
      all.every((c) => JSON.stringify(c) === JSON.stringify(all[0])) &&
      all[0]!.find((q) => q.queueId === queueId)!.activeTickets <= 1 &&
      all[0]!.find((q) => q.queueId === queueId)!.resolvedTickets === matched,
    settleMs,
    200,
  );
  console.log(`settled (every replica the same counts, every match in the stream) ${Date.now() - settleFrom} ms after the load stopped`);
  if (!settled.all.every((c) => JSON.stringify(c) === JSON.stringify(settled.all[0]))) {
    // Where each replica is in the log and under which claim it applies the leader's entries: a replica whose
    // term differs from the others' at the same position applies none of their leader's entries.
    const positions = await Promise.all(
      running.map(async (i) => {
        const mine = (await g.cluster.summaries(i).catch(() => [])).find((q) => q.queueId === queueId);
        return { replica: i, leading: mine?.leading, logPosition: mine?.logPosition, logTerm: mine?.logTerm };
      }),
    );
    console.log(
      `not settled: matches in the stream ${settled.matched / 2}; per replica ${JSON.stringify(settled.all)}; log ${JSON.stringify(positions)}`,
    );
  }
  if (settled.all[0]!.find((q) => q.queueId === queueId)!.resolvedTickets !== settled.matched) {
    // Whether a resolved match's outcome was never delivered or was delivered and is not in the stream: each
    // replica's delivery position against the outcomes the stream holds.
    const deliveries = await Promise.all(
      running.map(async (i) => (await g.cluster.deliveries(i).catch(() => [])).find((d) => d.queueId === queueId)),
    );
    const sequences = g.outcomes.unique.filter((o) => o.outcome.queueId === queueId).map((o) => o.outcome.producerSequence);
    let highest = 0n;
    for (const sequence of sequences) if (sequence > highest) highest = sequence;
    const held = new Set(sequences);
    const missing: string[] = [];
    for (let n = 1n; n <= highest && missing.length < 20; n++) if (!held.has(n)) missing.push(String(n));
    console.log(
      `the stream lacks matches: ${sequences.length} outcomes of the queue in it, the highest producer_sequence ${highest}, ` +
        `missing ${JSON.stringify(missing)}; deliveries per replica ${JSON.stringify(deliveries)}`,
    );
  }
  for (const c of settled.all) expect(c).toEqual(settled.all[0]);
  const inMatch = matchedTickets(g.outcomes.unique, queueId);
  const unmatched = acked.filter((id) => !inMatch.has(id));
  expect(settled.all[0]!.find((q) => q.queueId === queueId)).toMatchObject({ resolvedTickets: settled.matched });
  expect(settled.all[0]!.find((q) => q.queueId === queueId)!.activeTickets).toBeLessThanOrEqual(1);
  for (const i of running) {
    const states = await Promise.all(
      unmatched.map(async (id) => `${id}: ${(await adminTicket(g.cluster.replicas[i]!.service!, queueId, id)).body.state ?? 'unknown'}`),
    );
    expect(states).toEqual(unmatched.map((id) => `${id}: active`));
  }
}

/**
 * When the queue's log stored its entries (the stream's timestamp, which its leader node stamps), and when
 * each match took effect: the store time of every match.commit in an entry of the current term (an entry
 * of an earlier term is skipped by every replica, so its matches never happen). Sorted, in milliseconds
 * since the epoch. Reads the whole log (a test's log: thousands of entries).
 */
export async function logStoreTimes(nc: NatsConnection, stream: string): Promise<{ entries: number[]; matches: number[] }> {
  const jsm = await jetstreamManager(nc, { timeout: 5000 });
  const last = (await jsm.streams.info(stream)).state.last_seq;
  const entries: number[] = [];
  const matches: number[] = [];
  let term = 0;
  for (let read = 0; read < last; ) {
    const consumer = await jetstream(nc, { timeout: 5000 }).consumers.get(stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: read + 1,
    });
    const messages = await consumer.fetch({ max_messages: Math.min(1000, last - read), expires: 3000 });
    let got = 0;
    for await (const m of messages) {
      got++;
      read = m.seq;
      const storedAt = Math.floor(Number(m.info.timestampNanos) / 1e6);
      entries.push(storedAt);
      const entry = decodeLogEntry(m.data);
      if (entry.kind === 'claim') term = m.seq;
      else if (entry.term === 0 || entry.term === term) {
        for (const r of entry.records) if (r.type === 'match.commit') matches.push(storedAt);
      }
    }
    if (got === 0) throw new Error(`log ${stream}: nothing read past ${read} of ${last}`);
  }
  const ascending = (a: number, b: number) => a - b;
  return { entries: entries.sort(ascending), matches: matches.sort(ascending) };
}
