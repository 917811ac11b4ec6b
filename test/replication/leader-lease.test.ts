// The leader lease on a real nats-server (JetStream KV with a bucket TTL, as nats-server 2.9 offers): one
// holder at a time, a released lease taken over quickly, a crashed holder's lease taken over once it ages
// out, and a holder that cannot renew stops leading on its own clock before anyone else can start.
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { LeaderLease } from '../../src/replication/jetstream/leader-lease.js';
import { LeadershipShare } from '../../src/replication/jetstream/leadership-share.js';
import { natsClient, startNatsServer, type TestNatsServer } from '../support/nats.js';

const LEASE_MS = 1_000;
const log = createLogger('silent');

let server: TestNatsServer;
let nc: NatsConnection;
let kv: KV;
beforeAll(async () => {
  server = await startNatsServer();
  nc = await natsClient(server);
  kv = await new Kvm(nc).create('TEST_LEASES', { history: 1, ttl: LEASE_MS });
});
afterAll(async () => {
  await nc?.close();
  await server?.dispose();
});

const until = async (what: string, done: () => boolean, timeoutMs: number): Promise<number> => {
  const started = Date.now();
  while (!done()) {
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Date.now() - started;
};

function leases(key: string, n: number): LeaderLease[] {
  return Array.from({ length: n }, (_, i) => new LeaderLease(kv, key, { leaseMs: LEASE_MS, replicaId: `replica-${i}`, log }));
}

describe('leader lease', () => {
  it('has exactly one holder among replicas campaigning at once, and hands over quickly when it is released', async () => {
    const replicas = leases('leader.one', 3);
    const changes: string[] = [];
    for (const [i, lease] of replicas.entries()) lease.onChange((leading) => changes.push(`${i}:${leading}`));
    for (const lease of replicas) lease.start();
    await until('a leader', () => replicas.some((l) => l.leading), 3_000);
    // Several renewals later, still exactly one.
    await new Promise((resolve) => setTimeout(resolve, 2 * LEASE_MS));
    expect(replicas.filter((l) => l.leading)).toHaveLength(1);
    const first = replicas.findIndex((l) => l.leading);
    expect(changes).toEqual([`${first}:true`]);

    await replicas[first]!.stop();
    // Released at once: the key is gone (or already another replica's: a campaign may win it right after),
    // so the next campaign need not wait for it to age out.
    const after = await kv.get('leader.one');
    if (after?.operation === 'PUT') expect(after.json<{ replica: string }>().replica).not.toBe(`replica-${first}`);
    await until('a new leader', () => replicas.some((l) => l.leading), 3_000);
    expect(replicas.filter((l) => l.leading)).toHaveLength(1);
    await Promise.all(replicas.map((l) => l.stop()));
  });

  it('releases the key when stopped while a renewal is in flight (the renewal moves the key to a new revision)', async () => {
    // The lease's KV, each renewal's answer held until the test lets it through: the server has the new
    // revision while the lease still knows the old one.
    let letThrough: (() => void) | undefined;
    const held = Object.create(kv) as KV;
    held.update = async (...args: Parameters<KV['update']>) => {
      const revision = await kv.update(...args);
      await new Promise<void>((resolve) => (letThrough = resolve));
      return revision;
    };
    const lease = new LeaderLease(held, 'leader.renewing', { leaseMs: LEASE_MS, replicaId: 'replica-r', log });
    lease.start();
    await until('the leader', () => lease.leading, 3_000);
    await until('a renewal in flight', () => letThrough !== undefined, 3_000);
    const stopped = lease.stop();
    letThrough!();
    await stopped;
    expect((await kv.get('leader.renewing'))?.operation).not.toBe('PUT');
  });

  it('is taken over after a crashed holder’s lease ages out, and never while it is still valid', async () => {
    const [crashing, waiting] = leases('leader.crash', 2) as [LeaderLease, LeaderLease];
    crashing.start();
    await until('the first leader', () => crashing.leading, 3_000);
    waiting.start();
    // A crash: its timers stop and it never renews or releases (no stop()).
    (crashing as unknown as { stopped: boolean }).stopped = true;
    const crashedAt = Date.now();
    const takeover = await until('the takeover', () => waiting.leading, 5 * LEASE_MS);
    // Not before the old lease could have aged out on the server (it was last renewed at most a third of a lease before the crash).
    expect(Date.now() - crashedAt).toBeGreaterThanOrEqual((2 / 3) * LEASE_MS - 50);
    expect(takeover).toBeLessThan(3 * LEASE_MS);
    // The crashed one stopped counting itself as leader on its own clock before the takeover.
    expect(crashing.leading).toBe(false);
    await waiting.stop();
  });

  it('campaigns when the key it saw renewed last ages out, not at its next periodic campaign, and not while it is renewed', async () => {
    const leaseMs = 2_000;
    const bucket = await new Kvm(nc).create('TEST_LEASES_WATCHED', { history: 1, ttl: leaseMs });
    const key = 'leader.watched';
    // When the server stored each revision of the key (its own timestamp: when the watch delivers one can
    // lag on a loaded machine, and a late delivery of the last renewal once made the takeover look early).
    const seen: { at: number; replica: string }[] = [];
    const watch = await bucket.watch({ key });
    void (async () => {
      for await (const e of watch)
        if (e.operation === 'PUT') seen.push({ at: e.created.getTime(), replica: e.json<{ replica: string }>().replica });
    })();
    const holder = new LeaderLease(bucket, key, { leaseMs, replicaId: 'holder', log });
    holder.start();
    await until('the holder', () => holder.leading, 3_000);
    // The waiting replica's campaigns, counted.
    let campaigns = 0;
    const counted = Object.create(bucket) as KV;
    counted.create = (...args: Parameters<KV['create']>) => {
      campaigns++;
      return bucket.create(...args);
    };
    const waiting = new LeaderLease(counted, key, { leaseMs, replicaId: 'waiting', log });
    waiting.start();
    // Two leases while the holder renews: the waiting replica sees each renewal and puts its campaign off
    // (periodic campaigns alone would have made two or more by now). Its first campaign, at start, is refused.
    await new Promise((resolve) => setTimeout(resolve, 2 * leaseMs));
    expect(campaigns).toBeLessThanOrEqual(1);
    // A crash: the holder's timers stop, it never renews or releases.
    (holder as unknown as { stopped: boolean }).stopped = true;
    await until('the takeover', () => waiting.leading, 3 * leaseMs);
    // The takeover is the waiting replica's first write (it may have renewed since, before the poll saw it
    // lead, on a loaded machine); the holder's last renewal is the write before it. The watch may deliver
    // the takeover after the poll saw it.
    await until('the watch delivers the takeover', () => seen.some((e) => e.replica === 'waiting'), 3 * leaseMs);
    const taken = seen.findIndex((e) => e.replica === 'waiting');
    expect(taken).toBeGreaterThan(0);
    expect(seen[taken - 1]!.replica).toBe('holder');
    const renewedLast = seen[taken - 1]!.at;
    const takenAt = seen[taken]!.at;
    // Taken once the last renewal aged out (a lease after it was stored), and soon after: periodic campaigns
    // come every half to three quarters of a lease.
    expect(takenAt - renewedLast).toBeGreaterThanOrEqual(leaseMs - 50);
    expect(takenAt - renewedLast).toBeLessThan(leaseMs + leaseMs / 4);
    watch.stop();
    await waiting.stop();
  });

  it('stops leading on its own clock when it cannot renew, and learns it lost the key when it can again', async () => {
    const key = 'leader.partitioned';
    const [paused, other] = leases(key, 2) as [LeaderLease, LeaderLease];
    const seen: boolean[] = [];
    paused.onChange((leading) => seen.push(leading));
    paused.start();
    await until('the first leader', () => paused.leading, 3_000);
    // A partition: every KV call of `paused` hangs until it is healed.
    let heal: () => void = () => undefined;
    const healed = new Promise<void>((resolve) => (heal = resolve));
    const stuck = Object.create(kv) as KV;
    stuck.update = async (...args: Parameters<KV['update']>) => {
      await healed;
      return kv.update(...args);
    };
    (paused as unknown as { kv: KV }).kv = stuck;
    await until('the paused leader to stand down', () => !paused.leading, 2 * LEASE_MS);
    other.start();
    await until('the other to lead', () => other.leading, 5 * LEASE_MS);
    heal();
    // Its late renewal carries a stale revision: refused, and it stays a follower.
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    expect(paused.leading).toBe(false);
    expect(other.leading).toBe(true);
    expect(seen).toEqual([true, false]);
    await Promise.all([paused.stop(), other.stop()]);
  });
});

describe('a lease whose bucket did not answer for a while', () => {
  it('is renewed by its own revision when the bucket answers again, without waiting for the key to age out', async () => {
    // The key outlives the lease here (a bucket TTL of 10 s): nobody could take it while the bucket did not
    // answer, so the holder that stood down on its own clock renews it rather than waiting for it to age out.
    const slow = await new Kvm(nc).create('TEST_LEASES_LONG', { history: 1, ttl: 10_000 });
    let down = false;
    const flaky = Object.create(slow) as KV;
    const unanswered = () => Promise.reject(new Error('no responders: the bucket has no leader'));
    flaky.update = (...args: Parameters<KV['update']>) => (down ? unanswered() : slow.update(...args));
    flaky.create = (...args: Parameters<KV['create']>) => (down ? unanswered() : slow.create(...args));
    const lease = new LeaderLease(flaky, 'leader.lapsing', { leaseMs: LEASE_MS, replicaId: 'replica-l', log });
    const seen: boolean[] = [];
    lease.onChange((leading) => seen.push(leading));
    lease.start();
    await until('the leader', () => lease.leading, 3_000);
    down = true;
    await until('the leader to stand down on its own clock', () => !lease.leading, 2 * LEASE_MS);
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
    down = false;
    const back = await until('the lease renewed', () => lease.leading, 3 * LEASE_MS);
    expect(back).toBeLessThan(LEASE_MS);
    expect(seen).toEqual([true, false, true]);
    expect((await slow.get('leader.lapsing'))?.json<{ replica: string }>().replica).toBe('replica-l');
    await lease.stop();
    expect((await slow.get('leader.lapsing'))?.operation).not.toBe('PUT');
  });
});

describe('leadership of many queues', () => {
  /** A replica campaigning for every queue, with its share of their leadership. */
  function replica(bucket: KV, name: string, queues: string[]) {
    const share = new LeadershipShare(bucket, name, LEASE_MS, log);
    const leases = queues.map((q) => new LeaderLease(bucket, `leader.${q}`, { leaseMs: LEASE_MS, replicaId: name, log, share }));
    share.start();
    for (const lease of leases) lease.start();
    return {
      leading: () => leases.filter((l) => l.leading).length,
      leases,
      stop: async () => {
        await Promise.all(leases.map((l) => l.stop()));
        await share.stop();
      },
    };
  }

  it('spreads over the replicas, also to one that joins late, and every queue keeps a leader', async () => {
    const bucket = await new Kvm(nc).create('TEST_SHARES', { history: 1, ttl: LEASE_MS });
    const queues = Array.from({ length: 6 }, (_, i) => `share.q${i}`);
    const first = replica(bucket, 'a', queues);
    // Alone, it leads everything: a queue is never left without a leader for fairness.
    await until('one replica leading all six', () => first.leading() === 6, 5 * LEASE_MS);
    const second = replica(bucket, 'b', queues);
    const third = replica(bucket, 'c', queues);
    const group = [first, second, third];
    const spread = () => group.map((r) => r.leading());
    await until('two queues each', () => spread().every((n) => n === 2), 20 * LEASE_MS);
    // And it stays so: no churn once each has its share.
    await new Promise((resolve) => setTimeout(resolve, 2 * LEASE_MS));
    expect(spread()).toEqual([2, 2, 2]);
    // Every queue has exactly one leader.
    for (let q = 0; q < queues.length; q++) expect(group.filter((r) => r.leases[q]!.leading)).toHaveLength(1);

    // One leaves: the others take its queues.
    await third.stop();
    await until('three queues each for the two left', () => [first, second].every((r) => r.leading() === 3), 10 * LEASE_MS);
    await Promise.all([first.stop(), second.stop()]);
  }, 60_000);
});
