// Service processes in the replicated mode on one nats-server (tests of serving, not of the NATS cluster:
// test/support/service-cluster.ts runs three replicas on a three-node cluster).
import { pollUntil } from './queues.js';
import { startService, type TestService } from './service.js';
import { httpRequest } from './transports.js';

/** One replica per id, sharing `queueDir`, with a 2 s lease; resolves once every replica runs every queue. */
export async function startReplicaServices(
  natsUrl: string,
  queueDir: string,
  replicaIds: readonly string[],
  options: { env?: Record<string, string>; adminToken?: string } = {},
): Promise<TestService[]> {
  const headers: Record<string, string> = options.adminToken === undefined ? {} : { authorization: `Bearer ${options.adminToken}` };
  const replicas: TestService[] = [];
  for (const id of replicaIds) {
    replicas.push(
      await startService({
        queueDir,
        env: { POOL_REPLICATION_BACKEND: 'broker', BROKER_URL: natsUrl, REPLICA_ID: id, LEADER_LEASE_MS: '2000', ...options.env },
      }),
    );
  }
  for (const r of replicas) {
    await pollUntil(
      () => httpRequest(r, 'GET', '/admin/v1/queues', undefined, headers),
      (res) => (res.body.queues as { state: string }[]).every((q) => q.state === 'running'),
      20_000,
    );
  }
  return replicas;
}
