// The set of queue runtimes, kept in step with the queue directory: a new file starts a queue, a valid
// change is applied in place, a deleted file retires the queue.
import type { Logger } from 'pino';
import type { DirectoryScan, QueueFile } from '../config/queue-files.js';
import type { Store } from '../store/store.js';
import type { HistoryFactory } from './queue-history.js';
import { QueueRuntime } from './queue-runtime.js';
import { noTelemetry, type QueueTelemetry } from './queue-telemetry.js';

/** What a queue runs on: the store it reads (and, embedded, commits to) and where its records go. */
export interface QueueBacking {
  store: Store;
  /** Absent: the embedded history on `store`. */
  history?: HistoryFactory;
}

/** Makes the backing of a queue each time its runtime starts. */
export type QueueBackingFactory = (queueId: string, file: QueueFile) => QueueBacking;

export class QueueRegistry {
  private readonly runtimes = new Map<string, QueueRuntime>();
  private files = new Map<string, QueueFile>();
  /** Last error reported per file, so an unchanged bad file is not reported again on every rescan. */
  private reportedErrors = new Map<string, string>();

  private readonly backing: QueueBackingFactory;
  private readonly telemetry: QueueTelemetry;

  /** `store`: the embedded store, which every queue shares unless `backing` gives a queue its own. */
  constructor(
    private readonly store: Store,
    private readonly log: Logger,
    options: { backing?: QueueBackingFactory; telemetry?: QueueTelemetry } = {},
  ) {
    this.backing = options.backing ?? (() => ({ store }));
    this.telemetry = options.telemetry ?? noTelemetry;
  }

  get(queueId: string): QueueRuntime | undefined {
    return this.runtimes.get(queueId);
  }

  all(): QueueRuntime[] {
    return [...this.runtimes.values()];
  }

  /** The queue files in force: the previous scan's result, used to keep a bad file's last good version. */
  get current(): ReadonlyMap<string, QueueFile> {
    return this.files;
  }

  applyScan(scan: DirectoryScan): void {
    const errors = new Map(scan.errors.map((e) => [e.file, e.message]));
    for (const [file, message] of errors) {
      if (this.reportedErrors.get(file) !== message) this.log.error({ file }, `queue file refused, last good version kept: ${message}`);
    }
    this.reportedErrors = errors;

    for (const [queueId, file] of scan.queues) {
      const runtime = this.runtimes.get(queueId);
      if (!runtime || runtime.lifecycle === 'retired' || runtime.lifecycle === 'retiring') {
        if (runtime?.lifecycle === 'retiring') continue; // re-added while its pool is being removed: next scan starts it
        // A retired replicated queue may still hold its lease (to deliver its last outcomes): let it go.
        if (runtime) void runtime.stop();
        let backing: QueueBacking;
        try {
          backing = this.backing(queueId, file);
        } catch (err) {
          // A file that cannot run here (bind mode without its stream's name): the other queues still start.
          this.log.error({ queue: queueId, file: file.file, err }, 'queue not started');
          continue;
        }
        const fresh = new QueueRuntime(queueId, file.config, backing.store, this.log, backing.history, this.telemetry);
        this.runtimes.set(queueId, fresh);
        fresh.start();
      } else if (JSON.stringify(runtime.config) !== JSON.stringify(file.config)) {
        runtime.reconfigure(file.config);
        this.log.info({ queue: queueId, file: file.file }, 'queue config reloaded');
      }
    }
    for (const [queueId, runtime] of this.runtimes) {
      if (!scan.queues.has(queueId) && (runtime.lifecycle === 'running' || runtime.lifecycle === 'starting')) {
        this.log.warn({ queue: queueId }, 'queue file removed: retiring the queue');
        void runtime.retire();
      }
    }
    this.files = scan.queues;
  }

  /** Queues with stored tickets but no queue file. Their data is kept until the file returns. */
  dormantQueueIds(): string[] {
    return this.store.storedQueueIds().filter((id) => !this.runtimes.has(id));
  }

  /** Stops every queue's ticking; resolves once ticks in progress have committed. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.runtimes.values()].map((runtime) => runtime.stop()));
  }
}
