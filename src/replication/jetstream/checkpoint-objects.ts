// Checkpoints of a queue's state in the JetStream object store: one object per checkpoint, named
// `<queue_id>@<seq>` (names.ts), `seq` being the log position of the last entry it includes. The bytes are
// opaque here (the codec is src/replication/wire/checkpoint-codec.ts), stored as they are or as zstd frames
// (CheckpointCompression; src/replication/wire/checkpoint-frames.ts reads those back as they arrive). Each
// object's metadata carries its sequence, its encoding and raw length, and a sha256 of the stored bytes, taken
// by the leader before saving, checked on reading (against the digest the store verified the bytes with): a
// checkpoint that does not verify is skipped for the next older one, since a replica can always fall back
// further, down to the log's start.
import { createHash } from 'node:crypto';
import type { ObjectInfo, ObjectStore } from '@nats-io/obj';
import type { Logger } from 'pino';
import { compressCheckpoint } from '../../engine/native.js';
import { timeSliced } from '../../queue/time-slices.js';
import { CheckpointInflater } from '../wire/checkpoint-frames.js';
import { checkpointObjectName, parseCheckpointObjectName } from './names.js';

const SEQ_KEY = 'seq';
const SHA256_KEY = 'sha256';
/** `zstd` when the object is the checkpoint as zstd frames; absent when it is the checkpoint's bytes. */
const ENCODING_KEY = 'encoding';
/** With an encoding: the checkpoint's own length, which the frames must hold exactly. */
const RAW_BYTES_KEY = 'raw_bytes';

/**
 * How a leader stores its checkpoints (CHECKPOINT_COMPRESSION): `zstd` (about 2.8x smaller for realistic tickets,
 * so a third of the upload, of the object store's disk and of a restarting replica's download, which it
 * decompresses while the download goes on), or `none`, which replicas older than compressed checkpoints can read.
 * Readers take either.
 */
export type CheckpointCompression = 'zstd' | 'none';

/** Hashed a MiB at a time. */
const HASH_PIECE_BYTES = 1 << 20;

/**
 * A checkpoint's sha256 (hex) as the leader saves it, in time slices: it saves checkpoints while it serves,
 * and one hash of a 1M-ticket checkpoint (430 MB) held its event loop for ~0.6 s. (A replica reading one
 * checks the store's digest instead: readObject.)
 */
async function sha256InSlices(bytes: Uint8Array): Promise<string> {
  const hash = createHash('sha256');
  const pieces = Math.ceil(bytes.length / HASH_PIECE_BYTES);
  await timeSliced(pieces, (i) => {
    hash.update(bytes.subarray(i * HASH_PIECE_BYTES, (i + 1) * HASH_PIECE_BYTES));
  });
  return hash.digest('hex');
}

/** The object store's own digest of an object (`SHA-256=` and the digest in base64url, or in hex), in hex. */
function storeDigestHex(info: ObjectInfo): string | undefined {
  const prefix = 'SHA-256=';
  if (!info.digest.startsWith(prefix)) return undefined;
  const digest = info.digest.slice(prefix.length);
  const bytes = /^[0-9a-fA-F]{64}$/.test(digest) ? Buffer.from(digest, 'hex') : Buffer.from(digest, 'base64url');
  return bytes.length === 32 ? bytes.toString('hex') : undefined;
}

/**
 * An object's bytes, read into one buffer of the object's size as its chunks arrive (the object store's
 * getBlob keeps every chunk and joins them at the end: for a 1M-ticket checkpoint, 430 MB held twice), and
 * the sha256 they were verified against; `arrived` is told of each chunk once it is in. The store hashes what
 * it reads and refuses bytes that do not match its own digest of the object; that digest is answered in hex,
 * so a caller comparing it with the sha256 its metadata names has checked the bytes against that one too,
 * without hashing them again (half a second for a 1M-ticket checkpoint).
 */
async function readObject(
  os: ObjectStore,
  name: string,
  arrived?: (bytes: Uint8Array, filled: number) => void,
): Promise<{ bytes: Uint8Array; sha256: string | undefined } | null> {
  const result = await os.get(name);
  if (result === null) return null;
  // The store checks the object's own digest as it reads. Its error settles when the read ends, and is
  // observed from here on, so that a read given up below leaves no rejection unhandled.
  const ended = result.error.catch((err: unknown) => err ?? new Error(`object ${name} could not be read`));
  const bytes = new Uint8Array(result.info.size);
  const reader = result.data.getReader();
  let at = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (at + value.length > bytes.length) {
      await reader.cancel();
      throw new Error(`object ${name} holds more than the ${bytes.length} bytes its info names`);
    }
    bytes.set(value, at);
    at += value.length;
    arrived?.(bytes, at);
  }
  const failed = await ended;
  if (failed) throw failed;
  if (at !== bytes.length) throw new Error(`object ${name} holds ${at} of the ${bytes.length} bytes its info names`);
  return { bytes, sha256: storeDigestHex(result.info) };
}

/**
 * Saves a checkpoint taken at log position `seq`, compressed as asked (off the event loop); answers its object's
 * info (whose size is the stored bytes').
 */
export async function saveCheckpoint(
  os: ObjectStore,
  queueId: string,
  seq: number,
  bytes: Uint8Array,
  compression: CheckpointCompression,
): Promise<ObjectInfo> {
  const name = checkpointObjectName(queueId, seq);
  const [stored, encoding]: [Uint8Array, Record<string, string>] =
    compression === 'zstd'
      ? [await compressCheckpoint(bytes), { [ENCODING_KEY]: 'zstd', [RAW_BYTES_KEY]: String(bytes.length) }]
      : [bytes, {}];
  return os.putBlob({ name, metadata: { [SEQ_KEY]: String(seq), ...encoding, [SHA256_KEY]: await sha256InSlices(stored) } }, stored);
}

/** What reads a checkpoint's bytes back from the object's, by the encoding its metadata names (none: as they are). */
function inflaterFor(metadata: Record<string, string> | undefined): CheckpointInflater | undefined {
  const encoding = metadata?.[ENCODING_KEY];
  if (encoding === undefined) return undefined;
  if (encoding !== 'zstd') throw new Error(`its encoding "${encoding}" is not one this replica reads`);
  const rawBytes = Number(metadata?.[RAW_BYTES_KEY]);
  if (!Number.isSafeInteger(rawBytes) || rawBytes < 0)
    throw new Error(`its ${RAW_BYTES_KEY} "${metadata?.[RAW_BYTES_KEY]}" is not a length`);
  return new CheckpointInflater(rawBytes);
}

/** The queue's stored checkpoints, newest (highest sequence) first. */
async function checkpointsOf(os: ObjectStore, queueId: string): Promise<{ info: ObjectInfo; seq: number }[]> {
  const found: { info: ObjectInfo; seq: number }[] = [];
  for (const info of await os.list()) {
    if (info.deleted) continue;
    const parsed = parseCheckpointObjectName(info.name);
    // `eu` and `eu@x` are different queues only by name: compare the whole queue id.
    if (parsed?.queueId !== queueId || parsed.sequence > BigInt(Number.MAX_SAFE_INTEGER)) continue;
    found.push({ info, seq: Number(parsed.sequence) });
  }
  return found.sort((a, b) => b.seq - a.seq);
}

/** The positions of the queue's stored checkpoints, newest first. */
export async function checkpointSequences(os: ObjectStore, queueId: string): Promise<number[]> {
  return (await checkpointsOf(os, queueId)).map((c) => c.seq);
}

/**
 * The newest checkpoint of the queue whose bytes verify (sequence and sha256 as its metadata says), or
 * undefined when there is none. One that does not verify or cannot be read is skipped with a log line.
 */
export async function latestCheckpoint(
  os: ObjectStore,
  queueId: string,
  log: Logger,
): Promise<{ seq: number; bytes: Uint8Array } | undefined> {
  return latestDecodedCheckpoint(os, queueId, log, (bytes) => bytes).then((found) => found && { seq: found.seq, bytes: found.bytes });
}

/** latestCheckpoint, also skipping one that `decode` refuses (throws for); answers what it decoded, and its stored size. */
export async function latestDecodedCheckpoint<T>(
  os: ObjectStore,
  queueId: string,
  log: Logger,
  decode: (bytes: Uint8Array, seq: number) => T | Promise<T>,
): Promise<{ seq: number; bytes: Uint8Array; storedBytes: number; decoded: T } | undefined> {
  for (const { info, seq } of await checkpointsOf(os, queueId)) {
    const skip = (problem: string, err?: unknown) =>
      log.warn({ queue: queueId, object: info.name, seq, err }, `checkpoint skipped: ${problem}; trying the next older one`);
    if (info.metadata?.[SEQ_KEY] !== String(seq)) {
      skip(`its metadata names sequence ${info.metadata?.[SEQ_KEY] ?? '(none)'}`);
      continue;
    }
    let inflater: CheckpointInflater | undefined;
    try {
      inflater = inflaterFor(info.metadata);
    } catch (err) {
      skip('it cannot be decompressed', err);
      continue;
    }
    let read: Awaited<ReturnType<typeof readObject>>;
    try {
      read = await readObject(os, info.name, inflater && ((bytes, filled) => inflater.arrived(bytes, filled)));
    } catch (err) {
      skip('it could not be read', err);
      continue;
    }
    if (read === null) {
      skip('it is gone');
      continue;
    }
    if (read.sha256 === undefined || read.sha256 !== info.metadata?.[SHA256_KEY]) {
      skip('its bytes do not match their sha256');
      continue;
    }
    let bytes: Uint8Array;
    try {
      bytes = inflater ? await inflater.finished(read.bytes.length) : read.bytes;
    } catch (err) {
      skip('it cannot be decompressed', err);
      continue;
    }
    try {
      return { seq, bytes, storedBytes: read.bytes.length, decoded: await decode(bytes, seq) };
    } catch (err) {
      skip('it cannot be decoded', err);
    }
  }
  return undefined;
}

/** Deletes all but the `keep` newest checkpoints of the queue; answers the sequences deleted. */
export async function pruneCheckpoints(os: ObjectStore, queueId: string, keep = 2): Promise<number[]> {
  const old = (await checkpointsOf(os, queueId)).slice(Math.max(0, keep));
  for (const { info } of old) await os.delete(info.name);
  return old.map((c) => c.seq);
}
