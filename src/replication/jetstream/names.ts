// Names of the broker resources of the replicated mode, derived from a queue id. Pure functions: every
// replica computes the same names from the same settings. The kind of a subject comes before the queue id,
// so the subjects of queue `eu` (`<prefix>.*.eu`) never overlap those of `eu.ranked` (`<prefix>.*.eu.ranked`).
import { createHash } from 'node:crypto';
import { QUEUE_ID_PATTERN, STREAM_NAME_MAX_BYTES, STREAM_NAME_PATTERN } from '../../config/queue-config.js';

/** What a replication record is: a client request, a leader's claim of a term, or a leader's decision. */
export const REPLICATION_KINDS = ['req', 'term', 'lead'] as const;
export type ReplicationKind = (typeof REPLICATION_KINDS)[number];

/** Hex digits of sha256(queue_id) that end a stream name (8: 32 bits). */
const HASH_HEX = 8;

/** Whether nats-server accepts `name` as a stream name. */
export function isLegalStreamName(name: string): boolean {
  return STREAM_NAME_PATTERN.test(name) && Buffer.byteLength(name) <= STREAM_NAME_MAX_BYTES;
}

function assertQueueId(queueId: string): void {
  if (!QUEUE_ID_PATTERN.test(queueId)) throw new TypeError(`"${queueId}" is not a valid queue id`);
}

/**
 * The replication stream of a queue in create mode: `<prefix>_<queue id, . as _>_<8 hex of sha256(queue id)>`.
 * Stream names may not hold `.`; the hash keeps `a.b` and `a_b` apart, and keeps ids apart whose mapped
 * part had to be cut to fit the 255 bytes of a stream name.
 */
export function replicationStreamName(prefix: string, queueId: string): string {
  assertQueueId(queueId);
  const hash = createHash('sha256').update(queueId).digest('hex').slice(0, HASH_HEX);
  // The mapped id is ASCII ([A-Za-z0-9_-]), so characters are bytes.
  const room = STREAM_NAME_MAX_BYTES - Buffer.byteLength(prefix) - 2 - HASH_HEX;
  if (room < 1) throw new TypeError(`stream prefix "${prefix}" leaves no room for a queue id`);
  const name = `${prefix}_${queueId.replaceAll('.', '_').slice(0, room)}_${hash}`;
  if (!isLegalStreamName(name)) throw new TypeError(`stream prefix "${prefix}" makes an invalid stream name "${name}"`);
  return name;
}

/** The subject of a queue's records of one kind: `<prefix>.<kind>.<queue_id>`. */
export function replicationSubject(prefix: string, kind: ReplicationKind, queueId: string): string {
  assertQueueId(queueId);
  return `${prefix}.${kind}.${queueId}`;
}

/** Every subject of a queue's records: `<prefix>.*.<queue_id>`, what its stream must capture. */
export function replicationFilter(prefix: string, queueId: string): string {
  assertQueueId(queueId);
  return `${prefix}.*.${queueId}`;
}

/** The key of a queue's leader lease in the coordination bucket (KV keys allow `[-/_=.a-zA-Z0-9]`). */
export function leaderLeaseKey(queueId: string): string {
  assertQueueId(queueId);
  return `leader.${queueId}`;
}

/** A checkpoint's object name: `<queue_id>@<sequence>`, the sequence being the last record it includes. */
export function checkpointObjectName(queueId: string, sequence: bigint | number): string {
  assertQueueId(queueId);
  const seq = BigInt(sequence);
  if (seq < 0n) throw new TypeError(`checkpoint sequence ${seq} is negative`);
  return `${queueId}@${seq}`;
}

/** The queue and sequence of a checkpoint's object name, or undefined if it is not one. */
export function parseCheckpointObjectName(name: string): { queueId: string; sequence: bigint } | undefined {
  const at = name.lastIndexOf('@');
  if (at < 0) return undefined;
  const queueId = name.slice(0, at);
  const digits = name.slice(at + 1);
  // Canonical decimal only, so that one checkpoint has one name.
  if (!QUEUE_ID_PATTERN.test(queueId) || !/^(0|[1-9][0-9]*)$/.test(digits)) return undefined;
  return { queueId, sequence: BigInt(digits) };
}
