// The replicated mode's broker resources on a real three-node nats-server cluster (one per file): create mode
// makes R3 replication streams, the coordination bucket and the checkpoint store, and a second run changes
// nothing; bind mode accepts provisioned resources and refuses, with a typed error naming the resource,
// what is missing or could drop log records; and the R3 resources stay usable when a node dies.
import { jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { getSha256Backend, Objm } from '@nats-io/obj';
import { nanos, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/service-config.js';
import { brokerTarget } from '../../src/nats/auth.js';
import { ReplicationResourceError } from '../../src/replication/jetstream/errors.js';
import { leaderLeaseKey, replicationStreamName } from '../../src/replication/jetstream/names.js';
import {
  ensureReplicationResources,
  REPLICATION_DUPLICATE_WINDOW_MS,
  replicationSettings,
  type ReplicatedQueue,
  type ReplicationSettings,
} from '../../src/replication/jetstream/resources.js';
import { clusterClient, startNatsCluster, type TestNatsCluster } from '../support/nats-cluster.js';

let cluster: TestNatsCluster;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  cluster = await startNatsCluster();
  nc = await clusterClient(cluster);
  jsm = await jetstreamManager(nc);
});
// Each test leaves no stream behind: every R3 stream is a raft group, and the fewer there are, the sooner the
// cluster settles after a node is killed.
afterEach(async () => {
  for await (const name of jsm.streams.names()) await jsm.streams.delete(name);
});
afterAll(async () => {
  await nc?.close();
  await cluster?.dispose();
});

let tags = 0;
/** Settings with names of their own, so the tests of this file do not share resources. */
function settings(mode: 'create' | 'bind', extra: Record<string, string> = {}): ReplicationSettings {
  const tag = `T${++tags}`;
  const config = loadServiceConfig(
    {},
    {
      BROKER_URL: cluster.urls,
      BROKER_RESOURCE_MODE: mode,
      BROKER_STREAM_REPLICAS: '3',
      BROKER_SUBJECT_PREFIX_REPLICATION: `repl.${tag}`,
      BROKER_STREAM_REPLICATION_PREFIX: `REPL_${tag}`,
      BROKER_KV_COORDINATION: `COORD_${tag}`,
      BROKER_OBJECT_STORE_CHECKPOINTS: `CKPT_${tag}`,
      LEADER_LEASE_MS: '6000',
      ...extra,
    },
  );
  return replicationSettings(config, 10_000);
}

const queue = (queueId: string, stream_name?: string): ReplicatedQueue => ({
  queueId,
  config: { replication: { binding: stream_name === undefined ? {} : { stream_name } } },
});

async function failure(p: Promise<unknown>): Promise<ReplicationResourceError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ReplicationResourceError);
    return err as ReplicationResourceError;
  }
  throw new Error('expected ensureReplicationResources to fail');
}

/** Provisions what bind mode needs by hand, as an operator would: R3 streams, the bucket and the store. */
async function provision(s: ReplicationSettings, streams: Record<string, { subjects: string[]; max_age?: number }>): Promise<void> {
  for (const [name, { subjects, max_age }] of Object.entries(streams)) {
    await jsm.streams.add({ name, subjects, num_replicas: 3, storage: StorageType.File, max_age: max_age ?? 0 });
  }
  await new Kvm(nc).create(s.kvBucket, { ttl: s.leaderLeaseMs, history: 1, replicas: 3 });
  await new Objm(nc).create(s.objectStore, { replicas: 3 });
}

describe('BROKER_URL with the cluster', () => {
  it('names every node, and the client reaches the cluster through the list', () => {
    const target = brokerTarget(loadServiceConfig({}, { BROKER_URL: cluster.urls }));
    expect(target.servers).toEqual(cluster.servers);
    expect(target.servers).toHaveLength(3);
  });
});

describe('create mode', () => {
  it('makes R3 resources for each queue, and a second run changes nothing', async () => {
    const s = settings('create');
    // A queue id long enough that its stream name is cut to the 255 characters nats-server allows.
    const long = `${'q'.repeat(240)}.x`;
    const queues = [queue('eu.ranked'), queue('duel'), queue(long)];
    const first = await ensureReplicationResources(nc, s, queues);

    expect(first.queues.get(long)?.stream).toHaveLength(255);
    const eu = first.queues.get('eu.ranked')!;
    expect(eu.stream).toBe(replicationStreamName(s.streamPrefix, 'eu.ranked'));
    expect(eu.stream).toMatch(/^REPL_T\d+_eu_ranked_[0-9a-f]{8}$/);
    expect(eu.subjects.req).toBe(`${s.subjectPrefix}.req.eu.ranked`);
    for (const { stream, filter } of first.queues.values()) {
      const { config, cluster: placement } = await jsm.streams.info(stream);
      expect(config).toMatchObject({
        subjects: [filter],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        num_replicas: 3,
        max_msgs: -1,
        max_bytes: -1,
        max_age: 0,
        deny_delete: true,
        deny_purge: false,
        duplicate_window: nanos(REPLICATION_DUPLICATE_WINDOW_MS),
        allow_direct: true,
      });
      expect(placement?.replicas ?? []).toHaveLength(2);
    }
    const kv = await first.kv.status();
    expect({ ttl: kv.ttl, history: kv.history, replicas: kv.replicas }).toEqual({ ttl: 6000, history: 1, replicas: 3 });
    expect((await first.checkpoints.status()).replicas).toBe(3);
    // Checkpoints are hashed with node:crypto, not the object store's pure-JS default (24x slower).
    expect(getSha256Backend()).toBe('native');

    // The handles work: a lease, a checkpoint and a record.
    await first.kv.create(leaderLeaseKey('eu.ranked'), 'replica-a');
    await first.checkpoints.putBlob({ name: 'eu.ranked@0' }, new Uint8Array([1, 2, 3]));
    const ack = await jetstream(nc).publish(eu.subjects.req, 'r1', { msgID: 'm1' });
    expect(ack).toMatchObject({ stream: eu.stream, seq: 1 });

    const created = await Promise.all([...first.queues.values()].map(async (q) => (await jsm.streams.info(q.stream)).created));
    const second = await ensureReplicationResources(nc, s, queues);
    expect([...second.queues.values()]).toEqual([...first.queues.values()]);
    expect(await Promise.all([...second.queues.values()].map(async (q) => (await jsm.streams.info(q.stream)).created))).toEqual(created);
    expect((await jsm.streams.info(eu.stream)).state.messages).toBe(1);
    expect((await second.kv.get(leaderLeaseKey('eu.ranked')))?.string()).toBe('replica-a');
    expect([...((await second.checkpoints.getBlob('eu.ranked@0')) ?? [])]).toEqual([1, 2, 3]);
  });

  it('turns on direct gets of an existing replication stream made without them (by an earlier version), keeping its records', async () => {
    const s = settings('create');
    const name = replicationStreamName(s.streamPrefix, 'older');
    await jsm.streams.add({ name, subjects: [`${s.subjectPrefix}.*.older`], num_replicas: 3, storage: StorageType.File });
    await jetstream(nc).publish(`${s.subjectPrefix}.req.older`, 'r1', { msgID: 'm1' });
    await ensureReplicationResources(nc, s, [queue('older')]);
    const info = await jsm.streams.info(name);
    expect(info.config.allow_direct).toBe(true);
    expect(info.state.messages).toBe(1);
  });

  it('refuses an existing stream with other replicas than BROKER_STREAM_REPLICAS', async () => {
    const s = settings('create');
    const name = replicationStreamName(s.streamPrefix, 'solo');
    await jsm.streams.add({ name, subjects: [`${s.subjectPrefix}.*.solo`], num_replicas: 1 });
    const err = await failure(ensureReplicationResources(nc, s, [queue('solo')]));
    expect(err).toMatchObject({ kind: 'mismatch', queueId: 'solo', resource: { type: 'stream', name } });
    expect(err.message).toContain(`replication stream "${name}" of queue "solo"`);
    expect(err.message).toContain('it has 1 replicas, BROKER_STREAM_REPLICAS asks for 3');
  });
});

describe('bind mode', () => {
  it('accepts provisioned resources and uses the named streams', async () => {
    const s = settings('bind');
    await provision(s, {
      [`LOG_EU_${tags}`]: { subjects: [`${s.subjectPrefix}.*.eu.ranked`] },
      [`LOG_DUEL_${tags}`]: { subjects: [`${s.subjectPrefix}.req.duel`, `${s.subjectPrefix}.term.duel`, `${s.subjectPrefix}.lead.duel`] },
    });
    const names = await jsm.streams.names().next();
    const before = names.length;
    const r = await ensureReplicationResources(nc, s, [queue('eu.ranked', `LOG_EU_${tags}`), queue('duel', `LOG_DUEL_${tags}`)]);
    expect(r.queues.get('eu.ranked')?.stream).toBe(`LOG_EU_${tags}`);
    expect(r.queues.get('duel')?.stream).toBe(`LOG_DUEL_${tags}`);
    expect((await jsm.streams.names().next()).length).toBe(before);
  });

  it('refuses a queue without replication.binding.stream_name, naming the queue', async () => {
    const s = settings('bind');
    const err = await failure(ensureReplicationResources(nc, s, [queue('eu.ranked')]));
    expect(err).toMatchObject({ kind: 'binding', queueId: 'eu.ranked' });
    expect(err.message).toContain('queue "eu.ranked" has no replication.binding.stream_name');
  });

  it('refuses a missing stream, naming it', async () => {
    const s = settings('bind');
    await provision(s, {});
    const err = await failure(ensureReplicationResources(nc, s, [queue('eu.ranked', 'NOT_THERE')]));
    expect(err).toMatchObject({ kind: 'missing', queueId: 'eu.ranked', resource: { type: 'stream', name: 'NOT_THERE' } });
    expect(err.message).toContain('replication stream "NOT_THERE" of queue "eu.ranked" does not exist');
    expect(err.message).toContain(`"${s.subjectPrefix}.*.eu.ranked"`);
  });

  it('refuses a missing coordination bucket, naming it', async () => {
    const s = settings('bind');
    const err = await failure(ensureReplicationResources(nc, s, [queue('eu.ranked', 'ANY')]));
    expect(err).toMatchObject({ kind: 'missing', resource: { type: 'kv', name: s.kvBucket } });
    expect(err.message).toContain(`coordination bucket "${s.kvBucket}" does not exist`);
  });

  it('refuses a stream with max_age, which would drop log records', async () => {
    const s = settings('bind');
    const name = `LOG_AGED_${tags}`;
    await provision(s, { [name]: { subjects: [`${s.subjectPrefix}.*.eu.ranked`], max_age: nanos(3600_000) } });
    const err = await failure(ensureReplicationResources(nc, s, [queue('eu.ranked', name)]));
    expect(err).toMatchObject({ kind: 'limits', queueId: 'eu.ranked', resource: { type: 'stream', name } });
    expect(err.message).toContain(`replication stream "${name}" of queue "eu.ranked" does not fit: it has max_age 3600000 ms`);
  });

  it('refuses a stream whose subjects do not cover the queue', async () => {
    const s = settings('bind');
    const name = `LOG_NARROW_${tags}`;
    await provision(s, { [name]: { subjects: [`${s.subjectPrefix}.req.eu.ranked`] } });
    const err = await failure(ensureReplicationResources(nc, s, [queue('eu.ranked', name)]));
    expect(err).toMatchObject({ kind: 'subjects', queueId: 'eu.ranked', resource: { type: 'stream', name } });
    expect(err.message).toContain(`do not cover "${s.subjectPrefix}.term.eu.ranked", "${s.subjectPrefix}.lead.eu.ranked"`);
  });
});

describe('losing one node of three', () => {
  it('leaves the R3 resources usable: records, leases and checkpoints are still acknowledged', async () => {
    const s = settings('create');
    const r = await ensureReplicationResources(nc, s, [queue('eu.ranked')]);
    const q = r.queues.get('eu.ranked')!;
    const js = jetstream(nc, { timeout: 2000 });
    expect((await js.publish(q.subjects.req, 'before', { msgID: 'before' })).seq).toBe(1);

    // Kill the node leading the stream: the harder case, a new stream leader must be elected.
    const leader = (await jsm.streams.info(q.stream)).cluster!.leader!;
    const node = Number(/^n(\d+)$/.exec(leader)![1]);
    await cluster.kill(node);
    // nats-server 2.9 elects a new stream leader within about 4 to 8 s here; publishes time out meanwhile.
    const ack = await retry(() => js.publish(q.subjects.lead, 'after', { msgID: 'after' }), 20_000);
    // A retry of a publish whose PubAck was lost is answered as a duplicate, with the same sequence.
    expect(ack).toMatchObject({ stream: q.stream, seq: 2 });
    await retry(() => r.kv.create(leaderLeaseKey('eu.ranked'), 'replica-b'), 20_000);
    await retry(() => r.checkpoints.putBlob({ name: 'eu.ranked@2' }, new Uint8Array(1024)), 20_000);
    const info = await retry(() => jsm.streams.info(q.stream), 20_000);
    expect(info.state.last_seq).toBe(2);
    expect(info.cluster?.leader).not.toBe(leader);

    // The node comes back and the cluster is whole again.
    await cluster.restart(node);
    expect(cluster.running(node)).toBe(true);
  }, 60_000);
});

/** Retries `fn` (a failover in progress answers with timeouts or "no responders") until it resolves. */
async function retry<T>(fn: () => Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
