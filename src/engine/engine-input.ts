// Parses and checks a ticket's engine_input once, at ingestion. The pool keeps the parsed form; nothing
// re-parses it per tick.
import { create, fromBinary } from '@bufbuild/protobuf';
import { EngineInputSchema, PlayerSchema, type EngineInput } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import { failedPrecondition } from '../core/errors.js';

/**
 * `field` names the request field in error messages (ticket.engine_input, backfill_request.engine_input).
 * A ticket without engine_input is one player whose player_id is the ticket id, with mmr 0, no latency
 * measurements and no attributes (docs/engine.md).
 */
export function parseTicketEngineInput(bytes: Uint8Array | undefined, ticketId: string, field: string): EngineInput {
  if (bytes === undefined) {
    return create(EngineInputSchema, { players: [create(PlayerSchema, { playerId: ticketId, mmr: 0 })] });
  }
  const input = decode(bytes, field);
  if (input.players.length === 0) throw failedPrecondition(`${field} has no players: a ticket needs at least one`);
  checkPlayers(input, field);
  return input;
}

/** A backfill request's engine_input describes the players already in the match; it may have none. */
export function parseBackfillEngineInput(bytes: Uint8Array | undefined, field: string): EngineInput {
  if (bytes === undefined) return create(EngineInputSchema);
  const input = decode(bytes, field);
  checkPlayers(input, field);
  return input;
}

function decode(bytes: Uint8Array, field: string): EngineInput {
  try {
    return fromBinary(EngineInputSchema, bytes);
  } catch (err) {
    throw failedPrecondition(`${field} does not parse as matchmaker.engines.standard.v1.EngineInput: ${(err as Error).message}`);
  }
}

function checkPlayers(input: EngineInput, field: string): void {
  input.players.forEach((p, i) => {
    if (!Number.isFinite(p.mmr)) throw failedPrecondition(`${field}.players[${i}].mmr must be a finite number, got ${p.mmr}`);
  });
}
