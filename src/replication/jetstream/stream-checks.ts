// What makes a stream fit to hold a queue's replication log, checked on its configuration alone (no server):
// it must capture the queue's subjects and no other queue's, and keep every record until the service
// purges it (limits retention without age, size or count limits, file storage, not sealed). Used for a
// bound stream (bind mode) and for an existing stream in create mode, which also must have the replicas
// the settings ask for.
import { RetentionPolicy, StorageType, type StreamConfig } from '@nats-io/jetstream';
import { millis } from '@nats-io/transport-node';
import type { ReplicationErrorKind } from './errors.js';
import { subjectCovers, subjectsOverlap } from '../../nats/subjects.js';

export interface StreamProblem {
  kind: Extract<ReplicationErrorKind, 'subjects' | 'limits' | 'retention' | 'mismatch'>;
  /** What is wrong, as a phrase: `its subjects ["a.>"] do not cover "p.*.q"`. */
  detail: string;
}

export interface LogStreamExpectation {
  /** The queue's subject filter, `<prefix>.*.<queue_id>`. */
  filter: string;
  /** The subjects the queue's records are published on (one per kind): each must be captured. A stream may
   *  capture them with the filter or list them one by one. */
  subjects: readonly string[];
  /** The filters of the other configured queues, which the stream must not capture. */
  others: readonly { queueId: string; filter: string }[];
  /** Replicas the stream must have (create mode); undefined: any (bind mode, the operator's choice). */
  replicas?: number;
}

/** Every problem of `config` as a queue's replication log, most fundamental first; empty if it fits. */
export function logStreamProblems(config: Partial<StreamConfig>, want: LogStreamExpectation): StreamProblem[] {
  const problems: StreamProblem[] = [];
  const subjects = config.subjects ?? [];
  const uncovered = want.subjects.filter((wanted) => !subjects.some((s) => subjectCovers(s, wanted)));
  if (uncovered.length > 0) {
    problems.push({
      kind: 'subjects',
      detail: `its subjects ${JSON.stringify(subjects)} do not cover ${uncovered.map((s) => `"${s}"`).join(', ')} (capture "${want.filter}")`,
    });
  }
  for (const other of want.others) {
    const capturing = subjects.find((s) => subjectsOverlap(s, other.filter));
    if (capturing !== undefined) {
      problems.push({
        kind: 'subjects',
        detail: `its subject "${capturing}" also captures queue "${other.queueId}" ("${other.filter}")`,
      });
    }
  }
  if (config.retention !== undefined && config.retention !== RetentionPolicy.Limits) {
    problems.push({
      kind: 'retention',
      detail: `its retention is "${config.retention}", which removes records once consumed; it must be "limits"`,
    });
  }
  const limits: string[] = [];
  if ((config.max_age ?? 0) > 0) limits.push(`max_age ${millis(config.max_age!)} ms`);
  if ((config.max_bytes ?? -1) > 0) limits.push(`max_bytes ${config.max_bytes}`);
  if ((config.max_msgs ?? -1) > 0) limits.push(`max_msgs ${config.max_msgs}`);
  if ((config.max_msgs_per_subject ?? -1) > 0) limits.push(`max_msgs_per_subject ${config.max_msgs_per_subject}`);
  if (limits.length > 0) {
    problems.push({ kind: 'limits', detail: `it has ${limits.join(', ')}, which would drop log records; remove the limits` });
  }
  if (config.sealed) problems.push({ kind: 'limits', detail: 'it is sealed, so it accepts no records' });
  if (config.storage === StorageType.Memory) {
    problems.push({ kind: 'mismatch', detail: 'it has memory storage, which a restart of the cluster empties; it must be "file"' });
  }
  if (want.replicas !== undefined && (config.num_replicas ?? 1) !== want.replicas) {
    problems.push({
      kind: 'mismatch',
      detail: `it has ${config.num_replicas ?? 1} replicas, BROKER_STREAM_REPLICAS asks for ${want.replicas}`,
    });
  }
  return problems;
}
