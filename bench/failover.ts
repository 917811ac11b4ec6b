// Failover of the replicated mode, measured (bench/replication.ts runs it): three replicas serve a 1v1
// queue that matches continuously (a steady trickle of one-player tickets from a client that retries
// UNAVAILABLE on the next replica); the queue's leader (found through GET /admin/v1/queues) is killed with
// SIGKILL; the time from the kill to the first match.created made after it (occurred_at later than the
// kill) stored in the outcome stream (sink broker, SVC_MATCH_OUTCOMES) is one sample. The killed replica is
// started again, the bench waits until it runs the queue and matches flow again, and repeats.
//
// Why "made after the kill": the dying leader's last publishes can still be stored a moment after the kill,
// and outcomes it made but had not delivered are delivered by the next leader; neither says when matching
// resumed. Both times are on this machine's one clock (nats-server's stored timestamp, the new leader's
// occurred_at, and Date.now() at the kill).
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { credentials, makeGenericClientConstructor, Metadata, type Client, type ServiceError } from '@grpc/grpc-js';
import { DeliverPolicy, jetstream, jetstreamManager, type ConsumerMessages } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { grpcServiceDefinition, MatchmakerService } from '../src/api/grpc-definitions.js';
import { CreateTicketRequestSchema, type CreateTicketRequest } from '../src/gen/matchmaker/core/v1/service_pb.js';
import { EngineInputSchema } from '../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { OutcomeSchema } from '../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { Child } from './child-process.js';
import type { BenchNatsCluster } from './nats-cluster.js';
import {
  errorLines,
  pollFor,
  queueSummary,
  removeReplicaDirs,
  replicaSpecs,
  replicatedEnv,
  sleep,
  startReplica,
  untilRunning,
  writeQueueDir,
  type ReplicaSpec,
} from './replica-processes.js';

const OUTCOME_STREAM = 'SVC_MATCH_OUTCOMES';
const OUTCOME_PREFIX = 'svc.match.outcomes';

export interface FailoverOptions {
  leaseMs: number;
  kills: number;
  /** Tickets per second of the trickle. */
  rate: number;
  /** The queue's tick interval. */
  tickMs: number;
}

export interface KillSample {
  killed: string;
  /** Kill -> the stored time of the first match.created made after the kill. */
  toDeliveredMs: number;
  /** Kill -> that match's occurred_at: when the new leader made it. */
  toMadeMs: number;
  /** Kill -> the new leader's `leader lease won` line, and its `leading the queue` (its term claimed and applied). */
  toLeaseMs: number | undefined;
  toLeadingMs: number | undefined;
  /** The replica leading afterwards. */
  newLeader: string | undefined;
  /** Start of the killed replica's new process -> its queue running again. */
  rejoinMs: number;
}

export interface FailoverResult {
  leaseMs: number;
  queueId: string;
  samples: KillSample[];
  /** Kills whose next match did not come within the bound (10 leases). */
  missed: number;
  trickle: { created: number; retried: number; failed: number };
  errorLines: number;
}

/** A queue of 1v1 matches without constraints: any two tickets match on the next tick. */
function failoverQueue(tickMs: number): string {
  return [
    'config:',
    `  tick_interval_ms: ${tickMs}`,
    '  rulesets:',
    '    - id: duel',
    '      teams: 2',
    '      team_size: 1',
    '  outcomes:',
    '    sink: broker',
    '',
  ].join('\n');
}

type UnaryCallback = (err: ServiceError | null) => void;
type MatchmakerClient = Client & {
  createTicket(req: CreateTicketRequest, md: Metadata, opts: { deadline: number }, cb: UnaryCallback): unknown;
};
const ClientCtor = makeGenericClientConstructor(grpcServiceDefinition(MatchmakerService), 'MatchmakerService');

/** Creates tickets at `rate`/s, each retried on the next replica until one takes it (it is idempotent). */
class Trickle {
  readonly stats = { created: 0, retried: 0, failed: 0 };
  private stopped = false;
  private readonly clients: MatchmakerClient[];
  private readonly running: Promise<void>;

  constructor(
    specs: readonly ReplicaSpec[],
    private readonly queueId: string,
    rate: number,
  ) {
    this.clients = specs.map((s) => new ClientCtor(`127.0.0.1:${s.grpcPort}`, credentials.createInsecure()) as unknown as MatchmakerClient);
    this.running = this.loop(1000 / rate);
  }

  private async loop(everyMs: number): Promise<void> {
    const pending = new Set<Promise<void>>();
    for (let i = 0; !this.stopped; i++) {
      const p = this.createOne(i).finally(() => pending.delete(p));
      pending.add(p);
      await sleep(everyMs);
    }
    await Promise.all(pending);
  }

  private async createOne(first: number): Promise<void> {
    const id = randomUUID();
    const engineInput = toBinary(EngineInputSchema, create(EngineInputSchema, { players: [{ playerId: `p-${id}`, mmr: 1 }] }));
    const request = create(CreateTicketRequestSchema, { ticket: { id, queueId: this.queueId, engineInput } });
    const deadline = Date.now() + 60_000;
    for (let attempt = 0; !this.stopped && Date.now() < deadline; attempt++) {
      const client = this.clients[(first + attempt) % this.clients.length]!;
      const err = await new Promise<ServiceError | null>((resolve) =>
        client.createTicket(request, new Metadata(), { deadline: Date.now() + 3_000 }, resolve),
      );
      if (!err) {
        this.stats.created++;
        return;
      }
      this.stats.retried++;
      await sleep(50);
    }
    // A ticket still retrying when the trickle stops is not a failure of the service.
    if (!this.stopped) this.stats.failed++;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    for (const c of this.clients) c.close();
  }
}

/** The queue's match.created outcomes as they are stored: when stored, and when made (occurred_at). */
class MatchWatch {
  private readonly seen: { storedMs: number; madeMs: number }[] = [];
  private messages: ConsumerMessages | undefined;

  static async open(nc: NatsConnection, queueId: string): Promise<MatchWatch> {
    const watch = new MatchWatch();
    const jsm = await jetstreamManager(nc);
    // The leader's broker sink creates the stream on its first delivery.
    await pollFor('the outcome stream', () => jsm.streams.info(OUTCOME_STREAM).catch(() => undefined), 60_000, 200);
    const consumer = await jetstream(nc).consumers.get(OUTCOME_STREAM, {
      // One subject as a string: nats-server 2.9 knows filter_subject only.
      filter_subjects: `${OUTCOME_PREFIX}.${queueId}.match.created`,
      deliver_policy: DeliverPolicy.New,
    });
    watch.messages = await consumer.consume();
    void (async () => {
      for await (const m of watch.messages!) {
        const outcome = fromBinary(OutcomeSchema, m.data);
        const madeMs = outcome.occurredAt ? timestampMs(outcome.occurredAt) : Number.NaN;
        watch.seen.push({ storedMs: Number(m.timestampNanos / 1_000_000n), madeMs });
      }
    })();
    return watch;
  }

  /** The first match made after `afterMs`, once it is stored. */
  firstMadeAfter(afterMs: number): { storedMs: number; madeMs: number } | undefined {
    return this.seen.find((s) => s.madeMs > afterMs);
  }

  /** Whether a match was stored within the last `withinMs`. */
  flowing(withinMs: number): boolean {
    const last = this.seen.at(-1);
    return last !== undefined && Date.now() - last.storedMs < withinMs;
  }

  stop(): void {
    this.messages?.stop();
  }
}

/** The replica leading the queue, by the admin route of each (undefined when none or several claim it). */
async function leaderOf(specs: readonly ReplicaSpec[], queueId: string): Promise<number | undefined> {
  const summaries = await Promise.all(specs.map((s) => queueSummary(s.httpPort, queueId)));
  const leading = summaries.flatMap((q, i) => (q?.leading ? [i] : []));
  return leading.length === 1 ? leading[0] : undefined;
}

export async function runFailover(
  cluster: BenchNatsCluster,
  options: FailoverOptions,
  say: (line: string) => void,
): Promise<FailoverResult> {
  const queueId = `bench.failover.l${options.leaseMs}`;
  const queueDir = writeQueueDir({ [queueId]: failoverQueue(options.tickMs) });
  const env = replicatedEnv(cluster.urls, options.leaseMs, `BENCH_COORD_FAILOVER_${options.leaseMs}`);
  const specs = await replicaSpecs(`fo${options.leaseMs}`, 3, queueDir, env);
  const children: (Child | undefined)[] = await Promise.all(specs.map((s) => startReplica(s)));
  const allErrors: Record<string, unknown>[] = [];
  const nc = await cluster.client();
  let trickle: Trickle | undefined;
  let watch: MatchWatch | undefined;
  const samples: KillSample[] = [];
  let missed = 0;
  try {
    for (const s of specs) await untilRunning(s.httpPort, queueId);
    trickle = new Trickle(specs, queueId, options.rate);
    watch = await MatchWatch.open(nc, queueId);
    const bound = 10 * options.leaseMs;
    for (let k = 0; k < options.kills; k++) {
      // Steady state: one leader, and its matches reach the stream.
      const w = watch;
      const leader = await pollFor(
        'a leader whose matches flow',
        async () => (w.flowing(1_000) ? leaderOf(specs, queueId) : undefined),
        60_000,
        100,
      );
      const killed = specs[leader]!;
      const child = children[leader]!;
      const killAt = Date.now();
      child.process.kill('SIGKILL');
      await new Promise((r) =>
        child.process.exitCode !== null || child.process.signalCode !== null ? r(null) : child.process.once('exit', r),
      );
      allErrors.push(...errorLines(child));
      children[leader] = undefined;
      const next = await pollFor('a match made after the kill', async () => w.firstMadeAfter(killAt), bound, 20).catch(() => undefined);
      const newLeaderIndex = await leaderOf(specs, queueId);
      const newLeader = newLeaderIndex === undefined ? undefined : children[newLeaderIndex];
      const after = (msg: string) => newLeader?.lines.find((l) => l.msg === msg && typeof l.time === 'number' && l.time > killAt);
      const leaseLine = after('leader lease won');
      const leadingLine = after('leading the queue');
      // What the survivors warned of between the kill and the match, for a slow failover.
      const warnings = children.flatMap((c, i) =>
        (c?.lines ?? [])
          .filter((l) => typeof l.level === 'number' && l.level >= 40 && typeof l.time === 'number' && l.time > killAt)
          .filter((l) => !next || (l.time as number) <= next.madeMs)
          .map((l) => {
            const err = l.err as { message?: string } | undefined;
            return `${specs[i]!.replicaId} +${(l.time as number) - killAt} ms: ${String(l.msg)}${err?.message ? ` (${err.message})` : ''}`;
          }),
      );
      const restartAt = Date.now();
      children[leader] = await startReplica(killed);
      await untilRunning(killed.httpPort, queueId);
      const rejoinMs = Date.now() - restartAt;
      if (!next) {
        missed++;
        say(`  kill ${k + 1}: ${killed.replicaId} killed; no match within ${bound} ms; rejoined in ${rejoinMs} ms`);
        continue;
      }
      const sample: KillSample = {
        killed: killed.replicaId,
        toDeliveredMs: next.storedMs - killAt,
        toMadeMs: next.madeMs - killAt,
        toLeaseMs: typeof leaseLine?.time === 'number' ? leaseLine.time - killAt : undefined,
        toLeadingMs: typeof leadingLine?.time === 'number' ? leadingLine.time - killAt : undefined,
        newLeader: newLeaderIndex === undefined ? undefined : specs[newLeaderIndex]!.replicaId,
        rejoinMs,
      };
      samples.push(sample);
      say(
        `  kill ${k + 1}: ${sample.killed} -> ${sample.newLeader ?? '?'}; lease won after ${sample.toLeaseMs ?? '?'} ms, leading after ${sample.toLeadingMs ?? '?'} ms, match made after ${sample.toMadeMs} ms, stored after ${sample.toDeliveredMs} ms; killed replica running again ${rejoinMs} ms after its restart`,
      );
      for (const w of warnings.slice(0, 10)) say(`    ${w}`);
    }
  } finally {
    watch?.stop();
    await trickle?.stop();
    await nc.close();
    for (const c of children) {
      if (!c) continue;
      await c.stop();
      allErrors.push(...errorLines(c));
    }
    removeReplicaDirs(specs);
    rmSync(queueDir, { recursive: true, force: true });
  }
  return {
    leaseMs: options.leaseMs,
    queueId,
    samples,
    missed,
    trickle: trickle ? { ...trickle.stats } : { created: 0, retried: 0, failed: 0 },
    errorLines: allErrors.length,
  };
}
