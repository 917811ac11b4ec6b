// Shared request fixtures: engine inputs serialized the way a game backend would.
import { randomUUID } from 'node:crypto';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { EngineInputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';

export const uuid = (): string => randomUUID();

export function engineInput(init: MessageInitShape<typeof EngineInputSchema>): Uint8Array {
  return toBinary(EngineInputSchema, create(EngineInputSchema, init));
}

/** A party of `size` players with mmr around 0.5 and two measured hosts. */
export function party(size: number, mmr = 0.5): Uint8Array {
  return engineInput({
    players: Array.from({ length: size }, (_, i) => ({
      playerId: `p-${randomUUID()}`,
      mmr: mmr + i * 0.01,
      latencies: { 'eu-west': 30, 'eu-central': 45 },
    })),
  });
}

/** Any google.protobuf.Timestamp init a ticket could carry. */
export const timestampArb = fc.record({ seconds: fc.bigInt({ min: 0n, max: 1n << 40n }), nanos: fc.integer({ min: 0, max: 999_999_999 }) });

/** Any Ticket init (fields a caller may set, engine_input and metadata as arbitrary bytes). */
export const ticketArb = fc.record(
  {
    id: fc.uuid().chain((id) => fc.constantFrom(id, id.toUpperCase())),
    queueId: fc.string({ maxLength: 12 }),
    createdAt: timestampArb,
    engineInput: fc.uint8Array({ maxLength: 40 }),
    rulesetIds: fc.array(fc.string({ maxLength: 6 }), { maxLength: 3 }),
    metadata: fc.uint8Array({ maxLength: 40 }),
  },
  { requiredKeys: ['id'] },
);

/** Host keys and attribute values, including ones a plain object orders or treats specially. */
const keyArb = fc.constantFrom('eu-west', 'eu-central', 'us-east', '10', '2', '0', '007', '__proto__', '', 'é');

/** Any EngineInput init: players with any mmr (non-finite included), latency maps and attributes over keyArb. */
export const engineInputArb = fc.record({
  players: fc.array(
    fc.record({
      playerId: fc.string({ maxLength: 8 }),
      mmr: fc.oneof(fc.double(), fc.constantFrom(0.5, 1200)),
      latencies: fc.dictionary(keyArb, fc.nat({ max: 70_000 }), { maxKeys: 5 }),
    }),
    { maxLength: 5 },
  ),
  attributes: fc.dictionary(
    keyArb,
    fc.record({ values: fc.array(keyArb, { maxLength: 3 }), accepts: fc.array(keyArb, { maxLength: 3 }) }),
    { maxKeys: 3 },
  ),
});
