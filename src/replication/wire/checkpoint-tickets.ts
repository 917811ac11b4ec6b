// A checkpoint's active tickets as its decoder leaves them (checkpoint-decode.ts): columns of positions and
// of where each Ticket's bytes lie in the checkpoint, not an object and a view per ticket. A million of
// those were most of what the collector did during a replica's restart (docs/replication.md). The queue's
// state and its local store read the tickets from here (store.ts TicketRun).
import type { TicketRun } from '../../store/store.js';
import { ticketIdIn, ticketIdOf } from './field-checks.js';

/** The decoder has checked every ticket's id: reading one again cannot fail. */
const unreachable = (problem: string, cause?: unknown) => new Error(`a decoded checkpoint ticket ${problem}`, { cause });

export class CheckpointTickets implements TicketRun {
  /**
   * @param bytes the checkpoint's state, which every span is of
   * @param positions ticket i's position
   * @param spans ticket i's bytes: `bytes[spans[2i], spans[2i + 1])`
   * @param unusual the tickets not in the encoder's shape, as the full reader gave their bytes (by index)
   */
  constructor(
    private readonly bytes: Uint8Array,
    private readonly positions: Float64Array,
    private readonly spans: Float64Array,
    private readonly unusual: ReadonlyMap<number, Uint8Array>,
  ) {}

  get length(): number {
    return this.positions.length;
  }

  position(i: number): number {
    return this.positions[i]!;
  }

  ticket(i: number): Uint8Array {
    return (this.unusual.size > 0 && this.unusual.get(i)) || this.bytes.subarray(this.spans[2 * i]!, this.spans[2 * i + 1]!);
  }

  ticketId(i: number): string {
    const odd = this.unusual.size > 0 ? this.unusual.get(i) : undefined;
    return odd ? ticketIdOf(odd, unreachable) : ticketIdIn(this.bytes, this.spans[2 * i]!, this.spans[2 * i + 1]!, unreachable);
  }
}
