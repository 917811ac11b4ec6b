// The in-memory store's outbox index (src/store/sequence-index.ts): it answers like a sorted array filtered
// per call, for any mix of appends and deletes, and a retention sweep of the oldest outcomes costs
// amortized O(1) per delete rather than O(n).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeOutcome } from '../../src/outcomes/outcome-encoding.js';
import { stampOf, ticketsRemoved } from '../../src/outcomes/outcome-factory.js';
import { RemovalReason } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { SequenceIndex } from '../../src/store/sequence-index.js';
import type { StoreChange } from '../../src/store/store.js';

type Step = { kind: 'push'; gap: number } | { kind: 'delete'; pick: number } | { kind: 'deleteOldest'; count: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('push' as const), gap: fc.integer({ min: 1, max: 3 }) }) },
  fc.record({ kind: fc.constant('delete' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('deleteOldest' as const), count: fc.integer({ min: 1, max: 200 }) }),
);

describe('the outbox sequence index', () => {
  it('answers as a sorted array filtered per call would', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 400 }), fc.nat({ max: 1000 }), (steps, probe) => {
        const index = new SequenceIndex();
        let model: bigint[] = [];
        let next = 1n;
        for (const step of steps) {
          if (step.kind === 'push') {
            next += BigInt(step.gap);
            index.push(next);
            model.push(next);
          } else if (step.kind === 'delete') {
            const target = model.length > 0 ? model[step.pick % model.length]! : next + 5n;
            expect(index.delete(target)).toBe(model.includes(target));
            expect(index.delete(target)).toBe(false);
            model = model.filter((s) => s !== target);
          } else {
            for (const s of model.slice(0, step.count)) expect(index.delete(s)).toBe(true);
            model = model.slice(step.count);
          }
          expect(index.size).toBe(model.length);
        }
        expect([...index.after(0n)]).toEqual(model);
        expect([...index.after(BigInt(probe))]).toEqual(model.filter((s) => s > BigInt(probe)));
      }),
      { numRuns: 300 },
    );
  });

  it('sweeps the oldest of 100 000 outcomes of a memory store in linear time', async () => {
    const store = new MemoryStore();
    const outcome = (i: number): StoreChange => ({
      type: 'outcome.record',
      outcome: encodeOutcome(ticketsRemoved('q', [`t${i}`], RemovalReason.CLEAR_COMMAND, 100, stampOf(`op${i}`, 1))[0]!),
    });
    const n = 100_000;
    await store.commit(Array.from({ length: n }, (_, i) => outcome(i)));
    const started = performance.now();
    // A retention sweep: the oldest first, in commits of 1 000.
    for (let from = 1; from <= n - 10; from += 1_000) {
      const deletes: StoreChange[] = [];
      for (let s = from; s < Math.min(from + 1_000, n - 9); s++)
        deletes.push({ type: 'outcome.delete', queueId: 'q', sequence: BigInt(s) });
      await store.commit(deletes);
      // Delivery reads the next outcomes after each sweep.
      expect(store.queueOutcomes('q', BigInt(from), 1)).toHaveLength(1);
    }
    const ms = performance.now() - started;
    expect(store.queueOutcomes('q', 0n, 100).map((o) => o.producerSequence)).toEqual(
      Array.from({ length: 10 }, (_, i) => BigInt(n - 9 + i)),
    );
    expect(store.listOutcomes({ afterSequence: BigInt(n - 2) }).map((o) => o.producerSequence)).toEqual([BigInt(n - 1), BigInt(n)]);
    // Filtering the array per delete is some 5·10^9 comparisons here; the index takes about 100 ms.
    expect(ms).toBeLessThan(1_000);
  });
});
