// Failover of a replicated queue on a real three-node NATS cluster (R3 resources made by the service's own
// resource code), with three replicas of the queue in this process, each on its own connection: a leader
// that vanishes (its connection gone, its lease unreleased, as in a crash) is replaced within a bound and
// matchmaking goes on, no ticket ever in two matches; and losing a NATS node does not stop matchmaking.
import { Kvm } from '@nats-io/kv';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/service-config.js';
import { ensureReplicationResources, replicationSettings } from '../../src/replication/jetstream/resources.js';
import { uuid } from '../support/fixtures.js';
import { clusterClient, startNatsCluster, type TestNatsCluster } from '../support/nats-cluster.js';
import { duelQueue } from '../support/queues.js';
import { createTicket, leaderOf, matchedIds, matchesOf, startReplica, until, type QueueLog, type Replica } from '../support/replicas.js';

const LEASE_MS = 1_500;

let cluster: TestNatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster();
}, 60_000);
afterAll(async () => {
  await cluster?.dispose();
});

const running: Replica[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop().catch(() => undefined)));
});

let queues = 0;
/** A queue of its own, its R3 log and coordination bucket made as the service makes them. */
async function replicatedQueue(): Promise<{ queue: QueueLog; bucket: string }> {
  const tag = `F${++queues}`;
  const queueId = `failover.q${queues}`;
  const settings = replicationSettings(
    loadServiceConfig(
      {},
      {
        BROKER_URL: cluster.urls,
        BROKER_STREAM_REPLICAS: '3',
        BROKER_SUBJECT_PREFIX_REPLICATION: `repl.${tag}`,
        BROKER_STREAM_REPLICATION_PREFIX: `REPL_${tag}`,
        BROKER_KV_COORDINATION: `COORD_${tag}`,
        BROKER_OBJECT_STORE_CHECKPOINTS: `CKPT_${tag}`,
        LEADER_LEASE_MS: String(LEASE_MS),
      },
    ),
    10_000,
  );
  const nc = await clusterClient(cluster);
  try {
    const resources = await ensureReplicationResources(nc, settings, [{ queueId, config: { replication: { binding: {} } } }]);
    const { stream, subjects } = resources.queues.get(queueId)!;
    return { queue: { queueId, stream, subjects }, bucket: settings.kvBucket };
  } finally {
    await nc.close();
  }
}

async function replicas(names: string[], queue: QueueLog, bucket: string, yaml: string): Promise<Replica[]> {
  const group = await Promise.all(
    names.map(async (name) => {
      const nc = await clusterClient(cluster);
      return startReplica({ name, queue, yaml, nc, kv: await new Kvm(nc).open(bucket), leaseMs: LEASE_MS });
    }),
  );
  running.push(...group);
  return group;
}

/** Every ticket in at most one match, on every replica; and every replica holds the same matches. */
function expectConsistentMatches(group: readonly Replica[]): void {
  const reference = matchesOf(group[0]!).map((m) => m.id);
  for (const r of group) {
    const seen = new Set<string>();
    for (const match of matchesOf(r)) {
      for (const id of matchedIds(match)) {
        expect(seen.has(id)).toBe(false);
        seen.add(id);
      }
    }
    expect(matchesOf(r).map((m) => m.id)).toEqual(reference);
  }
}

describe('failover of a replicated queue (three-node NATS cluster, R3)', () => {
  it('replaces a leader that vanished within a bound, and matchmaking goes on; no ticket in two matches', async () => {
    const { queue, bucket } = await replicatedQueue();
    const group = await replicas(['a', 'b', 'c'], queue, bucket, duelQueue(20));
    await until('a leader', () => leaderOf(group) !== undefined);
    await Promise.all([createTicket(group[0]!), createTicket(group[1]!)]);
    await until('the first match', () => matchesOf(leaderOf(group)!).length === 1);

    // The leader vanishes mid-flight: its connection closes under it, its lease is never released.
    const old = leaderOf(group)!;
    const survivors = group.filter((r) => r !== old);
    const crashedAt = Date.now();
    await old.nc.close();
    await until('a new leader', () => leaderOf(survivors) !== undefined, 5 * LEASE_MS);
    const failoverMs = Date.now() - crashedAt;
    // The unreleased lease ages out (at most one lease after the crash), and the replicas watching it campaign
    // right then: well within two leases (periodic campaigns alone could take three quarters of a lease more).
    expect(failoverMs).toBeLessThan(2 * LEASE_MS);

    const ids = [uuid(), uuid(), uuid(), uuid()];
    await Promise.all(ids.map((id, i) => createTicket(survivors[i % 2]!, id)));
    await until('the new leader matches them', () => survivors.every((r) => matchesOf(r).length === 3), 10_000);
    expectConsistentMatches(survivors);
    expect(old.history.leading).toBe(false);
  }, 60_000);

  it('keeps matching while a NATS node is down, and after it is back', async () => {
    const { queue, bucket } = await replicatedQueue();
    const group = await replicas(['a', 'b', 'c'], queue, bucket, duelQueue(20));
    await until('a leader', () => leaderOf(group) !== undefined);
    await cluster.kill(1);
    try {
      // Stream leader elections on 2.9 take a few seconds after a node is lost; requests are retried meanwhile.
      const during = [uuid(), uuid()];
      const created = await Promise.all(during.map((id, i) => retryCreate(group[i]!, id)));
      expect(created).toEqual([true, true]);
      await until('matched while a node is down', () => group.every((r) => matchesOf(r).length === 1), 20_000);
    } finally {
      await cluster.restart(1);
    }
    await Promise.all([retryCreate(group[2]!, uuid()), retryCreate(group[0]!, uuid())]);
    await until('matched after the node is back', () => group.every((r) => matchesOf(r).length === 2), 20_000);
    expectConsistentMatches(group);
  }, 90_000);
});

/** A create retried with backoff on UNAVAILABLE, as the spec tells clients to; true once answered. */
async function retryCreate(replica: Replica, id: string): Promise<boolean> {
  for (let attempt = 0; attempt < 40; attempt++) {
    try {
      await createTicket(replica, id);
      return true;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, 50 * 2 ** attempt)));
    }
  }
  return false;
}
