// The deployment files (deploy/compose, deploy/kubernetes) say what the service and NATS understand: every
// setting is one the service reads and accepts, the replicas reach every NATS node, the NATS nodes route to
// each other, and streams get as many replicas as there are nodes. No container runtime runs here, so this
// is what can be checked of them on any machine.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadServiceConfig, serviceConfigEnv } from '../../src/config/service-config.js';

const ROOT = resolve(import.meta.dirname, '../..');
const KNOWN_ENV = new Set(Object.values(serviceConfigEnv));

/** Checks a replica's environment: known names, accepted values, the replicated mode on `natsHosts`. */
function checkReplicaEnv(env: Record<string, string>, natsHosts: readonly string[]): void {
  for (const name of Object.keys(env)) expect(KNOWN_ENV, name).toContain(name);
  const config = loadServiceConfig({}, env);
  expect(config.pool_replication_backend).toBe('broker');
  expect(config.broker_stream_replicas).toBe(natsHosts.length);
  const brokers = config.broker_url.split(',').map((u) => new URL(u.trim()));
  expect(brokers.map((u) => u.hostname).sort()).toEqual([...natsHosts].sort());
  expect(new Set(brokers.map((u) => u.port))).toEqual(new Set(['4222']));
}

/** The route hosts and server name a nats-server command line gives. */
function natsArgs(args: readonly string[]): { routes: string[]; name: string | undefined; jetstream: boolean } {
  const at = (flag: string) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined);
  const routes = (at('--routes') ?? '').split(',').map((r) => new URL(r).hostname);
  return { routes, name: at('-n'), jetstream: args.includes('-js') };
}

describe('deploy/compose/compose.yaml', () => {
  const compose = parse(readFileSync(join(ROOT, 'deploy/compose/compose.yaml'), 'utf8'), { merge: true }) as {
    services: Record<string, { command?: string[]; environment?: Record<string, string>; build?: { context: string } }>;
  };
  const services = Object.entries(compose.services);
  const nats = services.filter(([name]) => name.startsWith('nats-'));
  const replicas = services.filter(([name]) => name.startsWith('matchmaker-'));

  it('runs a three-node JetStream cluster whose nodes route to each other', () => {
    expect(nats).toHaveLength(3);
    const names = nats.map(([name]) => name);
    for (const [name, service] of nats) {
      const args = natsArgs(service.command!);
      expect(args.jetstream).toBe(true);
      expect(args.name).toBe(name);
      expect(args.routes.sort()).toEqual([...names].sort());
    }
  });

  it('runs three replicas on every node, each with its own id, built from the repository', () => {
    expect(replicas).toHaveLength(3);
    const ids = replicas.map(([, s]) => s.environment!.REPLICA_ID);
    expect(new Set(ids).size).toBe(3);
    for (const [, service] of replicas) {
      checkReplicaEnv(
        service.environment!,
        nats.map(([name]) => name),
      );
      expect(existsSync(join(ROOT, 'deploy/compose', service.build!.context, 'Dockerfile'))).toBe(true);
    }
  });
});

describe('deploy/kubernetes', () => {
  type Doc = { kind: string; metadata: { name: string }; spec: Record<string, unknown> };
  const dir = join(ROOT, 'deploy/kubernetes');
  const kustomization = parse(readFileSync(join(dir, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
  const docs: Doc[] = kustomization.resources.flatMap((file) =>
    parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => d.toJS() as Doc),
  );
  const find = (kind: string, name: string) => docs.find((d) => d.kind === kind && d.metadata.name === name)!;
  type PodSpec = {
    containers: {
      args?: string[];
      env: { name: string; value?: string; valueFrom?: unknown }[];
      ports: { containerPort: number }[];
      readinessProbe: { httpGet: { path: string } };
    }[];
  };
  const podOf = (doc: Doc) => (doc.spec.template as { spec: PodSpec }).spec;

  it('runs a three-node JetStream cluster whose pods route to each other through the headless service', () => {
    const statefulSet = find('StatefulSet', 'nats');
    const service = find('Service', 'nats');
    expect(service.spec.clusterIP).toBe('None');
    const replicas = statefulSet.spec.replicas as number;
    expect(replicas).toBe(3);
    const hosts = Array.from({ length: replicas }, (_, i) => `nats-${i}.${statefulSet.spec.serviceName as string}`);
    const args = natsArgs(podOf(statefulSet).containers[0]!.args!);
    expect(args.jetstream).toBe(true);
    expect(args.routes.sort()).toEqual(hosts);
  });

  it('runs replicas in the replicated mode on every node, each named by its pod, probed on /readyz', () => {
    const statefulSet = find('StatefulSet', 'nats');
    const hosts = Array.from({ length: statefulSet.spec.replicas as number }, (_, i) => `nats-${i}.nats`);
    const deployment = find('Deployment', 'matchmaker');
    const container = podOf(deployment).containers[0]!;
    const env: Record<string, string> = {};
    for (const e of container.env) {
      expect(KNOWN_ENV, e.name).toContain(e.name);
      env[e.name] = e.value ?? 'matchmaker-7d9f-abcde';
    }
    expect(container.env.find((e) => e.name === 'REPLICA_ID')!.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
    checkReplicaEnv(env, hosts);
    expect(container.ports.map((p) => p.containerPort).sort()).toEqual([8080, 9001]);
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
  });
});
