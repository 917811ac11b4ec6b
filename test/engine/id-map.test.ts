// The off-heap id map (src/engine/id-map.ts) behind a queue's active tickets and its pool's rows must answer
// as a Map<string, number> would, for UUID keys (packed into its tables) and any other string (kept beside).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdMap } from '../../src/engine/id-map.js';

type Op = { kind: 'set' | 'setAscii'; key: string; value: number } | { kind: 'delete'; key: string } | { kind: 'clear' };

/** UUIDs from a small set (so sets and deletes meet the same keys), some not canonical, and other strings. */
const keyArb = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0, max: 63 }).map((i) => uuidOf(i)) },
  { weight: 2, arbitrary: fc.uuid() },
  { weight: 1, arbitrary: fc.uuid().map((u) => u.toUpperCase()) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'a',
      '',
      '__proto__',
      'x'.repeat(36),
      '0000000g-0000-0000-0000-000000000000',
      '00000000_0000-0000-0000-000000000000',
    ),
  },
);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant('set' as const), key: keyArb, value: fc.oneof(fc.integer(), fc.double({ noNaN: true })) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('setAscii' as const),
      key: keyArb,
      value: fc.oneof(fc.integer(), fc.double({ noNaN: true })),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: keyArb }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'clear' as const }) },
);

/** A v4-shaped id whose words all depend on `i`, with runs of equal bytes. */
function uuidOf(i: number): string {
  const hex = (i * 2654435761).toString(16).padStart(8, '0').slice(-8);
  return `${hex}-${hex.slice(0, 4)}-4${hex.slice(1, 4)}-8${hex.slice(5, 8)}-${hex}${hex.slice(0, 4)}`;
}

function expectSame(map: IdMap, model: Map<string, number>): void {
  expect(map.size).toBe(model.size);
  for (const [key, value] of model) expect(map.get(key)).toBe(value);
  expect(new Map(map)).toEqual(model);
}

describe('the off-heap id map', () => {
  it.each([1, 4, 256])('answers as a Map would, over %i shards', (shards) => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 300 }), (ops) => {
        const map = new IdMap(shards);
        const model = new Map<string, number>();
        for (const op of ops) {
          if (op.kind === 'set') {
            map.set(op.key, op.value);
            model.set(op.key, op.value);
          } else if (op.kind === 'setAscii') {
            // The key's bytes amid others, in a view that does not start its buffer (every key here is ASCII).
            const framed = new Uint8Array(op.key.length + 5);
            framed.set(Buffer.from(`ab${op.key}cd`, 'latin1'), 1);
            map.setAscii(framed.subarray(1), 2, 2 + op.key.length, op.value);
            model.set(op.key, op.value);
          } else if (op.kind === 'delete') {
            expect(map.delete(op.key)).toBe(model.delete(op.key));
          } else {
            map.clear();
            model.clear();
          }
          expect(map.size).toBe(model.size);
          if (op.kind !== 'clear') expect(map.has(op.key)).toBe(model.has(op.key));
        }
        expectSame(map, model);
      }),
      { numRuns: 200 },
    );
  });

  it('keeps every entry through growth and deletes in long probe clusters', () => {
    const map = new IdMap(1);
    const model = new Map<string, number>();
    const random = fc.sample(fc.uuid(), { numRuns: 5000, seed: 7 });
    random.forEach((key, i) => {
      map.set(key, i);
      model.set(key, i);
      if (i % 3 === 2) {
        const gone = random[i - 1]!;
        expect(map.delete(gone)).toBe(model.delete(gone));
      }
    });
    expectSame(map, model);
    for (const key of random) {
      expect(map.delete(key)).toBe(model.delete(key));
      expect(map.get(key)).toBeUndefined();
    }
    expect(map.size).toBe(0);
  });

  it('gives back each key as it was set', () => {
    const map = new IdMap();
    const keys = ['00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '0123abcd-89ef-4567-8abc-def012345678'];
    for (const [i, key] of keys.entries()) map.set(key, i);
    expect([...map].sort((a, b) => a[1] - b[1])).toEqual(keys.map((key, i) => [key, i]));
  });
});

describe('the id map over many tickets', () => {
  // The hash must spread every common kind of UUID over the shards, so that no shard grows (and rehashes) alone.
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
      const map = new IdMap();
      for (let i = 0; i < 25_600; i++) map.set(id(i), i);
      expect(map.size).toBe(25_600);
      const sizes = map.shardSizes();
      expect(Math.min(...sizes)).toBeGreaterThan(40); // 100 each on average, standard deviation 10
      expect(Math.max(...sizes)).toBeLessThan(170);
    });
  }
});

describe('an id map made room for', () => {
  it('keeps what it held and takes the rest as before', () => {
    const map = new IdMap();
    const model = new Map<string, number>();
    const keys = fc.sample(fc.uuid(), { numRuns: 3000, seed: 11 });
    keys.slice(0, 500).forEach((key, i) => {
      map.set(key, i);
      model.set(key, i);
    });
    map.reserve(100_000);
    keys.slice(500).forEach((key, i) => {
      map.set(key, i);
      model.set(key, i);
    });
    expect(new Map(map)).toEqual(model);
    expect(Math.min(...map.shardSizes())).toBeGreaterThan(0);
  });
});

describe('an id map told how many entries to expect', () => {
  it('allocates nothing at once, and each shard that grows takes its share of the room in one step', () => {
    const map = new IdMap();
    const slots = () => (map as unknown as { shards: { slots: number }[] }).shards.map((shard) => shard.slots);
    map.expect(100_000);
    // 100,000 over 256 shards is 391 each, under three quarters of 1,024 slots.
    expect(new Set(slots())).toEqual(new Set([16]));
    const model = new Map<string, number>();
    fc.sample(fc.uuid(), { numRuns: 6000, seed: 12 }).forEach((key, i) => {
      map.set(key, i);
      model.set(key, i);
    });
    expect(new Map(map)).toEqual(model);
    const grown = slots().filter((n) => n > 16);
    expect(grown.length).toBeGreaterThan(0);
    expect(new Set(grown)).toEqual(new Set([1024]));
  });
});
