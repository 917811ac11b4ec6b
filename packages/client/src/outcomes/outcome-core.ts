// The core beneath every outcome consumer (WebSocket, NATS JetStream, webhook): it turns received outcomes,
// each with its sink's acknowledgement, into deliveries of one shape. It
// - drops duplicates by Outcome.id: ids of handled deliveries are remembered in a bounded LRU, and a copy that
//   arrives while the first is still being handled joins it (acknowledged together) instead of being handed out;
// - reassembles batched outcomes (the *.expired and *.removed kinds, split by OutcomeBatch) into one delivery
//   once every chunk of the operation arrived;
// - reports a gap in producer_sequence (N+2 after N: an outcome was missed) per producer_id.
import { clone } from '@bufbuild/protobuf';
import { OutcomeSchema, type Outcome, type OutcomeBatch } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

export interface OutcomeDelivery {
  /**
   * The outcome. For a batched kind split over several chunks, the whole operation: the first chunk with the
   * id lists of every chunk, in chunk order.
   */
  readonly outcome: Outcome;
  /** What it was assembled from: the outcome alone, or each chunk of the operation in chunk order. */
  readonly chunks: readonly Outcome[];
  /** False only for an operation handed out before all its chunks arrived (see maxPendingBatches). */
  readonly complete: boolean;
  /**
   * Marks it handled: acknowledges every chunk to the sink (resolving once the sink confirmed) and remembers the
   * ids, so a later copy is dropped. Call it after handling; calling it again returns the same promise. When
   * the sink cannot confirm, it rejects, and the sink's redelivery is handed out again.
   */
  ack(): Promise<void>;
}

/** producer_sequence jumped: `missing` outcomes of `producerId` between `after` and `next` were not received. */
export interface SequenceGap {
  producerId: string;
  /** The highest producer_sequence received before. */
  after: bigint;
  /** The producer_sequence that arrived. */
  next: bigint;
  missing: bigint;
  /** The queue of the outcome that showed the gap. */
  queueId: string;
}

export interface OutcomeCoreOptions {
  /** How many handled outcome ids are remembered for dedupe (default 10000). */
  dedupeSize?: number;
  /**
   * Report gaps in producer_sequence. Only meaningful when the consumer receives every outcome of a producer:
   * a consumer of some queues sees the other queues' numbers as gaps. Each consumer picks its default.
   */
  detectGaps?: boolean;
  onGap?: (gap: SequenceGap) => void;
  /** Batched operations waiting for chunks at most; beyond it the oldest is handed out incomplete (default 1000). */
  maxPendingBatches?: number;
}

export const DEFAULT_DEDUPE_SIZE = 10_000;
export const DEFAULT_MAX_PENDING_BATCHES = 1_000;

type SinkAck = () => Promise<void>;

/** A delivery handed out and not yet acknowledged, or a batch still collecting chunks. */
interface Pending {
  ids: string[];
  acks: SinkAck[];
}

interface PendingBatch extends Pending {
  chunkCount: number;
  chunks: Map<number, Outcome>;
}

/** The batch of a batched kind's payload, if the outcome has one. */
export function outcomeBatch(outcome: Outcome): OutcomeBatch | undefined {
  const p = outcome.payload;
  switch (p.case) {
    case 'ticketsExpired':
    case 'ticketsRemoved':
    case 'backfillRequestsExpired':
    case 'backfillRequestsRemoved':
      return p.value.batch;
    default:
      return undefined;
  }
}

/** The ids a batched payload lists (tickets or backfill requests); empty for other kinds. */
export function batchedIds(outcome: Outcome): string[] {
  const p = outcome.payload;
  switch (p.case) {
    case 'ticketsExpired':
    case 'ticketsRemoved':
      return p.value.ticketIds;
    case 'backfillRequestsExpired':
    case 'backfillRequestsRemoved':
      return p.value.backfillRequestIds;
    default:
      return [];
  }
}

export class OutcomeCore {
  private readonly seen = new Map<string, true>();
  private readonly inFlight = new Map<string, Pending>();
  private readonly batches = new Map<string, PendingBatch>();
  private readonly lastSequence = new Map<string, bigint>();
  private readonly dedupeSize: number;
  private readonly maxPendingBatches: number;
  /** Copies dropped so far (already handled, or joined to one being handled). */
  duplicates = 0;
  /** Gaps reported so far. */
  gaps = 0;

  /** Whether gaps are reported (options.detectGaps, or what the sink said of its numbering). */
  detectGaps: boolean;

  constructor(private readonly options: OutcomeCoreOptions = {}) {
    this.detectGaps = options.detectGaps ?? false;
    this.dedupeSize = Math.max(1, options.dedupeSize ?? DEFAULT_DEDUPE_SIZE);
    this.maxPendingBatches = Math.max(1, options.maxPendingBatches ?? DEFAULT_MAX_PENDING_BATCHES);
  }

  /**
   * Takes one received outcome with the sink's acknowledgement of it, in the order the sink delivered them.
   * Returns what is ready to hand out: nothing for a duplicate or a chunk of an incomplete batch, usually one
   * delivery, two when a batch had to be given up.
   */
  receive(outcome: Outcome, ack: SinkAck): OutcomeDelivery[] {
    if (this.seen.has(outcome.id)) {
      this.duplicates++;
      this.remember(outcome.id);
      void ack().catch(() => undefined); // handled before: only the sink needs to hear it again
      return [];
    }
    const pending = this.inFlight.get(outcome.id);
    if (pending) {
      this.duplicates++;
      pending.acks.push(ack);
      return [];
    }
    this.checkSequence(outcome);
    const batch = outcomeBatch(outcome);
    if (!batch || batch.chunkCount <= 1) return [this.deliver([outcome], { ids: [outcome.id], acks: [ack] }, true)];
    return this.addChunk(outcome, batch, ack);
  }

  private checkSequence(outcome: Outcome): void {
    if (!this.detectGaps) return;
    const last = this.lastSequence.get(outcome.producerId);
    const next = outcome.producerSequence;
    if (last !== undefined && next > last + 1n) {
      this.gaps++;
      this.options.onGap?.({ producerId: outcome.producerId, after: last, next, missing: next - last - 1n, queueId: outcome.queueId });
    }
    if (last === undefined || next > last) this.lastSequence.set(outcome.producerId, next);
  }

  private addChunk(outcome: Outcome, batch: OutcomeBatch, ack: SinkAck): OutcomeDelivery[] {
    const ready: OutcomeDelivery[] = [];
    let pending = this.batches.get(batch.operationId);
    if (!pending) {
      if (this.batches.size >= this.maxPendingBatches) {
        const [oldestId, oldest] = this.batches.entries().next().value as [string, PendingBatch];
        this.batches.delete(oldestId);
        ready.push(this.deliverBatch(oldest, false));
      }
      pending = { ids: [], acks: [], chunkCount: batch.chunkCount, chunks: new Map() };
      this.batches.set(batch.operationId, pending);
    }
    pending.chunks.set(batch.chunkIndex, outcome);
    pending.ids.push(outcome.id);
    pending.acks.push(ack);
    this.inFlight.set(outcome.id, pending);
    if (pending.chunks.size >= pending.chunkCount) {
      this.batches.delete(batch.operationId);
      ready.push(this.deliverBatch(pending, true));
    }
    return ready;
  }

  private deliverBatch(pending: PendingBatch, complete: boolean): OutcomeDelivery {
    const chunks = [...pending.chunks.entries()].sort(([a], [b]) => a - b).map(([, o]) => o);
    return this.deliver(chunks, pending, complete);
  }

  private deliver(chunks: Outcome[], pending: Pending, complete: boolean): OutcomeDelivery {
    for (const id of pending.ids) this.inFlight.set(id, pending);
    let acked: Promise<void> | undefined;
    const ack = () =>
      (acked ??= (async () => {
        try {
          // Acks joined by copies that arrived meanwhile are in the list too.
          await Promise.all(pending.acks.map((a) => a()));
        } catch (err) {
          // The sink did not confirm: it will deliver these again, and then they are handed out again (a
          // redelivery joining this delivery would wait for an ack that may never be retried).
          acked = undefined;
          for (const id of pending.ids) if (this.inFlight.get(id) === pending) this.inFlight.delete(id);
          throw err;
        }
        for (const id of pending.ids) {
          this.inFlight.delete(id);
          this.remember(id);
        }
      })());
    return { outcome: chunks.length === 1 ? chunks[0]! : merge(chunks), chunks, complete, ack };
  }

  private remember(id: string): void {
    this.seen.delete(id);
    this.seen.set(id, true);
    if (this.seen.size > this.dedupeSize) this.seen.delete(this.seen.keys().next().value as string);
  }
}

/** The chunks of one operation as one outcome: the first chunk's envelope with every chunk's ids, in order. */
function merge(chunks: Outcome[]): Outcome {
  const merged = clone(OutcomeSchema, chunks[0]!);
  const ids = chunks.flatMap(batchedIds);
  const p = merged.payload;
  switch (p.case) {
    case 'ticketsExpired':
    case 'ticketsRemoved':
      p.value.ticketIds = ids;
      break;
    case 'backfillRequestsExpired':
    case 'backfillRequestsRemoved':
      p.value.backfillRequestIds = ids;
      break;
    default:
      break;
  }
  return merged;
}
