// The id maps behind a growing pool (active tickets, pool rows, resolved tickets) are sharded so that no
// single rehash of a million entries stalls CreateTicket (src/engine/sharded-map.ts). They must still
// behave as one Map, and each shard must keep insertion order: expiring resolved tickets relies on it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ShardedMap } from '../../src/engine/sharded-map.js';

type Op = { kind: 'set'; key: string; value: number } | { kind: 'delete'; key: string } | { kind: 'clear' };

const keyArb = fc.oneof(fc.uuid(), fc.constantFrom('a', 'b', '', '__proto__', 'x'.repeat(40)));
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('set' as const), key: keyArb, value: fc.integer() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: keyArb }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'clear' as const }) },
);

describe('the sharded id map of a pool', () => {
  it('answers as one Map would, and keeps each shard in insertion order', () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200 }), (ops) => {
        const sharded = new ShardedMap<number>();
        const model = new Map<string, number>();
        for (const op of ops) {
          if (op.kind === 'set') {
            sharded.set(op.key, op.value);
            model.set(op.key, op.value);
          } else if (op.kind === 'delete') {
            expect(sharded.delete(op.key)).toBe(model.delete(op.key));
          } else {
            sharded.clear();
            model.clear();
          }
          expect(sharded.size).toBe(model.size);
        }
        for (const [key, value] of model) {
          expect(sharded.has(key)).toBe(true);
          expect(sharded.get(key)).toBe(value);
        }
        expect(new Map(sharded)).toEqual(model);
        // The model's insertion order, restricted to one shard's keys, is that shard's order.
        const order = [...model.keys()];
        for (const shard of sharded.eachShard()) {
          const keys = [...shard.keys()];
          expect(keys).toEqual(order.filter((k) => shard.has(k)));
        }
      }),
      { numRuns: 300 },
    );
  });

  // The shard is a hash of a sample of the id's characters: every common kind of UUID must still spread.
  const hex = (n: number, width: number) => n.toString(16).padStart(width, '0');
  const ids: Record<string, (i: number) => string> = {
    'random (v4)': () => crypto.randomUUID(),
    'time-based with one node (v1)': (i) => `${hex(0x1e0c2a00 + i * 7, 8)}-1dd2-11b2-8080-0a1b2c3d4e5f`,
    'time-ordered (v7)': (i) =>
      `${hex(0x0190_0000_0000 + Math.floor(i / 10), 12).replace(/^(.{8})/, '$1-')}-7${crypto.randomUUID().slice(15)}`,
    sequential: (i) => `00000000-0000-4000-8000-${hex(i, 12)}`,
  };
  for (const [kind, id] of Object.entries(ids)) {
    it(`spreads ticket ids over its shards: ${kind}`, () => {
      const sharded = new ShardedMap<number>();
      for (let i = 0; i < 25_600; i++) sharded.set(id(i), i);
      expect(sharded.size).toBe(25_600);
      const sizes = sharded.eachShard().map((shard) => shard.size);
      expect(Math.min(...sizes)).toBeGreaterThan(40); // 100 each on average, standard deviation 10
      expect(Math.max(...sizes)).toBeLessThan(170);
    });
  }
});
