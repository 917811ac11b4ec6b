// The dispatcher records how far delivery got without holding up the next batch
// (src/outcomes/dispatcher.ts): with the durable record slow, the sink still gets every batch in order, and
// the latest cursor is what ends up recorded.
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RemovalReason, type Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { noDeliveryTelemetry } from '../../src/outcomes/delivery-telemetry.js';
import { QueueDispatcher } from '../../src/outcomes/dispatcher.js';
import { encodeOutcome } from '../../src/outcomes/outcome-encoding.js';
import { stampOf, ticketsRemoved } from '../../src/outcomes/outcome-factory.js';
import type { QueueOutbox } from '../../src/outcomes/outbox.js';
import type { OutcomeSink } from '../../src/outcomes/sink.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { uuid } from '../support/fixtures.js';
import { pollUntil } from '../support/queues.js';

const log = pino({ level: 'silent' });
const dispatchers: QueueDispatcher[] = [];
afterEach(async () => {
  for (const d of dispatchers.splice(0)) await d.stop();
});

async function record(store: MemoryStore, queueId: string, count: number): Promise<void> {
  const changes = Array.from({ length: count }, () => ({
    type: 'outcome.record' as const,
    outcome: encodeOutcome(ticketsRemoved(queueId, [uuid()], RemovalReason.CLEAR_COMMAND, 100, stampOf(uuid(), Date.now()))[0]!),
  }));
  await store.commit(changes);
}

describe('dispatcher: delivery progress', () => {
  it('delivers the next batches while the record of the first is still being written, then records the latest cursor', async () => {
    const store = new MemoryStore();
    const queueId = 'eu.progress';
    const delivered: bigint[][] = [];
    const sink: OutcomeSink = {
      kind: 'webhook',
      batchSize: 2,
      retry: { maxRetries: Infinity, baseDelayMs: 1, maxDelayMs: 1 },
      deliver: async (outcomes: readonly Outcome[]) => void delivered.push(outcomes.map((o) => o.producerSequence)),
      close: async () => undefined,
    };
    // Durable records of the cursor that take effect only when released, one at a time.
    const held: { sequence: bigint; release: () => void }[] = [];
    const outbox: QueueOutbox = {
      store,
      delivering: true,
      advance: (sequence) =>
        new Promise<void>((resolve) => {
          held.push({
            sequence,
            release: () => void store.commit([{ type: 'delivery.advance', queueId, sequence }]).then(resolve),
          });
        }),
      park: async () => undefined,
      release: async () => undefined,
    };
    await record(store, queueId, 6);
    const dispatcher = new QueueDispatcher(queueId, sink, outbox, log, noDeliveryTelemetry);
    dispatchers.push(dispatcher);
    dispatcher.notify();
    // All three batches go out although the first batch's record has not been written.
    await pollUntil(
      async () => delivered.length,
      (n) => n === 3,
    );
    expect(delivered).toEqual([
      [1n, 2n],
      [3n, 4n],
      [5n, 6n],
    ]);
    expect(held.map((h) => h.sequence)).toEqual([2n]);
    expect(store.deliveryCursor(queueId)).toBe(0n);
    // The first record settles; the next one written is of the latest cursor, not of each batch.
    held[0]!.release();
    await pollUntil(
      async () => held.length,
      (n) => n === 2,
    );
    expect(held[1]!.sequence).toBe(6n);
    held[1]!.release();
    await pollUntil(
      async () => store.deliveryCursor(queueId),
      (cursor) => cursor === 6n,
    );
  });
});
