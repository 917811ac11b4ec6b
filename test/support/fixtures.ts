// Shared request fixtures: engine inputs serialized the way a game backend would.
import { randomUUID } from 'node:crypto';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { EngineInputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';

export const uuid = (): string => randomUUID();

export function engineInput(init: MessageInitShape<typeof EngineInputSchema>): Uint8Array {
  return toBinary(EngineInputSchema, create(EngineInputSchema, init));
}

/** A party of `size` players with mmr around 0.5 and two measured hosts. */
export function party(size: number, mmr = 0.5): Uint8Array {
  return engineInput({
    players: Array.from({ length: size }, (_, i) => ({ playerId: `p-${randomUUID()}`, mmr: mmr + i * 0.01, latencies: { 'eu-west': 30, 'eu-central': 45 } })),
  });
}
