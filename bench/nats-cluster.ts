// A private three-node nats-server cluster (JetStream, routes on loopback, free ports) for the replicated
// mode's benchmark: R3 streams as in production. bench/ cannot import test/ (its support pulls in vitest), so
// this is the benchmark's own small starter; the tests' (test/support/nats-cluster.ts, with node kill and
// restart) builds on its port and formation helpers.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';

const NATS_SERVER = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';

export interface BenchNatsCluster {
  /** Every node's client URL, comma-joined: what BROKER_URL takes. */
  urls: string;
  servers: string[];
  /** The nats-server processes' ids, for their CPU time. */
  pids(): number[];
  /** A client of the whole cluster. */
  client(): Promise<NatsConnection>;
  dispose(): Promise<void>;
}

/** A free loopback port (reserved, then released for the caller to bind). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Starts one node; resolves once it logs "Server is ready". */
function startNode(args: string[], what: string): Promise<ChildProcess> {
  const child = spawn(NATS_SERVER, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`nats-server ${what}: not ready within 10 s: ${stderr}`)), 10_000);
    const onData = (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-10_000);
      if (!stderr.includes('Server is ready')) return;
      clearTimeout(timer);
      // Keep draining stderr so the pipe never fills up.
      child.stderr!.off('data', onData);
      child.stderr!.resume();
      resolve(child);
    };
    child.stderr!.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`nats-server ${what} exited (${code}) before it was ready: ${stderr}`));
    });
  });
}

export async function startNatsCluster(size = 3): Promise<BenchNatsCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'mm-bench-nats-'));
  const name = `mm-bench-${randomBytes(3).toString('hex')}`;
  const clientPorts: number[] = [];
  const clusterPorts: number[] = [];
  for (let i = 0; i < size; i++) {
    clientPorts.push(await freePort());
    clusterPorts.push(await freePort());
  }
  const servers = clientPorts.map((p) => `nats://127.0.0.1:${p}`);
  const nodes: ChildProcess[] = [];
  const dispose = async () => {
    await Promise.all(
      nodes.map(
        (n) =>
          new Promise<void>((resolve) => {
            if (n.exitCode !== null || n.signalCode !== null) return resolve();
            n.once('exit', () => resolve());
            n.kill('SIGKILL');
          }),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(
      clientPorts.map(async (port, i) => {
        const routes = clusterPorts.filter((_, j) => j !== i).map((p) => `nats://127.0.0.1:${p}`);
        const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-n', `n${i}`, '-sd', join(dir, `n${i}`)];
        args.push('--cluster_name', name, '-cluster', `nats://127.0.0.1:${clusterPorts[i]}`, '-routes', routes.join(','));
        nodes.push(await startNode(args, `node n${i} on port ${port}`));
      }),
    );
    await untilClustered(servers, size, 20_000);
  } catch (err) {
    await dispose();
    throw err;
  }
  return {
    urls: servers.join(','),
    servers,
    pids: () => nodes.map((n) => n.pid).filter((p): p is number => p !== undefined),
    client: () => connect({ servers, maxReconnectAttempts: -1, reconnectTimeWait: 100 }),
    dispose,
  };
}

/** Resolves once the cluster can place a stream on `replicas` nodes (routes up, a meta leader knowing every
 *  peer): a probe stream is created and deleted until that works. Until then a JetStream request goes
 *  unanswered or fails ("insufficient resources"); the short request timeout matters, since the first
 *  request usually goes unanswered and the cluster is ready about half a second later. The tests' cluster
 *  (test/support/nats-cluster.ts) uses it too. */
export async function untilClustered(servers: readonly string[], replicas: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const nc = await connect({ servers: [...servers], maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        const jsm = await jetstreamManager(nc, { timeout: 500 });
        const name = `${PROBE_PREFIX}${attempt}`;
        await jsm.streams.add({ name, subjects: [`cluster.probe.${attempt}`], num_replicas: replicas, storage: StorageType.Memory });
        // An earlier attempt that timed out on this side may still have made its stream: none is left behind.
        for (let i = 0; i <= attempt; i++) await jsm.streams.delete(`${PROBE_PREFIX}${i}`).catch(() => undefined);
        return;
      } catch (err) {
        if (Date.now() >= deadline) throw new Error(`the NATS cluster did not form within ${timeoutMs} ms`, { cause: err });
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await nc.close();
  }
}

/** The names of the probe streams untilClustered makes (and deletes). */
export const PROBE_PREFIX = 'CLUSTER_PROBE_';
