// The engine input's short strings read by their bytes (src/engine/known-strings.ts): whatever the bytes
// (ASCII or not, valid UTF-8 or not, cut short), the same string or the same error as the protobuf reader's
// own `string`, the first time and every time after, strict or not.
import { BinaryReader, BinaryWriter } from '@bufbuild/protobuf/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KnownStrings } from '../../src/engine/known-strings.js';

/** What `read` gives: the string and where the reader stopped, or the error's message. */
function outcome(read: (reader: BinaryReader) => string, buf: Uint8Array): { text: string; pos: number } | { error: string } {
  const reader = new BinaryReader(buf);
  try {
    return { text: read(reader), pos: reader.pos };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

describe('KnownStrings', () => {
  // Mostly ASCII names from a small set (so they repeat), some with bytes past 0x7f or invalid UTF-8.
  const bytesArb = fc.oneof(
    fc.constantFrom('eu-west', 'eu-central', 'ranked', 'x'.repeat(48), 'y'.repeat(49), '').map((s) => new TextEncoder().encode(s)),
    fc.uint8Array({ maxLength: 60 }),
  );
  // A length-prefixed string, sometimes cut short (its length then runs past the buffer).
  const fieldArb = fc.tuple(bytesArb, fc.nat({ max: 4 })).map(([bytes, cut]) => {
    const whole = new BinaryWriter().bytes(bytes).finish();
    return cut === 0 ? whole : whole.subarray(0, Math.max(0, whole.length - cut));
  });

  it('reads what the reader reads, the same string for the same bytes, strict or not', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fieldArb, fc.boolean()), { maxLength: 30 }), (fields) => {
        const known = new KnownStrings();
        for (const [buf, strict] of fields) {
          const expected = outcome((r) => r.string(strict), buf);
          const first = outcome((r) => known.read(r, buf, strict), buf);
          const again = outcome((r) => known.read(r, buf, !strict), buf);
          expect(first).toEqual(expected);
          expect(again).toEqual(outcome((r) => r.string(!strict), buf));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('gives back the very string it read before for the same bytes', () => {
    const known = new KnownStrings();
    const field = new BinaryWriter().string('eu-west').finish();
    const first = known.read(new BinaryReader(field), field, true);
    const copy = new Uint8Array(field);
    expect(known.read(new BinaryReader(copy), copy, true)).toBe(first);
  });

  it('starts over once full, and still reads every string right', () => {
    const known = new KnownStrings();
    for (let i = 0; i < 10_000; i++) {
      const field = new BinaryWriter().string(`host-${i % 5_000}`).finish();
      expect(known.read(new BinaryReader(field), field, true)).toBe(`host-${i % 5_000}`);
    }
  });
});
