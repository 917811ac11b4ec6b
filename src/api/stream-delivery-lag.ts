// What a WebSocket stream connection has sent and not yet seen acknowledged, so that an ack reports each
// outcome's delivery lag (occurrence to acknowledgement) as the push sinks do. Bounded: past the cap the
// oldest are forgotten, and their acknowledgement is not measured.
import { timestampMs } from '@bufbuild/protobuf/wkt';
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

const MAX_TRACKED = 10_000;

export class SentOutcomes {
  private readonly sent: { sequence: bigint; queueId: string; occurredAtMs: number }[] = [];
  private head = 0;

  record(outcome: Outcome): void {
    if (!outcome.occurredAt) return;
    this.sent.push({ sequence: outcome.producerSequence, queueId: outcome.queueId, occurredAtMs: timestampMs(outcome.occurredAt) });
    if (this.sent.length - this.head > MAX_TRACKED) this.head++;
    this.compact();
  }

  /** Forgets everything up to `sequence` and answers, per queue, the seconds each waited for this ack. */
  acknowledged(sequence: bigint, nowMs: number): Map<string, number[]> {
    const lags = new Map<string, number[]>();
    while (this.head < this.sent.length && this.sent[this.head]!.sequence <= sequence) {
      const { queueId, occurredAtMs } = this.sent[this.head++]!;
      let queue = lags.get(queueId);
      if (!queue) lags.set(queueId, (queue = []));
      queue.push(Math.max(0, nowMs - occurredAtMs) / 1000);
    }
    this.compact();
    return lags;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.sent.length) {
      this.sent.splice(0, this.head);
      this.head = 0;
    }
  }
}
