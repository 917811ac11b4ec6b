// A private three-node nats-server cluster (JetStream, routes on loopback) per test file, for the replicated
// mode: R3 streams, node loss and restart. Each node has its own client and cluster port and store
// directory; a node can be killed (SIGKILL) and restarted on the same ports and directory. Started once
// per file (beforeAll): forming the cluster takes about a second on a 2-core machine.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll } from 'vitest';
import { untilClustered } from '../../bench/nats-cluster.js';
import { freePort, natsProcess, type NatsProcess } from './nats.js';
import { removeDirs, tempDir } from './service.js';

export interface TestNatsCluster {
  /** The client URL of each node. */
  readonly servers: readonly string[];
  /** Every node's client URL, comma-joined: what BROKER_URL takes. */
  readonly urls: string;
  /** Each node's store directory. */
  readonly storeDirs: readonly string[];
  /** Each node's monitoring endpoint (http://127.0.0.1:<port>: /jsz, /varz, ...). */
  readonly monitors: readonly string[];
  running(node: number): boolean;
  /** SIGKILL node `node`, like a crash; resolves once the process exited. */
  kill(node: number): Promise<void>;
  /** SIGSTOP node `node`: it freezes with its connections open, as a hung host does (clients and peers see
   *  silence, not a close). */
  pause(node: number): void;
  /** SIGCONT node `node` after pause(). */
  resume(node: number): void;
  /** Starts node `node` again (killing it first if it runs) on the same ports and store directory; resolves
   *  once it accepts clients and answers JetStream requests (after a kill of the meta leader that waits for
   *  the election of the next one: a few seconds). */
  restart(node: number): Promise<void>;
  /** Kills every node and removes the directories. */
  dispose(): Promise<void>;
}

export interface NatsClusterOptions {
  /** Nodes (default 3). */
  size?: number;
  /** How long to wait for the cluster to form (a JetStream meta leader that can place an R<size> stream). */
  readyTimeoutMs?: number;
}

/**
 * Starts a cluster; one that does not form is thrown away and started again on other ports (up to three
 * times): a cluster port taken between its reservation and the node's bind leaves that node without
 * routes, and the cluster then never has the peers to place a stream ("no suitable peers for placement").
 */
export async function startNatsCluster(options: NatsClusterOptions = {}): Promise<TestNatsCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNatsClusterOnce(options);
    } catch (err) {
      if (attempt >= 3) throw err;
    }
  }
}

async function startNatsClusterOnce(options: NatsClusterOptions): Promise<TestNatsCluster> {
  const size = options.size ?? 3;
  const dir = tempDir('nats-cluster');
  const name = `mm-test-${randomBytes(3).toString('hex')}`;
  // Ports are reserved one by one and released before the servers bind them; a clash makes start() retry.
  const clientPorts: number[] = [];
  const clusterPorts: number[] = [];
  const monitorPorts: number[] = [];
  for (let i = 0; i < size; i++) {
    clientPorts.push(await freePort());
    clusterPorts.push(await freePort());
    monitorPorts.push(await freePort());
  }
  const servers = clientPorts.map((p) => `nats://127.0.0.1:${p}`);
  const storeDirs = clientPorts.map((_, i) => join(dir, `n${i}`));
  const nodes: NatsProcess[] = clientPorts.map((port, i) => {
    const routes = clusterPorts.filter((_, j) => j !== i).map((p) => `nats://127.0.0.1:${p}`);
    const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPorts[i]), '-n', `n${i}`, '-sd', storeDirs[i]!];
    args.push('--cluster_name', name, '-cluster', `nats://127.0.0.1:${clusterPorts[i]}`, '-routes', routes.join(','));
    return natsProcess(args, `cluster ${name} node n${i}, port ${port}`);
  });
  const node = (i: number): NatsProcess => {
    const n = nodes[i];
    if (!n) throw new RangeError(`no node ${i} in a cluster of ${size}`);
    return n;
  };
  const dispose = async () => {
    await Promise.all(nodes.map((n) => n.kill()));
    removeDirs(dir);
  };
  try {
    await Promise.all(nodes.map((n) => n.start()));
    await untilClustered(servers, size, options.readyTimeoutMs ?? 15_000);
  } catch (err) {
    await dispose();
    throw err;
  }
  return {
    servers,
    urls: servers.join(','),
    storeDirs,
    monitors: monitorPorts.map((p) => `http://127.0.0.1:${p}`),
    running: (i) => node(i).running,
    kill: (i) => node(i).kill(),
    pause: (i) => node(i).pause(),
    resume: (i) => node(i).resume(),
    async restart(i) {
      await node(i).kill();
      await node(i).start();
      await untilJetStreamAnswers(servers[i]!, options.readyTimeoutMs ?? 20_000);
    },
    dispose,
  };
}

/** A cluster for one test file: started before its tests, disposed after them; the getter gives it. */
export function useNatsCluster(options: NatsClusterOptions = {}): () => TestNatsCluster {
  let cluster: TestNatsCluster | undefined;
  beforeAll(async () => {
    cluster = await startNatsCluster(options);
  }, 60_000);
  afterAll(async () => {
    await cluster?.dispose();
  });
  return () => cluster!;
}

/** A client of the whole cluster; it fails over to another node when one goes, and reconnects quickly. */
export function clusterClient(cluster: TestNatsCluster): Promise<NatsConnection> {
  return connect({ servers: [...cluster.servers], maxReconnectAttempts: -1, reconnectTimeWait: 100 });
}

/** Resolves once the node at `server` answers a JetStream request (it has rejoined and knows a meta leader). */
async function untilJetStreamAnswers(server: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const nc = await connect({ servers: server, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  try {
    for (;;) {
      try {
        const jsm = await jetstreamManager(nc, { timeout: 500 });
        await jsm.getAccountInfo();
        return;
      } catch (err) {
        if (Date.now() >= deadline) throw new Error(`NATS node ${server} did not rejoin within ${timeoutMs} ms`, { cause: err });
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    await nc.close();
  }
}
