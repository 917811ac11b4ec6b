// Request records go to a queue's replication log in entries of many (group commit). While
// REQUEST_APPENDS_IN_FLIGHT of this replica's request entries for the queue are in flight (appended, not yet
// applied here), the records of new requests wait, and go out together in the next entry. Under load an
// entry then carries many requests, so every replica reads, decodes and applies fewer, larger entries, and
// each NATS round trip carries more; when idle, a request still goes out in the next event turn.
//
// An entry stays under MAX_ENTRY_BYTES (NATS refuses a message over its max_payload, 1 MiB by default): a
// batch that encodes larger is appended as two halves, each checked again.
import type { Applied } from '../queue/queue-state.js';
import type { QueueRecord } from '../queue/records.js';

/** Request entries of one queue in flight at once from one replica. */
export const REQUEST_APPENDS_IN_FLIGHT = 2;
/** The largest entry a replica appends, in bytes as encoded: requests' records here, a leader's in ReplicatedHistory. */
export const MAX_ENTRY_BYTES = 512 * 1024;

interface Waiting {
  records: readonly QueueRecord[];
  resolve: (applied: Applied[]) => void;
  reject: (err: unknown) => void;
}

export class RequestBatcher {
  private waiting: Waiting[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    /** The log entry of these records, encoded. */
    private readonly encode: (records: readonly QueueRecord[]) => Uint8Array,
    /** Appends the entry of these records, encoded; resolves with what they did once this replica applied it. */
    private readonly append: (records: readonly QueueRecord[], entry: Uint8Array) => Promise<Applied[]>,
  ) {}

  /** Appends the records with other requests' and resolves with what each did, in order. */
  propose(records: readonly QueueRecord[]): Promise<Applied[]> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ records, resolve, reject });
      this.schedule();
    });
  }

  /** Fails every request not yet appended. */
  rejectWaiting(err: unknown): void {
    for (const w of this.waiting.splice(0)) w.reject(err);
  }

  private schedule(): void {
    if (this.scheduled || this.waiting.length === 0 || this.inFlight >= REQUEST_APPENDS_IN_FLIGHT) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.waiting;
      this.waiting = [];
      if (batch.length > 0) this.send(batch);
    });
  }

  private send(batch: Waiting[]): void {
    const records = batch.flatMap((w) => w.records);
    const entry = this.encode(records);
    if (entry.byteLength > MAX_ENTRY_BYTES && batch.length > 1) {
      const half = batch.length >> 1;
      this.send(batch.slice(0, half));
      this.send(batch.slice(half));
      return;
    }
    this.inFlight++;
    this.append(records, entry)
      .then(
        (applied) => {
          let at = 0;
          for (const w of batch) {
            w.resolve(applied.slice(at, at + w.records.length));
            at += w.records.length;
          }
        },
        (err: unknown) => {
          for (const w of batch) w.reject(err);
        },
      )
      .finally(() => {
        this.inFlight--;
        this.schedule();
      });
  }
}
