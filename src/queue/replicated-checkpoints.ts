// A replicated queue's checkpoints (checkpoint-codec.ts) in the object store (store/replicated/checkpoints.ts):
// the newest usable one to start from, and saving a new one with what follows it. After a save only the two
// newest are kept, and the log's entries below the older kept one's position + 1 are purged: a replica that
// finds the newest corrupt and restores the older one can still read on from there.
import type { ObjectStore } from '@nats-io/obj';
import type { Logger } from 'pino';
import { checkpointSequences, latestDecodedCheckpoint, pruneCheckpoints, saveCheckpoint } from '../store/replicated/checkpoints.js';
import type { ReplicationLog } from '../store/replicated/replication-log.js';
import { type Checkpoint, CheckpointDecodeError, decodeCheckpointInSlices, encodeCheckpointInSlices } from './checkpoint-codec.js';

/** How many checkpoints of a queue are kept. */
const KEEP = 2;

export class QueueCheckpoints {
  constructor(
    private readonly queueId: string,
    private readonly objects: ObjectStore,
    private readonly log: ReplicationLog,
    private readonly logger: Logger,
  ) {}

  /** The newest checkpoint that verifies and decodes (an older one when the newest does not), if any. */
  async latest(): Promise<Checkpoint | undefined> {
    const found = await latestDecodedCheckpoint(this.objects, this.queueId, this.logger, async (bytes, seq) => {
      // In slices: other queues, requests and probes are served while a large one decodes.
      const checkpoint = await decodeCheckpointInSlices(bytes, this.queueId);
      if (checkpoint.appliedSeq !== seq) throw new CheckpointDecodeError('applied_seq', `is ${checkpoint.appliedSeq}, not ${seq} as named`);
      return checkpoint;
    });
    return found?.decoded;
  }

  /**
   * Encodes and uploads a checkpoint, prunes to the two newest and purges the log below the older one's
   * position + 1. Answers the number of entries purged. Throws when any step fails; the caller retries at
   * its next interval (a save cut short leaves an object that does not verify, which readers skip).
   */
  async save(checkpoint: Checkpoint): Promise<{ bytes: number; purged: number; encodeMs: number }> {
    // In slices: the event loop (the log reader, requests, other queues) runs between them.
    const started = performance.now();
    const bytes = await encodeCheckpointInSlices(checkpoint);
    const encodeMs = performance.now() - started;
    await saveCheckpoint(this.objects, this.queueId, checkpoint.appliedSeq, bytes);
    await pruneCheckpoints(this.objects, this.queueId, KEEP);
    const kept = await checkpointSequences(this.objects, this.queueId);
    // With one checkpoint only, the log is kept whole: a replica that cannot read it starts from the log.
    const older = kept.length >= KEEP ? kept[KEEP - 1]! : undefined;
    const purged = older === undefined ? 0 : await this.log.purgeBefore(older + 1);
    return { bytes: bytes.length, purged, encodeMs };
  }
}
