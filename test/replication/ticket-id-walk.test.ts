// A ticket's id read by walking its bytes (wire-walk.ts asciiTicketId, the shortcut ticketIdOf takes for
// the log's and a checkpoint's million tickets; holdsAsciiTicketId, the same compared in place) answers only
// what the full reader answers, and takes the usual shape: random tickets, unknown and repeated fields, non-ASCII and empty ids, flipped bytes, and
// every prefix of each. A message's fields split by the same walk (walkFields, how a checkpoint's million
// entries are found) are where the full reader finds them.
import { create, toBinary } from '@bufbuild/protobuf';
import { BinaryReader, WireType } from '@bufbuild/protobuf/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { fieldSpansByReader } from '../../src/replication/wire/checkpoint-decode.js';
import { asciiTicketId, holdsAsciiTicketId, walkFields } from '../../src/replication/wire/wire-walk.js';

/** The full reader's answer: the last id field's string, or an error for bytes it cannot walk. */
function readerId(bytes: Uint8Array): string | Error {
  try {
    const reader = new BinaryReader(bytes);
    let id = '';
    while (reader.pos < reader.len) {
      const [fieldNo, wireType] = reader.tag();
      if (fieldNo === 1) {
        if (wireType !== WireType.LengthDelimited) return new Error('id of another wire type');
        id = reader.string();
      } else reader.skip(wireType, fieldNo);
    }
    return id;
  } catch (err) {
    return err as Error;
  }
}

const ticketArb = fc.record({
  id: fc.oneof(fc.uuid(), fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 8 }), fc.constant('')),
  queueId: fc.string({ maxLength: 20 }),
  rulesetIds: fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }),
  engineInput: fc.uint8Array({ maxLength: 200 }),
  // Unknown fields of every wire type, and a second id field after the first.
  unknown: fc.array(fc.constantFrom(0, 1, 2, 5), { maxLength: 3 }),
  secondId: fc.option(fc.uuid()),
});

describe('a ticket id walked from its bytes', () => {
  it('is the full reader’s id wherever it answers, and answers for every encoder-made ticket with an ASCII id', () => {
    fc.assert(
      fc.property(ticketArb, fc.option(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }))), (t, flipped) => {
        const msg = create(TicketSchema, { id: t.id, queueId: t.queueId, rulesetIds: t.rulesetIds, engineInput: t.engineInput });
        const data = { 0: [1], 1: [1, 2, 3, 4, 5, 6, 7, 8], 2: [2, 0x61, 0x62], 5: [1, 2, 3, 4] } as Record<number, number[]>;
        msg.$unknown = t.unknown.map((wireType, i) => ({ no: 90 + i, wireType, data: new Uint8Array(data[wireType]!) }));
        let bytes = toBinary(TicketSchema, msg);
        if (t.secondId !== null) {
          const extra = toBinary(TicketSchema, create(TicketSchema, { id: t.secondId }));
          bytes = new Uint8Array([...bytes, ...extra]);
        }
        if (flipped && bytes.length > 0) bytes[flipped[0] % bytes.length] = flipped[1];
        const walked = asciiTicketId(bytes);
        if (walked !== undefined) expect(walked).toBe(readerId(bytes));
        // Compared in place, it says what comparing the walked id would.
        for (const id of [t.id, t.secondId ?? '', walked ?? 'x', `${walked ?? ''}x`, (walked ?? 'ab').slice(1)])
          expect(holdsAsciiTicketId(bytes, id)).toBe(walked === undefined ? undefined : walked === id);
        // Cut short anywhere (inside the id, a length, a fixed field), it answers nothing the reader refuses.
        for (let cut = 0; cut < bytes.length; cut++) {
          const prefix = bytes.slice(0, cut);
          const id = asciiTicketId(prefix);
          if (id !== undefined) expect(id).toBe(readerId(prefix));
        }
        const finalId = t.secondId ?? t.id;
        // biome-ignore lint/suspicious/noControlCharactersInRegex: ASCII is exactly U+0000..U+007F
        if (!flipped && finalId !== '' && /^[\u0000-\u007f]*$/.test(finalId)) expect(walked).toBe(finalId);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('a message’s fields walked from its bytes', () => {
  it('are split where the full reader splits them, wherever the walk answers, and the walk answers for usual messages', () => {
    // Fields of every wire type, the ones set apart among them, field numbers past a two-byte tag.
    const fieldArb = fc.record({
      no: fc.oneof(fc.constantFrom(1, 2, 3), fc.integer({ min: 1, max: 2 ** 18 - 1 })),
      wireType: fc.constantFrom(0, 1, 2, 5),
      data: fc.uint8Array({ maxLength: 12 }),
    });
    fc.assert(
      fc.property(
        fc.array(fieldArb, { maxLength: 12 }),
        fc.option(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }))),
        (fields, flipped) => {
          const payloads = { 0: [0x96, 0x01], 1: [1, 2, 3, 4, 5, 6, 7, 8], 5: [1, 2, 3, 4] } as Record<number, number[]>;
          const msg = create(TicketSchema);
          msg.$unknown = fields.map((f) => ({
            no: f.no,
            wireType: f.wireType,
            data: new Uint8Array(f.wireType === 2 ? [f.data.length, ...f.data] : payloads[f.wireType]!),
          }));
          const bytes = toBinary(TicketSchema, msg);
          if (flipped && bytes.length > 0) bytes[flipped[0] % bytes.length] = flipped[1];
          for (let cut = 0; cut <= bytes.length; cut++) {
            const prefix = bytes.slice(0, cut);
            const apart = new Map<number, number[]>([
              [1, []],
              [3, []],
            ]);
            const rest: number[] = [];
            const walked = walkFields(prefix, apart, rest);
            let expected: ReturnType<typeof fieldSpansByReader> | Error;
            try {
              expected = fieldSpansByReader(prefix, [1, 3]);
            } catch (err) {
              expected = err as Error;
            }
            if (walked) expect({ apart, rest }).toEqual(expected);
            if (cut === bytes.length && !flipped) expect(walked).toBe(true);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
