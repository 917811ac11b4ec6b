// The replicated mode's groundwork that needs no server: its settings, the queue file's replication key, the
// resource names derived from queue ids (legal, distinct, non-overlapping for every valid id), the subject
// comparisons, the checks a replication stream's configuration must pass, and bind mode's queue bindings.
import { StorageType, RetentionPolicy } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { QUEUE_ID_PATTERN, queueFileSchema } from '../../src/config/queue-config.js';
import { loadServiceConfig } from '../../src/config/service-config.js';
import { brokerTarget } from '../../src/nats/auth.js';
import { ReplicationResourceError } from '../../src/replication/jetstream/errors.js';
import {
  checkpointObjectName,
  isLegalStreamName,
  leaderLeaseKey,
  parseCheckpointObjectName,
  REPLICATION_KINDS,
  type ReplicationKind,
  replicationFilter,
  replicationStreamName,
  replicationSubject,
} from '../../src/replication/jetstream/names.js';
import { planQueueLogs, replicationSettings, type ReplicatedQueue } from '../../src/replication/jetstream/resources.js';
import { logStreamProblems } from '../../src/replication/jetstream/stream-checks.js';
import { subjectCovers, subjectsOverlap } from '../../src/nats/subjects.js';

/**
 * A replication subject read back into its kind and queue (undefined if it is not one under `prefix`): the
 * service never parses its subjects, but that one can be is what shows a subject names one queue only.
 */
function parseReplicationSubject(prefix: string, subject: string): { kind: ReplicationKind; queueId: string } | undefined {
  if (!subject.startsWith(`${prefix}.`)) return undefined;
  const rest = subject.slice(prefix.length + 1);
  const dot = rest.indexOf('.');
  if (dot < 0) return undefined;
  const kind = rest.slice(0, dot) as ReplicationKind;
  const queueId = rest.slice(dot + 1);
  if (!REPLICATION_KINDS.includes(kind) || !QUEUE_ID_PATTERN.test(queueId)) return undefined;
  return { kind, queueId };
}

const PREFIX = 'svc.match.replication';
const STREAM_PREFIX = 'SVC_MATCH_REPLICATION';

/** Valid queue ids, biased towards short tokens so that pairs share prefixes and differ by `.` vs `_`. */
const token = fc.stringMatching(/^[A-Za-z0-9_-]{1,6}$/);
const queueIdArb = fc.oneof(
  fc.array(token, { minLength: 1, maxLength: 5 }).map((t) => t.join('.')),
  fc.stringMatching(QUEUE_ID_PATTERN),
);
/** A pair of ids that map to the same stream name part: the same tokens joined with `.` and with `_`. */
const twinArb = fc.array(token, { minLength: 2, maxLength: 4 }).map((t) => [t.join('.'), t.join('_')] as const);

describe('settings of the replicated mode', () => {
  it('default to the embedded backend and the spec names', () => {
    const c = loadServiceConfig({}, {});
    expect(c).toMatchObject({
      pool_replication_backend: 'embedded',
      broker_stream_replicas: 1,
      broker_subject_prefix_replication: 'svc.match.replication',
      broker_stream_replication_prefix: 'SVC_MATCH_REPLICATION',
      broker_kv_coordination: 'SVC_MATCH_COORDINATION',
      broker_object_store_checkpoints: 'SVC_MATCH_CHECKPOINTS',
      leader_lease_ms: 6000,
      checkpoint_interval_records: 50_000,
      checkpoint_interval_bytes: 16 * 1024 * 1024,
      checkpoint_interval_secs: 60,
    });
  });

  it('are read from the environment', () => {
    const c = loadServiceConfig(
      {},
      { POOL_REPLICATION_BACKEND: 'broker', BROKER_STREAM_REPLICAS: '3', LEADER_LEASE_MS: '2000', CHECKPOINT_INTERVAL_SECS: '60' },
    );
    expect(c).toMatchObject({
      pool_replication_backend: 'broker',
      broker_stream_replicas: 3,
      leader_lease_ms: 2000,
      checkpoint_interval_secs: 60,
    });
  });

  it.each([
    ['POOL_REPLICATION_BACKEND', 'jetstream', 'pool_replication_backend'],
    ['BROKER_STREAM_REPLICAS', '0', 'broker_stream_replicas'],
    ['BROKER_STREAM_REPLICAS', '7', 'broker_stream_replicas'],
    ['LEADER_LEASE_MS', '999', 'leader_lease_ms'],
    ['CHECKPOINT_INTERVAL_RECORDS', '0', 'checkpoint_interval_records'],
    ['CHECKPOINT_INTERVAL_BYTES', '1023', 'checkpoint_interval_bytes'],
    ['CHECKPOINT_INTERVAL_SECS', '0', 'checkpoint_interval_secs'],
    ['BROKER_STREAM_REPLICATION_PREFIX', 'SVC.MATCH', 'broker_stream_replication_prefix'],
    ['BROKER_SUBJECT_PREFIX_REPLICATION', 'svc.*.repl', 'broker_subject_prefix_replication'],
    ['BROKER_SUBJECT_PREFIX_REPLICATION', 'svc..repl', 'broker_subject_prefix_replication'],
    ['BROKER_KV_COORDINATION', 'COORD.X', 'broker_kv_coordination'],
    ['BROKER_OBJECT_STORE_CHECKPOINTS', 'has space', 'broker_object_store_checkpoints'],
    ['BROKER_URL', ' , ', 'broker_url'],
  ])('refuse %s=%j, naming the setting', (env, value, key) => {
    expect(() => loadServiceConfig({}, { [env]: value })).toThrow(`invalid setting ${key} (env ${env})`);
  });

  it('BROKER_URL takes a comma-separated list of cluster servers, spaces and empty entries ignored', () => {
    const config = loadServiceConfig({}, { BROKER_URL: 'nats://n1:4222, nats://n2:4222 ,,nats://n3:4222,' });
    expect(brokerTarget(config).servers).toEqual(['nats://n1:4222', 'nats://n2:4222', 'nats://n3:4222']);
  });
});

describe('queue file key replication.binding.stream_name', () => {
  const file = (replication: unknown) => ({ config: { rulesets: [{ id: 'r', teams: 2, team_size: 1 }], replication } });

  it('is optional and defaults to no binding', () => {
    const parsed = queueFileSchema.parse({ config: { rulesets: [{ id: 'r', teams: 2, team_size: 1 }] } });
    expect(parsed.config.replication).toEqual({ binding: {} });
    expect(queueFileSchema.parse(file({ binding: { stream_name: 'ORDERS-eu_1' } })).config.replication.binding.stream_name).toBe(
      'ORDERS-eu_1',
    );
  });

  it.each(['a.b', 'a b', 'a*', 'a>', 'a/b', 'a\\b', '', 'x'.repeat(256)])('refuses the stream name %j', (name) => {
    expect(queueFileSchema.safeParse(file({ binding: { stream_name: name } })).success).toBe(false);
  });

  it('is strict like the rest of the file', () => {
    expect(queueFileSchema.safeParse(file({ binding: { stream: 'X' } })).success).toBe(false);
    expect(queueFileSchema.safeParse(file({ bindings: {} })).success).toBe(false);
  });
});

describe('resource names', () => {
  it('follow the documented shapes', () => {
    expect(replicationStreamName(STREAM_PREFIX, 'eu.ranked')).toMatch(/^SVC_MATCH_REPLICATION_eu_ranked_[0-9a-f]{8}$/);
    expect(replicationSubject(PREFIX, 'req', 'eu.ranked')).toBe('svc.match.replication.req.eu.ranked');
    expect(replicationFilter(PREFIX, 'eu.ranked')).toBe('svc.match.replication.*.eu.ranked');
    expect(leaderLeaseKey('eu.ranked')).toBe('leader.eu.ranked');
    expect(checkpointObjectName('eu.ranked', 42n)).toBe('eu.ranked@42');
    expect(checkpointObjectName('eu', 7)).toBe('eu@7');
  });

  it('keep a.b and a_b apart', () => {
    expect(replicationStreamName(STREAM_PREFIX, 'a.b')).not.toBe(replicationStreamName(STREAM_PREFIX, 'a_b'));
  });

  it('cut a very long queue id to fit 255 bytes and still tell ids apart', () => {
    const long = `${'x'.repeat(300)}`;
    const a = replicationStreamName(STREAM_PREFIX, `${long}.a`);
    const b = replicationStreamName(STREAM_PREFIX, `${long}.b`);
    expect(a.length).toBe(255);
    expect(isLegalStreamName(a)).toBe(true);
    expect(a).not.toBe(b);
  });

  it('refuse what is not a queue id', () => {
    for (const bad of ['', 'a..b', '.a', 'a.', 'a b', 'a*', 'a>']) {
      expect(() => replicationStreamName(STREAM_PREFIX, bad)).toThrow(TypeError);
      expect(() => replicationSubject(PREFIX, 'req', bad)).toThrow(TypeError);
      expect(() => leaderLeaseKey(bad)).toThrow(TypeError);
    }
  });

  it('parse back what they make, and nothing else', () => {
    expect(parseCheckpointObjectName('eu.ranked@42')).toEqual({ queueId: 'eu.ranked', sequence: 42n });
    for (const bad of ['eu', 'eu@', '@4', 'eu@04', 'eu@-1', 'eu@1.5', 'e u@1', 'eu@1@2'])
      expect(parseCheckpointObjectName(bad), bad).toBeUndefined();
    expect(parseReplicationSubject(PREFIX, 'svc.match.replication.lead.eu.ranked')).toEqual({ kind: 'lead', queueId: 'eu.ranked' });
    for (const bad of [
      'svc.match.replication.req',
      'svc.match.replication.nope.eu',
      'svc.match.outcomes.req.eu',
      'svc.match.replication.req.',
    ])
      expect(parseReplicationSubject(PREFIX, bad), bad).toBeUndefined();
  });

  it('are legal for every queue id, and round-trip', () => {
    fc.assert(
      fc.property(queueIdArb, fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), (id, seq) => {
        const stream = replicationStreamName(STREAM_PREFIX, id);
        expect(isLegalStreamName(stream)).toBe(true);
        expect(Buffer.byteLength(stream)).toBeLessThanOrEqual(255);
        // KV keys: [-/_=.a-zA-Z0-9], not starting or ending with a dot.
        expect(leaderLeaseKey(id)).toMatch(/^[-/_=.a-zA-Z0-9]+$/);
        expect(leaderLeaseKey(id)).not.toMatch(/(^\.|\.$|\.\.)/);
        expect(parseCheckpointObjectName(checkpointObjectName(id, seq))).toEqual({ queueId: id, sequence: seq });
        for (const kind of REPLICATION_KINDS) {
          const subject = replicationSubject(PREFIX, kind, id);
          expect(subjectCovers(replicationFilter(PREFIX, id), subject)).toBe(true);
          expect(parseReplicationSubject(PREFIX, subject)).toEqual({ kind, queueId: id });
        }
      }),
    );
  });

  it('give distinct queue ids distinct streams and non-overlapping subjects', () => {
    const distinct = (a: string, b: string) => {
      expect(replicationStreamName(STREAM_PREFIX, a)).not.toBe(replicationStreamName(STREAM_PREFIX, b));
      expect(subjectsOverlap(replicationFilter(PREFIX, a), replicationFilter(PREFIX, b))).toBe(false);
      expect(leaderLeaseKey(a)).not.toBe(leaderLeaseKey(b));
    };
    fc.assert(
      fc.property(queueIdArb, queueIdArb, (a, b) => {
        fc.pre(a !== b);
        distinct(a, b);
      }),
    );
    fc.assert(fc.property(twinArb, ([a, b]) => distinct(a, b)));
    // A namespace and a queue inside it.
    fc.assert(fc.property(queueIdArb, token, (a, t) => distinct(a, `${a}.${t}`)));
  });
});

describe('subject patterns', () => {
  it.each([
    ['a.>', 'a.b.c', true],
    ['a.*.c', 'a.b.c', true],
    ['a.*.c', 'a.*.c', true],
    ['a.*', 'a.>', false],
    ['a.b', 'a.*', false],
    ['a.>', 'a', false],
  ])('%s covers %s: %s', (filter, subject, covers) => {
    expect(subjectCovers(filter, subject)).toBe(covers);
  });

  it.each([
    ['a.*.eu', 'a.*.eu.ranked', false],
    ['a.*.eu.>', 'a.*.eu.ranked', true],
    ['a.>', 'a.*.x', true],
    ['a.req.x', 'a.*.x', true],
    ['a.req.x', 'a.term.x', false],
    ['a.*', 'a.*.b', false],
    ['>', 'a', true],
  ])('%s and %s overlap: %s', (x, y, overlap) => {
    expect(subjectsOverlap(x, y)).toBe(overlap);
    expect(subjectsOverlap(y, x)).toBe(overlap);
  });

  it('overlap agrees with a brute-force match over small subjects', () => {
    const pattern = fc
      .tuple(fc.array(fc.constantFrom('a', 'b', '*'), { minLength: 0, maxLength: 3 }), fc.boolean())
      .filter(([t, tail]) => t.length > 0 || tail)
      .map(([t, tail]) => [...t, ...(tail ? ['>'] : [])].join('.'));
    // Every subject of up to 5 tokens over a, b and c (c: a token no literal of the patterns names).
    const all: string[] = [];
    const grow = (prefix: string[]) => {
      if (prefix.length > 0) all.push(prefix.join('.'));
      if (prefix.length < 5) for (const t of ['a', 'b', 'c']) grow([...prefix, t]);
    };
    grow([]);
    fc.assert(
      fc.property(pattern, pattern, (x, y) => {
        const both = all.some((s) => subjectCovers(x, s) && subjectCovers(y, s));
        expect(subjectsOverlap(x, y)).toBe(both);
      }),
    );
  });
});

describe('a replication stream fits when', () => {
  const fitting = {
    subjects: ['p.*.eu'],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: 0,
    max_bytes: -1,
    max_msgs: -1,
    max_msgs_per_subject: -1,
    num_replicas: 3,
  };
  const want = {
    filter: 'p.*.eu',
    subjects: ['p.req.eu', 'p.term.eu', 'p.lead.eu'],
    others: [{ queueId: 'eu.ranked', filter: 'p.*.eu.ranked' }],
    replicas: 3,
  };
  const kinds = (config: object, w: typeof want | Omit<typeof want, 'replicas'> = want) =>
    logStreamProblems({ ...fitting, ...config }, w).map((p) => p.kind);

  it('it captures the queue, keeps every record and has the replicas asked for', () => {
    expect(kinds({})).toEqual([]);
    expect(kinds({ subjects: ['p.>'] }, { ...want, others: [] })).toEqual([]);
    expect(kinds({ subjects: ['p.req.eu', 'p.term.eu', 'p.lead.eu'] })).toEqual([]);
    expect(kinds({ num_replicas: 1 }, { filter: want.filter, subjects: want.subjects, others: want.others })).toEqual([]);
  });

  it.each([
    [{ subjects: ['p.req.eu'] }, 'subjects', 'do not cover "p.term.eu", "p.lead.eu" (capture "p.*.eu")'],
    [{ subjects: ['p.>'] }, 'subjects', 'also captures queue "eu.ranked"'],
    [{ retention: RetentionPolicy.Workqueue }, 'retention', 'workqueue'],
    [{ max_age: nanos(60_000) }, 'limits', 'max_age 60000 ms'],
    [{ max_bytes: 1 << 30 }, 'limits', 'max_bytes'],
    [{ max_msgs: 1000 }, 'limits', 'max_msgs 1000'],
    [{ max_msgs_per_subject: 1 }, 'limits', 'max_msgs_per_subject 1'],
    [{ sealed: true }, 'limits', 'sealed'],
    [{ storage: StorageType.Memory }, 'mismatch', 'memory storage'],
    [{ num_replicas: 1 }, 'mismatch', 'BROKER_STREAM_REPLICAS asks for 3'],
  ])('not with %j', (config, kind, detail) => {
    const problems = logStreamProblems({ ...fitting, ...config }, want);
    expect(problems[0]).toMatchObject({ kind });
    expect(problems.map((p) => p.detail).join('; ')).toContain(detail);
  });
});

describe('bind mode queue bindings', () => {
  const settings = { ...replicationSettings(loadServiceConfig({}, { BROKER_RESOURCE_MODE: 'bind' })) };
  const queue = (queueId: string, stream_name?: string): ReplicatedQueue => ({
    queueId,
    config: { replication: { binding: stream_name === undefined ? {} : { stream_name } } },
  });
  const error = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return err as ReplicationResourceError;
    }
    throw new Error('expected an error');
  };

  it('use the named streams', () => {
    const plans = planQueueLogs(settings, [queue('eu.ranked', 'LOG_EU'), queue('na', 'LOG_NA')]);
    expect(plans.map((p) => [p.queueId, p.stream, p.filter])).toEqual([
      ['eu.ranked', 'LOG_EU', 'svc.match.replication.*.eu.ranked'],
      ['na', 'LOG_NA', 'svc.match.replication.*.na'],
    ]);
    expect(plans[0]!.subjects).toEqual({
      req: 'svc.match.replication.req.eu.ranked',
      term: 'svc.match.replication.term.eu.ranked',
      lead: 'svc.match.replication.lead.eu.ranked',
    });
  });

  it('require each queue to name its stream', () => {
    const err = error(() => planQueueLogs(settings, [queue('eu', 'LOG_EU'), queue('na.casual')]));
    expect(err).toBeInstanceOf(ReplicationResourceError);
    expect(err).toMatchObject({ kind: 'binding', queueId: 'na.casual' });
    expect(err.message).toContain('queue "na.casual" has no replication.binding.stream_name');
  });

  it('refuse one stream for two queues', () => {
    const err = error(() => planQueueLogs(settings, [queue('eu', 'LOG'), queue('na', 'LOG')]));
    expect(err).toMatchObject({ kind: 'binding', resource: { type: 'stream', name: 'LOG' } });
    expect(err.message).toContain('queues "eu" and "na" both use replication stream "LOG"');
  });

  it('are ignored in create mode, where the service names the streams', () => {
    const create = { ...settings, mode: 'create' as const };
    const plans = planQueueLogs(create, [queue('eu', 'LOG'), queue('na')]);
    expect(plans.map((p) => p.stream)).toEqual([replicationStreamName(STREAM_PREFIX, 'eu'), replicationStreamName(STREAM_PREFIX, 'na')]);
  });
});
