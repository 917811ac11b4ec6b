// Service processes of the replicated mode for the benchmarks (bench/replication.ts, bench/failover.ts):
// each replica on fixed loopback ports, so that a replica killed and started again answers where its
// clients already point; the admin route's queue summary (state, leading); temp queue directories.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { serviceNodeArgs, spawnServer, type Child } from './child-process.js';
import { freePort } from './nats-cluster.js';

const ROOT = resolve(import.meta.dirname, '../..');
export const CLI = join(ROOT, 'dist/src/cli.js');

export interface ReplicaSpec {
  replicaId: string;
  grpcPort: number;
  httpPort: number;
  dataDir: string;
  queueDir: string;
  /** The replicated mode's settings (BROKER_URL, LEADER_LEASE_MS, ...). */
  env: Record<string, string>;
}

/** A queue directory holding `files` (queue id -> YAML). */
export function writeQueueDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'mm-bench-queues-'));
  for (const [queueId, yaml] of Object.entries(files)) writeFileSync(join(dir, `${queueId}.yaml`), yaml);
  return dir;
}

/** The environment of the replicated mode on `urls`, R3 streams, with this lease and coordination bucket. */
export function replicatedEnv(urls: string, leaseMs: number, kvBucket: string): Record<string, string> {
  return {
    POOL_REPLICATION_BACKEND: 'broker',
    BROKER_URL: urls,
    BROKER_STREAM_REPLICAS: '3',
    LEADER_LEASE_MS: String(leaseMs),
    // The bucket's TTL is the lease: runs with different leases need their own bucket.
    BROKER_KV_COORDINATION: kvBucket,
  };
}

/** Specs of `count` replicas named `<prefix>-<i>`, each with its own free ports and data directory. */
export async function replicaSpecs(prefix: string, count: number, queueDir: string, env: Record<string, string>): Promise<ReplicaSpec[]> {
  const specs: ReplicaSpec[] = [];
  for (let i = 0; i < count; i++) {
    specs.push({
      replicaId: `${prefix}-${i}`,
      grpcPort: await freePort(),
      httpPort: await freePort(),
      dataDir: mkdtempSync(join(tmpdir(), 'mm-bench-data-')),
      queueDir,
      env,
    });
  }
  return specs;
}

export function startReplica(spec: ReplicaSpec): Promise<Child> {
  return spawnServer(
    `replica ${spec.replicaId}`,
    [CLI, 'serve', '--config', spec.queueDir, '--data', spec.dataDir],
    {
      ...spec.env,
      REPLICA_ID: spec.replicaId,
      GRPC_PORT: String(spec.grpcPort),
      HTTP_PORT: String(spec.httpPort),
      LOG_LEVEL: 'info',
    },
    { listenTimeoutMs: 60_000, nodeArgs: serviceNodeArgs(spec.replicaId) },
  );
}

export function removeReplicaDirs(specs: readonly ReplicaSpec[]): void {
  for (const s of specs) rmSync(s.dataDir, { recursive: true, force: true });
}

/** What GET /admin/v1/queues says of one queue. */
export interface QueueSummary {
  queueId: string;
  state: string;
  activeTickets: number;
  leading: boolean;
}

/** The queue's summary on the process at `httpPort`; undefined when it does not answer (in 1 s) or lacks it. */
export async function queueSummary(httpPort: number, queueId: string): Promise<QueueSummary | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${httpPort}/admin/v1/queues`, { signal: AbortSignal.timeout(1_000) });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { queues: QueueSummary[] };
    return body.queues.find((q) => q.queueId === queueId);
  } catch {
    return undefined;
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls until `done` gives a value (not undefined); throws naming `what` after `timeoutMs`. */
export async function pollFor<T>(what: string, done: () => Promise<T | undefined>, timeoutMs: number, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await done();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(everyMs);
  }
}

/** Resolves once the queue runs (has caught up with its log) on the process at `httpPort`. */
export function untilRunning(httpPort: number, queueId: string, timeoutMs = 60_000): Promise<QueueSummary> {
  return pollFor(
    `queue ${queueId} running on port ${httpPort}`,
    async () => {
      const q = await queueSummary(httpPort, queueId);
      return q?.state === 'running' ? q : undefined;
    },
    timeoutMs,
  );
}

/** Error lines (pino level >= 50) a child logged, for the report. */
export function errorLines(child: Child): Record<string, unknown>[] {
  return child.lines.filter((l) => typeof l.level === 'number' && l.level >= 50);
}
