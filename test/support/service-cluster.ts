// Replicas of the real service (the built CLI, one process each) in the replicated mode on a test NATS
// cluster (nats-cluster.ts): one shared queue directory, a data directory and a REPLICA_ID each, R3 resources
// with names of their own per group (so groups on one cluster never share a stream). A replica can be
// killed (SIGKILL), paused (SIGSTOP) and started again under the same id. Also: each replica's admin view
// (queue summaries, who leads a queue, delivery progress) and the outcome stream read back in full.
import { randomBytes } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import { DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { OutcomeSchema, type Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { TestNatsCluster } from './nats-cluster.js';
import type { QueueSummary } from '../../src/core/operator.js';
import { removeDirs, startService, tempDir, writeQueues, type TestService } from './service.js';
import { httpRequest } from './transports.js';

/** A queue as GET /admin/v1/queues answers it (the operator's summary, as JSON). */
export type QueueSummaryJson = QueueSummary;

export interface DeliveryJson {
  queueId: string;
  sink: string;
  deliveredThrough: string;
  lastRecorded: string;
}

export interface ServiceClusterOptions {
  nats: TestNatsCluster;
  /** Queue files by queue id (YAML text), shared by every replica. */
  queues: Record<string, string>;
  /** Replicas (default 3). */
  size?: number;
  /** LEADER_LEASE_MS (default 2000). */
  leaseMs?: number;
  /** More environment of every replica. */
  env?: Record<string, string>;
}

export interface Replica {
  readonly id: string;
  /** The running process, or undefined while killed or stopped. */
  readonly service: TestService | undefined;
  readonly running: boolean;
}

export interface UnexpectedExit {
  replica: number;
  code: number | null;
  signal: string | null;
  stderr: string;
  lastLogs: Record<string, unknown>[];
}

export interface ServiceCluster {
  readonly replicas: readonly Replica[];
  /** Environment every replica gets: names of this group's resources included. */
  readonly env: Readonly<Record<string, string>>;
  readonly queueDir: string;
  /** The outcome stream (BROKER_STREAM_OUTCOMES) and its subject prefix. */
  readonly outcomeStream: string;
  readonly outcomePrefix: string;
  /** Replicas that exited without being killed by the test: their exit, stderr and last log lines. */
  readonly unexpectedExits: readonly UnexpectedExit[];
  /** SIGKILL replica `i`; resolves once it exited. */
  kill(i: number): Promise<void>;
  /** Starts replica `i` again (same id, a new data directory) and resolves once it listens. */
  start(i: number): Promise<void>;
  /** Queue summaries of replica `i` (throws while it does not answer 200). */
  summaries(i: number): Promise<QueueSummaryJson[]>;
  deliveries(i: number): Promise<DeliveryJson[]>;
  /** The index of the one replica among `among` (default: all running) that says it leads `queueId`, once
   *  exactly one does; rejects with what the replicas said (leadershipReport) if none did within `timeoutMs`
   *  (default 20 s). A paused (SIGSTOP) replica does not answer: leave it out of `among`. */
  leaderOf(queueId: string, options?: { among?: readonly number[]; timeoutMs?: number }): Promise<number>;
  /** What replicas `among` (default: all running) say of `queueId` now, with their last log lines about it:
   *  the message of an assertion that no leader came. */
  leadershipReport(queueId: string, among?: readonly number[]): Promise<string>;
  /** Resolves once every running replica answers with every queue `running`; throws after `timeoutMs`. */
  untilRunning(timeoutMs?: number): Promise<void>;
  /** Kills every replica (a paused one too) and removes the directories. */
  dispose(): Promise<void>;
}

export async function startServiceCluster(options: ServiceClusterOptions): Promise<ServiceCluster> {
  const { nats } = options;
  const size = options.size ?? 3;
  const tag = randomBytes(3).toString('hex');
  const queueDir = tempDir('cluster-queues');
  writeQueues(queueDir, options.queues);
  const env: Record<string, string> = {
    POOL_REPLICATION_BACKEND: 'broker',
    BROKER_URL: nats.urls,
    BROKER_STREAM_REPLICAS: '3',
    LEADER_LEASE_MS: String(options.leaseMs ?? 2000),
    BROKER_SUBJECT_PREFIX_REPLICATION: `t${tag}.repl`,
    BROKER_STREAM_REPLICATION_PREFIX: `REPL_${tag}`,
    BROKER_KV_COORDINATION: `COORD_${tag}`,
    BROKER_OBJECT_STORE_CHECKPOINTS: `CKPT_${tag}`,
    BROKER_STREAM_OUTCOMES: `OUT_${tag}`,
    BROKER_SUBJECT_PREFIX_OUTCOMES: `t${tag}.outcomes`,
    ...options.env,
  };
  const outcomeStream = env.BROKER_STREAM_OUTCOMES!;
  const outcomePrefix = env.BROKER_SUBJECT_PREFIX_OUTCOMES!;
  const services: (TestService | undefined)[] = Array.from({ length: size }, () => undefined);
  const dataDirs: string[] = [];
  const unexpectedExits: UnexpectedExit[] = [];
  const ids = Array.from({ length: size }, (_, i) => `r${i}-${tag}`);

  const start = async (i: number) => {
    if (services[i]) throw new Error(`replica ${i} is running`);
    const dataDir = tempDir('cluster-data');
    dataDirs.push(dataDir);
    const service = await startService({ queueDir, dataDir, env: { ...env, REPLICA_ID: ids[i]! } });
    services[i] = service;
    let stderr = '';
    service.process.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    service.process.once('exit', (code, signal) => {
      if (services[i] === service) {
        services[i] = undefined;
        unexpectedExits.push({ replica: i, code, signal, stderr, lastLogs: service.logs.slice(-20) });
      }
    });
  };
  const kill = async (i: number) => {
    const s = services[i];
    services[i] = undefined;
    await s?.kill();
  };
  const running = (i: number) => services[i] !== undefined;
  const summaries = async (i: number) => {
    const res = await httpRequest(live(services, i), 'GET', '/admin/v1/queues');
    if (res.status !== 200) throw new Error(`replica ${i}: /admin/v1/queues answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body.queues as QueueSummaryJson[];
  };
  const replicas: Replica[] = ids.map((id, i) => ({
    id,
    get service() {
      return services[i];
    },
    get running() {
      return running(i);
    },
  }));

  try {
    await Promise.all(ids.map((_, i) => start(i)));
  } catch (err) {
    await Promise.all(ids.map((_, i) => kill(i)));
    throw err;
  }
  const runningIndexes = () => ids.map((_, i) => i).filter(running);
  const leadershipReport = async (queueId: string, among: readonly number[] = runningIndexes()) => {
    const said = await Promise.all(
      among.map(async (i) => {
        const summary = await summaries(i).then(
          (qs) => qs.find((q) => q.queueId === queueId),
          (err: unknown) => String(err),
        );
        const logs = (services[i]?.logs ?? [])
          .filter((l) => l.queue === queueId || Number(l.level) >= 40)
          .slice(-12)
          .map((l) => ({ time: l.time, level: l.level, msg: l.msg, err: (l.err as { message?: string } | undefined)?.message }));
        return { replica: i, summary, logs };
      }),
    );
    return JSON.stringify(said);
  };

  return {
    replicas,
    env,
    queueDir,
    outcomeStream,
    outcomePrefix,
    unexpectedExits,
    kill,
    start,
    summaries,
    async deliveries(i) {
      const res = await httpRequest(live(services, i), 'GET', '/admin/v1/deliveries');
      if (res.status !== 200) throw new Error(`replica ${i}: /admin/v1/deliveries answered ${res.status}`);
      return res.body.deliveries as DeliveryJson[];
    },
    async leaderOf(queueId, o = {}) {
      const timeoutMs = o.timeoutMs ?? 20_000;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const among = o.among ?? runningIndexes();
        const leading = await Promise.all(
          among.map(async (i) => {
            const mine = (await summaries(i).catch(() => [])).find((q) => q.queueId === queueId);
            return mine?.leading === true && mine.state === 'running' ? i : undefined;
          }),
        );
        const leaders = leading.filter((i) => i !== undefined);
        if (leaders.length === 1) return leaders[0]!;
        if (Date.now() >= deadline) {
          throw new Error(`no one leader of ${queueId} among [${among}] within ${timeoutMs} ms: ${await leadershipReport(queueId, among)}`);
        }
        await sleep(50);
      }
    },
    leadershipReport,
    async untilRunning(timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const states = await Promise.all(
          runningIndexes().map(async (i) => (await summaries(i).catch(() => [{ queueId: '?', state: 'unanswered' }])).map((q) => q.state)),
        );
        if (states.every((s) => s.length > 0 && s.every((state) => state === 'running'))) return;
        if (Date.now() >= deadline) {
          // What the replicas that are not there yet said: why a queue stays starting.
          const said = runningIndexes()
            .filter((i) => !states[runningIndexes().indexOf(i)]!.every((state) => state === 'running'))
            .map((i) => ({ replica: i, logs: services[i]!.logs.filter((l) => Number(l.level) >= 40).slice(-10) }));
          throw new Error(
            `replicas not all running within ${timeoutMs} ms: ${JSON.stringify(states)}; they logged ${JSON.stringify(said)}`,
          );
        }
        await sleep(100);
      }
    },
    async dispose() {
      await Promise.all(ids.map((_, i) => kill(i)));
      removeDirs(queueDir, ...dataDirs);
    },
  };
}

function live(services: readonly (TestService | undefined)[], i: number): TestService {
  const s = services[i];
  if (!s) throw new Error(`replica ${i} is not running`);
  return s;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** An outcome as it sits in the stream: its stream sequence and subject, decoded. */
export interface StreamedOutcome {
  seq: number;
  subject: string;
  outcome: Outcome;
}

/**
 * The outcome stream read back from its start, the way a customer catching up would: ordered consumers,
 * each `sync()` reading on from the last message seen to the stream's last one. `all` keeps every message
 * (redeliveries by a new leader included); `unique` the first of each outcome id, in stream order.
 */
export class OutcomeLog {
  readonly all: StreamedOutcome[] = [];
  private readonly byId = new Map<string, StreamedOutcome>();
  private readSeq = 0;

  constructor(
    private readonly nc: NatsConnection,
    readonly stream: string,
  ) {}

  get unique(): StreamedOutcome[] {
    return [...this.byId.values()];
  }

  /** Reads every message the stream holds now; fails if the stream cannot be read. */
  async sync(): Promise<StreamedOutcome[]> {
    const jsm = await jetstreamManager(this.nc, { timeout: 3000 });
    const last = (await jsm.streams.info(this.stream)).state.last_seq;
    while (this.readSeq < last) {
      const consumer = await jetstream(this.nc, { timeout: 3000 }).consumers.get(this.stream, {
        deliver_policy: DeliverPolicy.StartSequence,
        opt_start_seq: this.readSeq + 1,
      });
      const messages = await consumer.fetch({ max_messages: Math.min(1000, last - this.readSeq), expires: 2000 });
      let got = 0;
      for await (const m of messages) {
        got++;
        const streamed = { seq: m.seq, subject: m.subject, outcome: fromBinary(OutcomeSchema, m.data) };
        this.readSeq = m.seq;
        this.all.push(streamed);
        if (!this.byId.has(streamed.outcome.id)) this.byId.set(streamed.outcome.id, streamed);
      }
      if (got === 0) throw new Error(`outcome stream ${this.stream}: nothing read past ${this.readSeq} of ${last}`);
    }
    return this.unique;
  }

  /**
   * Reads the stream again from its first message, forgetting what was read: a consumer placed on a node that
   * rejoined after a fault may have delivered what that node held at some positions before it caught up
   * (docs/replication.md, "What is left"), and a read made after the cluster settled gives what the stream holds.
   */
  async reread(): Promise<StreamedOutcome[]> {
    this.all.length = 0;
    this.byId.clear();
    this.readSeq = 0;
    return this.sync();
  }

  /** Syncs until `done` holds for the unique outcomes (or the time is up: then returns what was read). */
  async until(done: (unique: StreamedOutcome[]) => boolean, timeoutMs = 15_000): Promise<StreamedOutcome[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const unique = await this.sync().catch(() => this.unique);
      if (done(unique) || Date.now() >= deadline) return unique;
      await sleep(200);
    }
  }
}
