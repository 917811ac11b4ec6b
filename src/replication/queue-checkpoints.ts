// A replicated queue's checkpoints (checkpoint-codec.ts) in the object store (replication/jetstream/checkpoint-objects.ts):
// the newest usable one to start from, saving a new one with what follows it, and when the next one is due
// (CheckpointSchedule). After a save only the two newest are kept, and the log's entries below the older kept
// one's position + 1 are purged: a replica that finds the newest corrupt and restores the older one can still
// read on from there.
import type { ObjectStore } from '@nats-io/obj';
import type { Logger } from 'pino';
import {
  type CheckpointCompression,
  checkpointSequences,
  latestDecodedCheckpoint,
  pruneCheckpoints,
  saveCheckpoint,
} from './jetstream/checkpoint-objects.js';
import type { ReplicationLog } from './jetstream/replication-log.js';
import { type Checkpoint, CheckpointDecodeError, encodeCheckpointInSlices } from './wire/checkpoint-codec.js';
import { decodeCheckpointInSlices } from './wire/checkpoint-decode.js';

/** How many checkpoints of a queue are kept. */
const KEEP = 2;

/**
 * When the leader takes its queue's next checkpoint: once the log entries applied since the last one
 * hold `records` records (an entry of records counts each, a claim one) or `bytes` bytes, or `ms` after it if
 * any entry came since; whichever comes first. These bound what a replica that restarts must replay after the
 * newest checkpoint, whatever the ingest rate.
 */
export interface CheckpointIntervals {
  records: number;
  bytes: number;
  ms: number;
}

/** CHECKPOINT_INTERVAL_RECORDS, CHECKPOINT_INTERVAL_BYTES, CHECKPOINT_INTERVAL_SECS (docs/replication.md, "Checkpoints"). */
export const DEFAULT_CHECKPOINT_INTERVALS: CheckpointIntervals = { records: 50_000, bytes: 16 * 2 ** 20, ms: 60_000 };

/**
 * A large pool's checkpoint costs in proportion to its size (the capture's pause of the leader, encoding,
 * compressing, upload), so the intervals stretch with it: by the factor max(1, size / (RATIO x bytes)), where
 * size is the last checkpoint's as stored (compressed, by default; taken or restored). Then the log replayed
 * after a checkpoint holds at most max(bytes, size / RATIO) bytes, and the leader stores at most RATIO bytes of
 * checkpoint per byte of log. With RATIO 1 a restart replays at most about as many bytes of log as it restores
 * of stored checkpoint, and the leader's event loop spends less per byte of log on checkpoints than it did with
 * RATIO 2 over uncompressed sizes before checkpoints were compressed (docs/replication.md, "A large pool").
 */
export const CHECKPOINT_SIZE_RATIO = 1;

/** After a failed save, the next try waits this long (times the scale), not the next entry. */
const RETRY_AFTER_FAILURE_MS = 10_000;

/**
 * Counts what the queue's log brought since the last checkpoint and says when the next is due. Counting runs on
 * every replica (a follower that becomes leader knows how far behind its last checkpoint is); only the
 * leader takes one. Counted from the start of the log, or from the checkpoint restored.
 */
export class CheckpointSchedule {
  private records = 0;
  private bytes = 0;
  private sinceMs: number;
  /** What was counted before the checkpoint being saved: added back if the save fails. */
  private pending: { records: number; bytes: number } | undefined;
  private retryAtMs = 0;
  /** The size of the last checkpoint taken or restored as stored, in bytes (0: none yet). */
  private lastSizeBytes = 0;

  constructor(
    readonly intervals: CheckpointIntervals,
    private readonly now: () => number = Date.now,
  ) {
    this.sinceMs = now();
  }

  /** An entry applied (or skipped: it is replayed all the same): its bytes, and its records (a claim: 1). */
  applied(bytes: number, records: number): void {
    this.records += Math.max(1, records);
    this.bytes += bytes;
  }

  /** How much the intervals stretch for the last checkpoint's size (1 up to RATIO x bytes). */
  get scale(): number {
    return Math.max(1, this.lastSizeBytes / (CHECKPOINT_SIZE_RATIO * this.intervals.bytes));
  }

  /** Records or bytes reached their interval. */
  get dueBySize(): boolean {
    if (this.now() < this.retryAtMs) return false;
    const scale = this.scale;
    return this.records >= this.intervals.records * scale || this.bytes >= this.intervals.bytes * scale;
  }

  /** The time interval passed and something came since. */
  get dueByTime(): boolean {
    if (this.records === 0 || this.now() < this.retryAtMs) return false;
    return this.now() - this.sinceMs >= this.intervals.ms * this.scale;
  }

  /** What the log brought since the last checkpoint taken or restored. */
  get since(): { records: number; bytes: number; ms: number } {
    return { records: this.records, bytes: this.bytes, ms: this.now() - this.sinceMs };
  }

  /** A checkpoint was captured after the last entry counted; counting starts again from it. */
  taken(): void {
    this.pending = { records: this.records, bytes: this.bytes };
    this.records = 0;
    this.bytes = 0;
    this.sinceMs = this.now();
  }

  /** The checkpoint taken last was stored: its size stretches the intervals. */
  saved(sizeBytes: number): void {
    this.pending = undefined;
    this.lastSizeBytes = sizeBytes;
  }

  /** The checkpoint taken last was not stored: the log since the one before counts again, and the next try waits. */
  failed(): void {
    if (this.pending) {
      this.records += this.pending.records;
      this.bytes += this.pending.bytes;
      this.pending = undefined;
    }
    this.retryAtMs = this.now() + RETRY_AFTER_FAILURE_MS * this.scale;
  }

  /** The replica starts from a checkpoint of this size: counting starts from it. */
  restored(sizeBytes: number): void {
    this.records = 0;
    this.bytes = 0;
    this.sinceMs = this.now();
    this.lastSizeBytes = sizeBytes;
  }
}

export class QueueCheckpoints {
  readonly schedule: CheckpointSchedule;

  constructor(
    private readonly queueId: string,
    private readonly objects: ObjectStore,
    private readonly replicationLog: ReplicationLog,
    private readonly log: Logger,
    intervals: CheckpointIntervals = DEFAULT_CHECKPOINT_INTERVALS,
    private readonly compression: CheckpointCompression = 'zstd',
  ) {
    this.schedule = new CheckpointSchedule(intervals);
  }

  /**
   * The newest checkpoint that verifies and decodes (an older one when the newest does not), if any. The
   * schedule counts from it: the caller restores it before it applies any entry.
   */
  async latest(): Promise<Checkpoint | undefined> {
    const found = await latestDecodedCheckpoint(this.objects, this.queueId, this.log, async (bytes, seq) => {
      // In slices: other queues, requests and probes are served while a large one decodes.
      const checkpoint = await decodeCheckpointInSlices(bytes, this.queueId);
      if (checkpoint.appliedSeq !== seq) throw new CheckpointDecodeError('applied_seq', `is ${checkpoint.appliedSeq}, not ${seq} as named`);
      return checkpoint;
    });
    if (found) this.schedule.restored(found.storedBytes);
    return found?.decoded;
  }

  /**
   * Encodes and uploads a checkpoint, prunes to the two newest and purges the log below the older one's
   * position + 1. Answers the number of entries purged. Throws when any step fails (a save cut short leaves
   * an object that does not verify, which readers skip). When the checkpoint was not stored, the schedule
   * counts the log since the previous one again and tries anew after a while; a failed prune or purge is done
   * by the next save.
   */
  async save(checkpoint: Checkpoint): Promise<{ bytes: number; storedBytes: number; purged: number; encodeMs: number }> {
    // In slices: the event loop (the log reader, requests, other queues) runs between them.
    const started = performance.now();
    let bytes: Uint8Array;
    let encodeMs: number;
    let storedBytes: number;
    try {
      bytes = await encodeCheckpointInSlices(checkpoint);
      encodeMs = performance.now() - started;
      storedBytes = (await saveCheckpoint(this.objects, this.queueId, checkpoint.appliedSeq, bytes, this.compression)).size;
    } catch (err) {
      this.schedule.failed();
      throw err;
    }
    this.schedule.saved(storedBytes);
    await pruneCheckpoints(this.objects, this.queueId, KEEP);
    const kept = await checkpointSequences(this.objects, this.queueId);
    // With one checkpoint only, the log is kept whole: a replica that cannot read it starts from the log.
    const older = kept.length >= KEEP ? kept[KEEP - 1]! : undefined;
    const purged = older === undefined ? 0 : await this.replicationLog.purgeBefore(older + 1);
    return { bytes: bytes.length, storedBytes, purged, encodeMs };
  }
}
