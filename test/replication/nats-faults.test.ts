// A NATS node fault under load, with the real parts: three service processes on a three-node nats-server
// 2.9 cluster (R3 streams), the node that leads the queue's replication stream hung (SIGSTOP) or killed
// (kill -9), and a replica connected to it where the cluster allows. Every replica gets creates of its own
// (test/support/replica-probes.ts) so that each one's recovery shows, and the streams' leaders are read
// from the nodes' monitoring endpoints (test/support/stream-leaders.ts).
//
// The bound is measured from the moment the queue's streams have leaders again, not from the fault:
// nats-server 2.9 elects a stream's new leader 4 to 9 s after losing the old one (its Raft election
// timeout), and nothing is stored meanwhile. After a hung node continues it may also make the cluster elect
// again the leaders of streams it followed (it asks for votes with a higher term; there is no pre-vote), for
// several seconds: the bound after its return is measured from the moment the streams have leaders again.
// Those moments are taken from direct evidence: the log's own store times (its entries' timestamps) and
// test writes to the coordination bucket from the other nodes (WriteProbe).
//
// Each test prints what it saw (leaders as named by the nodes, and the times from the fault); with
// FAULT_TEST_DUMP=<path prefix> it also writes the replicas' log lines from the fault on, and those times.
// FAULT_TEST_LEASE_MS sets LEADER_LEASE_MS (default 6000, the service's default).
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { replicationStreamName } from '../../src/replication/jetstream/names.js';
import { LOG_REGRESSED } from '../../src/replication/jetstream/replication-log.js';
import { LOG_DIVERGED } from '../../src/replication/replicated-history.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { ReplicaProbes } from '../support/replica-probes.js';
import {
  expectGapFreeThroughFaults,
  expectNoTicketLost,
  logStoreTimes,
  matchesOf,
  useGroup,
  type Group,
} from '../support/replicated-group.js';
import { sleep } from '../support/service-cluster.js';
import { leadOnAReplicasNode, replicaNode, StreamLeaderWatch, WriteProbe } from '../support/stream-leaders.js';

/**
 * The bound: within this long of the queue's streams (its replication log and the coordination
 * bucket holding its lease) having leaders again, every replica acknowledges creates sent to it and the
 * queue's leader has matched; and neither stops again for longer while the streams keep their leaders.
 * Measured on a shared two-core machine (five runs of each test): creates within 1.01 s of the log storing
 * again, matches within 1.7 s of the log and the bucket taking writes again. No CI slack is added.
 */
const RECOVERY_BOUND_MS = 5_000;
/** nats-server 2.9 elects a stream's leader 4 to 9 s after the old one went; the test waits this long. */
const ELECTION_WAIT_MS = 20_000;
/** After the node's return, how long the test waits at most for the streams to keep their leaders. */
const RETURN_WAIT_MS = 30_000;
/**
 * One retry, on the same cluster. Failures seen (about 30 runs of the stop case on a two-core machine, 4 failed even
 * with the retry): nats-server 2.9 left the coordination bucket without a leader for 30 s after the hung node's return;
 * it lost log entries it had delivered, so that every replica waited past the log's end (the replicas now log an
 * error for this, and a run where they did is skipped, see `brokerLosses`); one replica stayed far behind the
 * others from the fault on (cause not found). In CI, once, a 5.8 s gap without a match while the node was down.
 * A run that keeps every bound is needed to pass. FAULT_TEST_DUMP also writes the replicas' log lines up to the
 * settling check (`-settled.jsonl`), and NATS_TEST_LOG_DIR keeps the nats-servers' own logs.
 */
const FAULT_TEST = { retry: 1, timeout: 120_000 };
/** LEADER_LEASE_MS of the replicas. */
const LEADER_LEASE_MS = Number(process.env.FAULT_TEST_LEASE_MS ?? 6000);
/** A 1v1 queue ticking every 50 ms, outcomes to the broker. */
const DUEL = duelQueue(50, { outcomes: { sink: 'broker' } });
const QUEUE = 'eu.duel';

/** The longest time within [from, to] without one of `times` (from `from` to the first, between two, from the last to `to`). */
function longestGap(times: readonly number[], from: number, to: number): { ms: number; start: number; end: number } {
  const points = [from, ...times.filter((t) => t > from && t < to), to];
  let gap = { ms: 0, start: from, end: from };
  for (let i = 1; i < points.length; i++) {
    if (points[i]! - points[i - 1]! > gap.ms) gap = { ms: points[i]! - points[i - 1]!, start: points[i - 1]!, end: points[i]! };
  }
  return gap;
}

/** The end of the last time within [from, to] that the log stored nothing for over a second (`from` if none). */
function logTakesWritesFrom(entries: readonly number[], from: number, to: number): number {
  const points = [from, ...entries.filter((t) => t > from && t < to)];
  let back = from;
  for (let i = 1; i < points.length; i++) if (points[i]! - points[i - 1]! > 1000) back = points[i]!;
  return back;
}

/** The replicas' log lines from a second before the fault on, in time order, to `path` (JSON lines). */
function writeReplicaLogs(g: Group, faultAt: number, path: string): void {
  const lines = g.cluster.replicas.flatMap((r, i) =>
    (r.service?.logs ?? [])
      .filter((l) => (l.time as number) >= faultAt - 1000)
      .map((l) => ({ ...l, replica: i, rel: (l.time as number) - faultAt })),
  );
  lines.sort((a, b) => a.rel - b.rel);
  writeFileSync(path, lines.map((l) => JSON.stringify(l)).join('\n'));
}

/**
 * What the replicas logged, from `from` on, of log entries the broker lost (replication-log.ts) or replaced
 * (replicated-history.ts) after they applied them.
 */
function brokerLosses(g: Group, from: number): { replica: number; msg: string; at: unknown }[] {
  return g.cluster.replicas.flatMap((r, replica) =>
    (r.service?.logs ?? [])
      .filter((l) => (l.time as number) >= from && (l.msg === LOG_REGRESSED || l.msg === LOG_DIVERGED))
      .map((l) => ({
        replica,
        msg: l.msg as string,
        at: l.msg === LOG_REGRESSED ? { applied: l.applied, last: l.last } : { seq: l.seq, claimAt: l.claimAt, term: l.term },
      })),
  );
}

async function faultUnderLoad(g: Group, fault: 'stop' | 'kill', skip: (note: string) => never): Promise<void> {
  const logStream = replicationStreamName(g.cluster.env.BROKER_STREAM_REPLICATION_PREFIX!, QUEUE);
  const bucket = g.cluster.env.BROKER_KV_COORDINATION!;
  const streams = [logStream, `KV_${bucket}`];
  // The node to fault: the one leading the queue's log, moved where a replica is connected if it is not.
  const node = await leadOnAReplicasNode(g.nc, g.nats, g.cluster, logStream);
  const onNode = [0, 1, 2].filter((r) => replicaNode(g.nats, g.cluster, r) === node);
  const others = [0, 1, 2].filter((i) => i !== node);
  const watch = new StreamLeaderWatch(g.nats, streams, others);
  // Whether the coordination bucket takes writes (a key the service does not read), tried from the other nodes.
  const bucketWrites = new WriteProbe(g.nats, others, `$KV.${bucket}.probe.nats-faults`);
  const probes = new ReplicaProbes(g.clients, g.cluster, QUEUE);
  let faultAt = 0;
  let backAt = 0;
  try {
    await sleep(2000);
    if (fault === 'stop') g.nats.pause(node);
    else await g.nats.kill(node);
    faultAt = Date.now();
    // The node stays out until the streams have leaders again (as the other nodes say, and the bucket takes
    // writes) and the bound has passed since, with some to spare.
    const ready = () => {
      const led = watch.ledFrom(faultAt, streams, `n${node}`);
      const writable = bucketWrites.okSince();
      return led === undefined || writable === undefined ? undefined : Math.max(led, writable);
    };
    await pollUntil(
      async () => ready(),
      (t) => t !== undefined && Date.now() >= t + RECOVERY_BOUND_MS + 1000,
      ELECTION_WAIT_MS + RECOVERY_BOUND_MS,
      100,
    );
    expect(ready(), `the log and the coordination bucket had leaders within ${ELECTION_WAIT_MS} ms`).toBeDefined();
    if (fault === 'stop') g.nats.resume(node);
    else await g.nats.restart(node);
    backAt = Date.now();
    // After its return: until the streams have kept their leaders, and the bucket taken writes, for the bound
    // and some to spare.
    const settled = () => {
      const writable = bucketWrites.okSince();
      return writable === undefined ? undefined : Math.max(watch.lastUnled(backAt, Date.now()) ?? backAt, writable);
    };
    await pollUntil(
      async () => settled(),
      (since) => since !== undefined && Date.now() >= since + RECOVERY_BOUND_MS + 1000,
      RETURN_WAIT_MS,
      100,
    );
  } finally {
    g.nats.resume(node);
    if (!g.nats.running(node)) await g.nats.restart(node);
    await probes.stop();
    await watch.stop();
    await bucketWrites.stop();
  }
  const end = Date.now();
  console.log(
    `${fault} of n${node} (leading the log; replicas ${JSON.stringify(onNode)} connected to it); leaders (meta, log, bucket) as the others saw them:\n` +
      watch.snapshots.map((s) => `  ${s.at - faultAt} ms: ${s.views}`).join('\n'),
  );

  // When the log stored, and when the queue's matches took effect: their log entries' store times.
  // (The JetStream API needs the cluster's meta leader, which a returning node may have it elect again.)
  const read = await pollUntil(
    () => logStoreTimes(g.nc, logStream).catch(() => undefined),
    (times) => times !== undefined,
    30_000,
    500,
  );
  expect(read, 'the log read back').toBeDefined();
  const { entries, matches } = read!;
  // The moments the bound counts from, by direct evidence: the log stores again (its first entry after a
  // second or more without one), and, for matches, the bucket takes writes again too.
  const logBack = logTakesWritesFrom(entries, faultAt, backAt);
  const bucketBack = bucketWrites.okFrom(faultAt, backAt) ?? Number.NaN;
  const matchesFrom = Math.max(logBack, bucketBack);
  const logBackAfterReturn = logTakesWritesFrom(entries, backAt, end);
  const matchesFromAfterReturn = Math.max(logBackAfterReturn, bucketWrites.okFrom(backAt, end) ?? Number.NaN);

  const rel = (t: number) => Math.round(t - faultAt);
  const report = {
    // From the fault (ms): when the other nodes named leaders of the log and the bucket (polled every 200 ms),
    // when the log stored again and the bucket took writes again, when each replica acknowledged a create
    // sent after the fault, and when the first match after the fault took effect.
    leadersNamed: rel(watch.ledFrom(faultAt, streams, `n${node}`) ?? Number.NaN),
    logBack: rel(logBack),
    bucketBack: rel(bucketBack),
    firstAck: [0, 1, 2].map((r) => rel(probes.firstAckSentFrom(r, faultAt) ?? Number.NaN)),
    firstMatch: rel(matches.find((t) => t >= logBack) ?? Number.NaN),
    // From the node's return (ms): when the log and the bucket took writes again for good, and the longest
    // times without an acknowledged create (per replica) and without a match.
    afterReturn: {
      logBack: Math.round(logBackAfterReturn - backAt),
      matchesFrom: Math.round(matchesFromAfterReturn - backAt),
      createGap: [0, 1, 2].map((r) => probes.longestGap(r, backAt, end).ms),
      matchGap: longestGap(matches, backAt, end).ms,
    },
    acked: probes.acked.length,
  };
  console.log(`${fault}: ${JSON.stringify(report)}`);
  if (process.env.FAULT_TEST_DUMP) {
    // The replicas' log lines from the fault on, and the times above, for a closer look.
    writeReplicaLogs(g, faultAt, `${process.env.FAULT_TEST_DUMP}-${fault}-${faultAt}.jsonl`);
    writeFileSync(
      `${process.env.FAULT_TEST_DUMP}-${fault}-${faultAt}-times.json`,
      JSON.stringify({
        faultAt,
        backAt,
        report,
        bucketWrites: bucketWrites.tries.map((t) => [rel(t.at), t.ok]),
        matches: matches.map(rel),
      }),
    );
  }

  const check = async () => {
    // Nothing acknowledged lost, no ticket in two matches, gap-free numbering (in order unless the sink reported otherwise).
    // Settling may wait for the coordination bucket's leader after a hung node's return (5 to 20 s seen), and, once
    // in CI, a replica took over 20 s more to apply the log's last matches: the check here is loss, not speed.
    try {
      await expectNoTicketLost(g, QUEUE, probes.acked, 45_000);
    } finally {
      if (process.env.FAULT_TEST_DUMP) writeReplicaLogs(g, faultAt, `${process.env.FAULT_TEST_DUMP}-${fault}-${faultAt}-settled.jsonl`);
    }
    expectGapFreeThroughFaults(g, QUEUE);

    // Down: every replica acknowledges creates within the bound of the log storing again, and keeps doing so;
    // the leader matches within the bound of the bucket taking writes too, and keeps matching.
    for (const r of [0, 1, 2]) {
      expect(probes.longestGap(r, logBack, backAt).ms, `replica ${r}: longest time without an acknowledged create`).toBeLessThan(
        RECOVERY_BOUND_MS,
      );
    }
    expect(longestGap(matches, matchesFrom, backAt).ms, 'longest time without a match').toBeLessThan(RECOVERY_BOUND_MS);
    // Back: the same, from the moments the log and the bucket take writes again after the node's return.
    for (const r of [0, 1, 2]) {
      expect(
        probes.longestGap(r, logBackAfterReturn, end).ms,
        `replica ${r}: longest time without an acknowledged create after the node's return`,
      ).toBeLessThan(RECOVERY_BOUND_MS);
    }
    expect(longestGap(matches, matchesFromAfterReturn, end).ms, "longest time without a match after the node's return").toBeLessThan(
      RECOVERY_BOUND_MS,
    );
    expect(matchesOf(g.outcomes.unique, QUEUE).length).toBeGreaterThan(0);
  };
  try {
    await check();
  } catch (err) {
    // A known defect of the broker, not of the service: nats-server 2.9 sometimes loses, or replaces, log
    // entries it had delivered after a hung stream leader returns, and the replicas say so (docs/replication.md,
    // "What is left"). The bounds cannot be judged on such a run: it is reported and skipped, not passed.
    const losses = brokerLosses(g, faultAt);
    if (losses.length > 0) {
      console.log(
        `${fault}: the broker lost or replaced log entries the replicas had applied: ${JSON.stringify(losses)}; the run is skipped (${String(err)})`,
      );
      skip('the broker lost or replaced log entries the replicas had applied');
    }
    throw err;
  }
}

describe('the NATS node leading the queue stream hung (SIGSTOP) under load, then continued', () => {
  const group = useGroup({ [QUEUE]: DUEL }, { leaseMs: LEADER_LEASE_MS });

  it(
    'every replica acknowledges creates and the leader matches within the bound of the streams having leaders again, after the stop and after the return; none lost, none in two matches',
    FAULT_TEST,
    async ({ skip }) => {
      await faultUnderLoad(group.g, 'stop', skip);
    },
  );
});

describe('the NATS node leading the queue stream killed (kill -9) under load, then restarted', () => {
  const group = useGroup({ [QUEUE]: DUEL }, { leaseMs: LEADER_LEASE_MS });

  it(
    'every replica acknowledges creates and the leader matches within the bound of the streams having leaders again, after the kill and after the restart; none lost, none in two matches',
    FAULT_TEST,
    async ({ skip }) => {
      await faultUnderLoad(group.g, 'kill', skip);
    },
  );
});
