// The broker resources of the replicated mode (POOL_REPLICATION_BACKEND=broker): one replication stream per
// queue (its log), the coordination KV bucket (leader leases) and the checkpoint object store. In create
// mode (BROKER_RESOURCE_MODE) a missing resource is created and an existing one checked; in bind mode
// nothing is created, and each must exist and fit. Either way a stream that could drop or refuse a log
// record is refused at start, with a typed error naming it, rather than found out after records were lost.
// The outcome stream is not made here: src/outcomes/broker/stream.ts provisions it.
import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { Objm, setSha256Backend, type ObjectStore } from '@nats-io/obj';
import { millis, nanos, type NatsConnection } from '@nats-io/transport-node';
import type { QueueConfig } from '../../config/queue-config.js';
import type { ServiceConfig } from '../../config/service-config.js';
import { ReplicationResourceError, type ReplicationResourceType } from './errors.js';
import { REPLICATION_KINDS, replicationFilter, replicationStreamName, replicationSubject, type ReplicationKind } from './names.js';
import { logStreamProblems, type StreamProblem } from './stream-checks.js';

/** JetStream dedupe window of a replication stream made in create mode: a retried publish within it is
 *  answered with the original sequence. Apply-time checks are the real guarantee; this saves log space. */
export const REPLICATION_DUPLICATE_WINDOW_MS = 2 * 60_000;
/** Queues whose streams are made sure of at once (each is a few JetStream API requests). */
const CONCURRENCY = 8;

export interface ReplicationSettings {
  /** BROKER_RESOURCE_MODE */
  mode: 'create' | 'bind';
  /** BROKER_STREAM_REPLICAS: replicas of what create mode makes. */
  replicas: number;
  /** BROKER_SUBJECT_PREFIX_REPLICATION */
  subjectPrefix: string;
  /** BROKER_STREAM_REPLICATION_PREFIX */
  streamPrefix: string;
  /** BROKER_KV_COORDINATION */
  kvBucket: string;
  /** BROKER_OBJECT_STORE_CHECKPOINTS */
  objectStore: string;
  /** LEADER_LEASE_MS: the TTL of the KV bucket. */
  leaderLeaseMs: number;
  /** How long one JetStream API request waits for its answer. */
  timeoutMs: number;
}

export function replicationSettings(config: ServiceConfig, timeoutMs = 5000): ReplicationSettings {
  return {
    mode: config.broker_resource_mode,
    replicas: config.broker_stream_replicas,
    subjectPrefix: config.broker_subject_prefix_replication,
    streamPrefix: config.broker_stream_replication_prefix,
    kvBucket: config.broker_kv_coordination,
    objectStore: config.broker_object_store_checkpoints,
    leaderLeaseMs: config.leader_lease_ms,
    timeoutMs,
  };
}

/** A queue as the resources need it (a QueueFile fits). */
export interface ReplicatedQueue {
  queueId: string;
  config: Pick<QueueConfig, 'replication'>;
}

/** Where a queue's records go. */
export interface QueueLogResources {
  queueId: string;
  /** Its replication stream. */
  stream: string;
  /** `<prefix>.*.<queue_id>`: every subject of its records. */
  filter: string;
  /** The subject of each kind of record. */
  subjects: Record<ReplicationKind, string>;
}

export interface ReplicationResources {
  queues: Map<string, QueueLogResources>;
  /** The coordination bucket (leader leases). */
  kv: KV;
  /** The checkpoint object store. */
  checkpoints: ObjectStore;
}

/**
 * The stream and subjects of each queue, without asking the server. Throws a `binding` error when, in bind
 * mode, a queue does not name its stream, or two queues name (or would be given) the same stream.
 */
export function planQueueLogs(settings: ReplicationSettings, queues: Iterable<ReplicatedQueue>): QueueLogResources[] {
  const plans: QueueLogResources[] = [];
  const byStream = new Map<string, string>();
  for (const { queueId, config } of queues) {
    let stream: string;
    if (settings.mode === 'bind') {
      const bound = config.replication.binding.stream_name;
      if (bound === undefined) {
        throw new ReplicationResourceError(
          'binding',
          `queue "${queueId}" has no replication.binding.stream_name; BROKER_RESOURCE_MODE=bind requires each queue to name its provisioned replication stream`,
          { queueId },
        );
      }
      stream = bound;
    } else {
      stream = replicationStreamName(settings.streamPrefix, queueId);
    }
    const other = byStream.get(stream);
    if (other !== undefined) {
      throw new ReplicationResourceError(
        'binding',
        `queues "${other}" and "${queueId}" both use replication stream "${stream}"; each queue needs a stream of its own`,
        { queueId, resource: { type: 'stream', name: stream } },
      );
    }
    byStream.set(stream, queueId);
    const subjects = Object.fromEntries(REPLICATION_KINDS.map((k) => [k, replicationSubject(settings.subjectPrefix, k, queueId)]));
    plans.push({
      queueId,
      stream,
      filter: replicationFilter(settings.subjectPrefix, queueId),
      subjects: subjects as QueueLogResources['subjects'],
    });
  }
  return plans;
}

/**
 * Makes sure of every resource of the replicated mode for `queues` (create mode: creates what is missing;
 * bind mode: each must exist) and checks each fits. Throws a ReplicationResourceError naming the first
 * resource that does not. Safe to run from several replicas at once.
 */
export async function ensureReplicationResources(
  nc: NatsConnection,
  settings: ReplicationSettings,
  queues: Iterable<ReplicatedQueue>,
): Promise<ReplicationResources> {
  const plans = planQueueLogs(settings, queues);
  const js = jetstream(nc, { timeout: settings.timeoutMs });
  let jsm: JetStreamManager;
  try {
    jsm = await js.jetstreamManager(true);
  } catch (err) {
    throw new ReplicationResourceError('jetstream', 'JetStream is not available', { cause: err });
  }
  const kv = await ensureCoordinationBucket(js, jsm, settings);
  const checkpoints = await ensureCheckpointStore(js, jsm, settings);
  for (let i = 0; i < plans.length; i += CONCURRENCY) {
    await Promise.all(plans.slice(i, i + CONCURRENCY).map((plan) => ensureQueueLog(jsm, settings, plan, plans)));
  }
  return { queues: new Map(plans.map((p) => [p.queueId, p])), kv, checkpoints };
}

/**
 * Makes sure of one queue's replication stream (e.g. for a queue added by a reload); `all` are every
 * configured queue's plans, whose subjects the stream must not capture. Answers the stream's info.
 */
export async function ensureQueueLog(
  jsm: JetStreamManager,
  settings: ReplicationSettings,
  plan: QueueLogResources,
  all: readonly QueueLogResources[],
): Promise<StreamInfo> {
  const want = {
    filter: plan.filter,
    subjects: Object.values(plan.subjects),
    others: all.filter((p) => p.queueId !== plan.queueId),
    replicas: settings.mode === 'create' ? settings.replicas : undefined,
  };
  const config: Partial<StreamConfig> & { name: string } = {
    name: plan.stream,
    description: `matchmaker replication log of queue ${plan.queueId}`,
    subjects: [plan.filter],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_msgs: -1,
    max_bytes: -1,
    max_age: 0,
    max_msgs_per_subject: -1,
    num_replicas: settings.replicas,
    deny_delete: true,
    deny_purge: false,
    duplicate_window: nanos(REPLICATION_DUPLICATE_WINDOW_MS),
    // Any node of the stream answers reads by position, without its leader or the cluster's meta leader: how
    // a replica reads on while a node is lost or returning (replication-log.ts).
    allow_direct: true,
  };
  const info = await ensure(jsm, settings.mode, {
    resource: { type: 'stream', name: plan.stream },
    queueId: plan.queueId,
    what: `replication stream "${plan.stream}" of queue "${plan.queueId}"`,
    provision: `with the subject "${plan.filter}", limits retention and no age, size or count limits`,
    add: () => jsm.streams.add(config),
    problems: (info) => logStreamProblems(info.config, want),
  });
  // A stream made by an earlier version has no direct gets: create mode turns them on (bind mode leaves
  // the operator's stream as it is; its readers then read through the stream's leader).
  if (settings.mode === 'create' && info.config.allow_direct !== true) {
    try {
      return await jsm.streams.update(plan.stream, { allow_direct: true });
    } catch (err) {
      throw new ReplicationResourceError('jetstream', `cannot turn on direct gets of replication stream "${plan.stream}"`, {
        cause: err,
        resource: { type: 'stream', name: plan.stream },
        queueId: plan.queueId,
      });
    }
  }
  return info;
}

async function ensureCoordinationBucket(js: JetStreamClient, jsm: JetStreamManager, settings: ReplicationSettings): Promise<KV> {
  const name = settings.kvBucket;
  const kvm = new Kvm(js);
  const opts = { history: 1, ttl: settings.leaderLeaseMs, replicas: settings.replicas, storage: StorageType.File };
  const info = await ensure(jsm, settings.mode, {
    resource: { type: 'kv', name },
    what: `coordination bucket "${name}"`,
    provision: `with a TTL of LEADER_LEASE_MS (${settings.leaderLeaseMs} ms)`,
    add: () => kvm.create(name, opts),
    problems: (info) => {
      const problems: StreamProblem[] = [];
      const ttl = millis(info.config.max_age);
      // The TTL is the lease: without it a crashed leader would never be replaced.
      if (ttl !== settings.leaderLeaseMs)
        problems.push({ kind: 'mismatch', detail: `its TTL is ${ttl} ms, LEADER_LEASE_MS is ${settings.leaderLeaseMs}` });
      if (settings.mode === 'create') problems.push(...replicaProblems(info, settings.replicas));
      return problems;
    },
  });
  try {
    return await kvm.open(name, { allow_direct: info.config.allow_direct ?? false });
  } catch (err) {
    throw new ReplicationResourceError('jetstream', `cannot open coordination bucket "${name}"`, {
      cause: err,
      resource: { type: 'kv', name },
    });
  }
}

async function ensureCheckpointStore(js: JetStreamClient, jsm: JetStreamManager, settings: ReplicationSettings): Promise<ObjectStore> {
  const name = settings.objectStore;
  // The object store hashes every chunk it puts and gets (SHA-256) in pure JS by default: 14.5 ms per MiB
  // on this project's machine against 0.6 with node:crypto, so a 1M-ticket checkpoint (~430 MiB) cost
  // its leader ~6 s on the event loop to save and a restarting replica as much to read.
  setSha256Backend('native');
  const objm = new Objm(js);
  await ensure(jsm, settings.mode, {
    resource: { type: 'object-store', name },
    what: `checkpoint object store "${name}"`,
    provision: 'without age or size limits',
    add: () => objm.create(name, { replicas: settings.replicas, storage: StorageType.File }),
    problems: (info) => {
      const problems: StreamProblem[] = [];
      if (info.config.max_age > 0)
        problems.push({ kind: 'limits', detail: `it has max_age ${millis(info.config.max_age)} ms, which would drop checkpoints` });
      if (info.config.max_bytes > 0)
        problems.push({ kind: 'limits', detail: `it has max_bytes ${info.config.max_bytes}, which would refuse checkpoints` });
      if (settings.mode === 'create') problems.push(...replicaProblems(info, settings.replicas));
      return problems;
    },
  });
  try {
    return await objm.open(name, false);
  } catch (err) {
    throw new ReplicationResourceError('jetstream', `cannot open checkpoint object store "${name}"`, {
      cause: err,
      resource: { type: 'object-store', name },
    });
  }
}

function replicaProblems(info: StreamInfo, replicas: number): StreamProblem[] {
  if (info.config.num_replicas === replicas) return [];
  return [{ kind: 'mismatch', detail: `it has ${info.config.num_replicas} replicas, BROKER_STREAM_REPLICAS asks for ${replicas}` }];
}

interface Resource {
  type: ReplicationResourceType;
  name: string;
}

interface Ensure {
  resource: Resource;
  queueId?: string;
  /** The resource as messages name it. */
  what: string;
  /** How bind mode wants it provisioned. */
  provision: string;
  /** Creates it (create mode). */
  add: () => Promise<unknown>;
  /** What is wrong with it; empty if it fits. */
  problems: (info: StreamInfo) => StreamProblem[];
}

/**
 * Makes sure of a resource: checks it if it exists; otherwise creates it (create mode) or throws `missing`
 * (bind mode). Another replica may create it at the same moment with another configuration (the server then
 * refuses ours): if it exists after a failed create, it is checked instead. Returns its stream's info.
 */
async function ensure(jsm: JetStreamManager, mode: ReplicationSettings['mode'], e: Ensure): Promise<StreamInfo> {
  const { resource, queueId } = e;
  const fits = (info: StreamInfo): StreamInfo => {
    const problems = e.problems(info);
    if (problems.length === 0) return info;
    throw new ReplicationResourceError(problems[0]!.kind, `${e.what} does not fit: ${problems.map((p) => p.detail).join('; ')}`, {
      resource,
      queueId,
    });
  };
  const existing = await streamInfo(jsm, resource);
  if (existing) return fits(existing);
  if (mode === 'bind') {
    throw new ReplicationResourceError(
      'missing',
      `${e.what} does not exist; BROKER_RESOURCE_MODE=bind requires it to be provisioned ${e.provision}`,
      {
        resource,
        queueId,
      },
    );
  }
  let failure: unknown;
  try {
    await e.add();
  } catch (err) {
    failure = err;
  }
  const now = await streamInfo(jsm, resource).catch(() => undefined);
  if (now) return fits(now);
  throw new ReplicationResourceError('jetstream', `cannot create ${e.what}`, { cause: failure, resource, queueId });
}

/** The JetStream stream behind a resource: KV buckets and object stores are streams named KV_ and OBJ_. */
function streamOf(resource: Resource): string {
  if (resource.type === 'kv') return `KV_${resource.name}`;
  if (resource.type === 'object-store') return `OBJ_${resource.name}`;
  return resource.name;
}

/** The stream's info, or undefined if it does not exist. */
async function streamInfo(jsm: JetStreamManager, resource: Resource): Promise<StreamInfo | undefined> {
  try {
    return await jsm.streams.info(streamOf(resource));
  } catch (err) {
    if (apiErrorCode(err) === JetStreamApiCodes.StreamNotFound) return undefined;
    throw new ReplicationResourceError('jetstream', `cannot read ${resource.type} "${resource.name}"`, { cause: err, resource });
  }
}

/** The code of the JetStream API error in `err`'s cause chain, if any. */
function apiErrorCode(err: unknown): number | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof JetStreamApiError) return e.code;
  }
  return undefined;
}
