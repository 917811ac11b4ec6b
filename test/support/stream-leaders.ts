// Which node leads which JetStream stream, as the nodes of a test cluster see it, for tests that fault a
// node: read from each node's monitoring endpoint (/jsz), which answers without the JetStream API (that
// needs the cluster's meta leader, which a fault may take away for seconds); whether a stream takes writes,
// tried from the other nodes; which node a replica of the service is connected to, and moving a stream's
// leader onto such a node.
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { TestNatsCluster } from './nats-cluster.js';
import { sleep, type ServiceCluster } from './service-cluster.js';

interface Jsz {
  meta_cluster?: { leader?: string };
  account_details?: { stream_detail?: { name: string; cluster?: { leader?: string } }[] }[];
}

/** The leader of each of `streams` (undefined: none) and of the meta group, as node `node` sees them. */
export async function leadersSeenBy(
  nats: TestNatsCluster,
  node: number,
  streams: readonly string[],
  timeoutMs = 500,
): Promise<{ meta: string | undefined; streams: Record<string, string | undefined> }> {
  const res = await fetch(`${nats.monitors[node]}/jsz?accounts=true&streams=true`, { signal: AbortSignal.timeout(timeoutMs) });
  const jsz = (await res.json()) as Jsz;
  const details = (jsz.account_details ?? []).flatMap((a) => a.stream_detail ?? []);
  const led: Record<string, string | undefined> = {};
  for (const name of streams) led[name] = details.find((d) => d.name === name)?.cluster?.leader || undefined;
  return { meta: jsz.meta_cluster?.leader || undefined, streams: led };
}

/** Node index of a node name (`n0`, `n1`...), as the test cluster names them. */
export const nodeIndex = (name: string | undefined): number | undefined => (name?.match(/^n(\d+)$/) ? Number(name.slice(1)) : undefined);

export interface LeaderSnapshot {
  at: number;
  /** Per stream: the leader every watched node names, or undefined when they name none or disagree. */
  leaders: Record<string, string | undefined>;
  /** What each watched node said (for the test's log). */
  views: string;
}

/**
 * Polls the leaders of `streams` as the nodes `watched` see them, every `everyMs`, and keeps each change.
 * A stream counts as led only when every watched node answers and names the same leader: a node that
 * lost its leader says so at once, while another may still name the old one.
 */
export class StreamLeaderWatch {
  readonly snapshots: LeaderSnapshot[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly nats: TestNatsCluster,
    readonly streams: readonly string[],
    private watched: readonly number[],
    everyMs = 200,
  ) {
    this.loop = (async () => {
      while (!this.stopped) {
        const at = Date.now();
        const seen = await Promise.all(this.watched.map((i) => leadersSeenBy(this.nats, i, this.streams).catch(() => undefined)));
        const leaders: Record<string, string | undefined> = {};
        for (const s of this.streams) {
          const names = new Set(seen.map((v) => v?.streams[s]));
          leaders[s] = names.size === 1 ? [...names][0] : undefined;
        }
        const views = seen
          .map((v, k) => `n${this.watched[k]}:${v ? [v.meta ?? '-', ...this.streams.map((s) => v.streams[s] ?? '-')].join(',') : '?'}`)
          .join(' ');
        if (this.snapshots.at(-1)?.views !== views) this.snapshots.push({ at, leaders, views });
        await sleep(everyMs);
      }
    })();
  }

  /** Watch these nodes from now on. */
  watch(nodes: readonly number[]): void {
    this.watched = nodes;
  }

  /** Whether every stream of `streams` is led in `snapshot`, by a node other than `not`. */
  private led(snapshot: LeaderSnapshot, streams: readonly string[], not?: string): boolean {
    return streams.every((s) => snapshot.leaders[s] !== undefined && snapshot.leaders[s] !== not);
  }

  /** The state at time `t`: the last change at or before it. */
  private stateAt(t: number): LeaderSnapshot | undefined {
    let state: LeaderSnapshot | undefined;
    for (const s of this.snapshots) {
      if (s.at > t) break;
      state = s;
    }
    return state;
  }

  /** The first time at or after `from` at which every stream of `streams` was led (by a node other than `not`). */
  ledFrom(from: number, streams: readonly string[] = this.streams, not?: string): number | undefined {
    const state = this.stateAt(from);
    if (state && this.led(state, streams, not)) return from;
    return this.snapshots.find((s) => s.at > from && this.led(s, streams, not))?.at;
  }

  /** The last time within [from, to] at which a stream of `streams` had no leader; undefined if none did. */
  lastUnled(from: number, to: number, streams: readonly string[] = this.streams): number | undefined {
    let unled: number | undefined;
    for (const [k, s] of this.snapshots.entries()) {
      const until = this.snapshots[k + 1]?.at ?? Number.POSITIVE_INFINITY;
      if (until <= from || s.at > to) continue;
      if (!this.led(s, streams)) unled = Math.min(until, to);
    }
    return unled;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** The node replica `replica`'s replication connection is on now (from its log), if it says. */
export function replicaNode(nats: TestNatsCluster, cluster: ServiceCluster, replica: number): number | undefined {
  const line = (cluster.replicas[replica]!.service?.logs ?? [])
    .filter((l) => l.msg === 'connected to the NATS cluster of the replicated mode' || l.msg === 'replication: NATS reconnected')
    .at(-1);
  if (!line) return undefined;
  const i = nats.servers.findIndex((s) => s.endsWith(`//${String(line.server)}`) || s.endsWith(String(line.server)));
  return i === -1 ? undefined : i;
}

/**
 * Moves the leader of `stream` (by asking it to step down, as often as needed) onto a node that one of the
 * replicas is connected to, so that a fault of that node hits a replica's connection too. Answers the
 * leader's node index.
 */
export async function leadOnAReplicasNode(
  nc: NatsConnection,
  nats: TestNatsCluster,
  cluster: ServiceCluster,
  stream: string,
): Promise<number> {
  const wanted = new Set(cluster.replicas.map((_, i) => replicaNode(nats, cluster, i)));
  for (let tries = 0; ; tries++) {
    const leader = nodeIndex((await leadersSeenBy(nats, 0, [stream], 2000)).streams[stream]);
    if (leader !== undefined && (wanted.has(leader) || tries >= 10)) return leader;
    await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, '', { timeout: 3000 }).catch(() => undefined);
    // A new leader is elected at once on a stepdown; wait until every node knows it.
    await sleep(1000);
  }
}

/**
 * Whether a stream takes writes, as a client connected to the nodes `nodes` sees it: each node's own
 * connection publishes to `subject` (a subject of the stream the service does not read, such as a probe key
 * of a KV bucket) every `everyMs`, each try waiting a second, and every outcome is kept by the time it was
 * sent. Direct evidence, where the monitoring endpoints only say what each node believes.
 */
export class WriteProbe {
  readonly tries: { at: number; ok: boolean }[] = [];
  private stopped = false;
  private readonly loops: Promise<void>[];
  private readonly connections: Promise<NatsConnection>[];

  constructor(nats: TestNatsCluster, nodes: readonly number[], subject: string, everyMs = 200) {
    this.connections = nodes.map((i) => connect({ servers: nats.servers[i]!, maxReconnectAttempts: -1, reconnectTimeWait: 200 }));
    // Tries do not wait for each other: one every `everyMs` from each node, however long the last takes.
    this.loops = this.connections.map(async (connecting) => {
      const nc = await connecting;
      const js = jetstream(nc, { timeout: 1000 });
      const pending: Promise<void>[] = [];
      while (!this.stopped) {
        const at = Date.now();
        pending.push(
          js.publish(subject, 'probe', { timeout: 1000 }).then(
            () => void this.tries.push({ at, ok: true }),
            () => void this.tries.push({ at, ok: false }),
          ),
        );
        await sleep(everyMs);
      }
      await Promise.all(pending);
    });
  }

  /** Since when every try has succeeded, up to now (undefined if the last one failed or none was made). */
  okSince(): number | undefined {
    const tries = [...this.tries].sort((a, b) => a.at - b.at);
    if (tries.length === 0 || !tries.at(-1)!.ok) return undefined;
    const lastFailed = lastFailure(tries);
    return tries.find((t) => t.ok && t.at > lastFailed)!.at;
  }

  /** The first try sent at or after `from` that succeeded after the last failure before `to` (a write taken again). */
  okFrom(from: number, to: number): number | undefined {
    const tries = this.tries.filter((t) => t.at >= from && t.at <= to).sort((a, b) => a.at - b.at);
    const lastFailed = lastFailure(tries);
    return tries.find((t) => t.ok && t.at > lastFailed)?.at;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
    await Promise.all(this.connections.map(async (c) => (await c).close()));
  }
}

/** When the last failed try of `tries` (in time order) was sent; -Infinity if none failed. */
function lastFailure(tries: readonly { at: number; ok: boolean }[]): number {
  let at = Number.NEGATIVE_INFINITY;
  for (const t of tries) if (!t.ok) at = t.at;
  return at;
}
