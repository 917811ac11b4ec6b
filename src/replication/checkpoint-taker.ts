// The checkpoints a replica takes while it leads its queue (replicated-history.ts): when the schedule says one is
// due (queue-checkpoints.ts, CheckpointSchedule: by size as entries are applied, by time from a timer), the state
// after one applied entry is captured and saved in the background, one checkpoint at a time.
import type { Logger } from 'pino';
import type { QueueApplier } from '../queue/queue-history.js';
import type { OutboxStore } from '../store/store.js';
import type { QueueCheckpoints } from './queue-checkpoints.js';
import type { Checkpoint } from './wire/checkpoint-codec.js';

/** What the taker reads of the history whose checkpoints it takes. */
export interface CheckpointSource {
  /** The log position of the last entry applied. */
  readonly appliedSeq: number;
  /** The term of the last claim applied. */
  readonly appliedTerm: number;
  readonly leading: boolean;
}

export class CheckpointTaker {
  /** A checkpoint being taken or saved: the next waits for it. */
  private saving: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private savedSeqValue: number | undefined;

  constructor(
    private readonly checkpoints: QueueCheckpoints,
    private readonly history: CheckpointSource,
    private readonly applier: QueueApplier,
    private readonly store: OutboxStore,
    private readonly queueId: string,
    private readonly log: Logger,
  ) {}

  /** The position of the last checkpoint this replica saved, if it saved one. */
  get savedSeq(): number | undefined {
    return this.savedSeqValue;
  }

  /** Starts the timer of the time interval; it also takes those due by size when no entry came after they were reached (a save was in flight). */
  start(): void {
    const { schedule } = this.checkpoints;
    this.timer = setInterval(
      () => {
        if (schedule.dueByTime || schedule.dueBySize) void this.take();
      },
      Math.min(1_000, Math.max(10, schedule.intervals.ms / 4)),
    );
    this.timer.unref();
  }

  /**
   * An entry of `bytes` holding `records` records is applied: when a checkpoint is due by size, answers its
   * taking, which the log's reader waits for before the next entry, so the checkpoint is of exactly this one.
   */
  applied(bytes: number, records: number): Promise<void> | undefined {
    const { schedule } = this.checkpoints;
    schedule.applied(bytes, records);
    if (schedule.dueBySize && this.history.leading && !this.saving) return this.take();
    return undefined;
  }

  /** Stops the timer at once; resolves when a checkpoint being taken or saved is done. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.saving;
  }

  /**
   * Takes a checkpoint and saves it in the background, if this replica leads the queue. It is of the state
   * after one entry: the local store applies a commit once its promise settles, so it is taken only after
   * the store's pending commits (those of entries up to the last applied) have settled, and it holds only if
   * no entry is applied until it is complete (the tickets' bytes are read in slices). From `applied` the reader
   * is held meanwhile, so the first try holds; from the timer an entry may come in between, and it tries
   * again (or leaves it to the next interval).
   */
  private async take(): Promise<void> {
    if (this.saving || !this.history.leading) return;
    let release!: () => void;
    this.saving = new Promise<void>((resolve) => (release = resolve));
    try {
      let captured: Checkpoint | undefined;
      for (let tries = 0; tries < 3 && !captured; tries++) {
        const at = this.history.appliedSeq;
        await this.store.whenDurable();
        if (this.history.appliedSeq !== at || !this.history.leading) continue;
        const checkpoint = await this.capture();
        if (this.history.appliedSeq === at && this.history.leading) captured = checkpoint;
      }
      if (!captured) return release();
      // Counting starts again from it (a failed save counts it back and retries after a while).
      this.checkpoints.schedule.taken();
      void this.save(captured).finally(release);
    } catch (err) {
      this.log.error({ queue: this.queueId, err }, 'checkpoint not taken');
      release();
    } finally {
      void this.saving.then(() => (this.saving = undefined));
    }
  }

  /** The queue at the last entry applied: the outbox at once, the state in slices (valid if no entry came meanwhile). */
  private async capture(): Promise<Checkpoint> {
    const { queueId, store, log } = this;
    const started = performance.now();
    const [appliedSeq, term, outbox] = [this.history.appliedSeq, this.history.appliedTerm, store.outboxSnapshot(queueId)];
    const state = await this.applier.snapshot();
    log.debug({ queue: queueId, seq: appliedSeq, ms: Math.round(performance.now() - started) }, 'checkpoint taken');
    return { queueId, appliedSeq, term, state, outbox };
  }

  private async save(checkpoint: Checkpoint): Promise<void> {
    const { queueId, log } = this;
    // Encoding is not held against the reader: the entry that triggered the checkpoint has been answered.
    await new Promise((resolve) => setImmediate(resolve));
    try {
      const saved = await this.checkpoints.save(checkpoint);
      this.savedSeqValue = checkpoint.appliedSeq;
      log.info(
        {
          queue: queueId,
          seq: checkpoint.appliedSeq,
          bytes: saved.bytes,
          storedBytes: saved.storedBytes,
          encodeMs: Math.round(saved.encodeMs),
          purged: saved.purged,
        },
        'checkpoint saved',
      );
    } catch (err) {
      log.warn({ queue: queueId, seq: checkpoint.appliedSeq, err }, 'checkpoint not saved; retrying in 10 s or more');
    }
  }
}
