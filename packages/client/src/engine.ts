// The standard engine's payloads without bytes: an EngineInput builder for tickets and backfill requests, and
// the decoder of a match's EngineOutput (teams and host selection). Both are the generated protobuf types of
// matchmaker.engines.standard.v1; the client serializes and parses them, callers never see the bytes.
import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import type { Match, Ticket } from './gen/matchmaker/core/v1/resources_pb.js';
import {
  AttributeSchema,
  EngineInputSchema,
  EngineOutputSchema,
  PlayerSchema,
  type EngineInput,
  type EngineOutput,
} from './gen/matchmaker/engines/standard/v1/engine_pb.js';

export type EngineInputInit = MessageInitShape<typeof EngineInputSchema>;
/** What an operation takes as `engineInput`: a built message, its init shape, or a builder. */
export type EngineInputLike = EngineInput | EngineInputInit | EngineInputBuilder;

export interface PlayerInit {
  playerId: string;
  /** Skill rating, unitless; compared raw (see the queue's mmr_normalization_ref). */
  mmr: number;
  /** Host key to round-trip time in whole milliseconds. */
  latencies?: Record<string, number>;
}

const UINT32_MAX = 0xffff_ffff;

/** Builds an EngineInput: one player for a solo ticket, several for a party, plus attribute filters. */
export class EngineInputBuilder {
  private readonly input: EngineInput = create(EngineInputSchema);

  /** Adds a player (a party is one ticket with several). */
  player(player: PlayerInit): this {
    if (!Number.isFinite(player.mmr)) throw new RangeError(`player ${player.playerId}: mmr must be a finite number, got ${player.mmr}`);
    const latencies: Record<string, number> = {};
    for (const [host, ms] of Object.entries(player.latencies ?? {})) {
      if (!Number.isInteger(ms) || ms < 0 || ms > UINT32_MAX) {
        throw new RangeError(`player ${player.playerId}: latency of host ${host} must be whole milliseconds (uint32), got ${ms}`);
      }
      latencies[host] = ms;
    }
    this.input.players.push(create(PlayerSchema, { playerId: player.playerId, mmr: player.mmr, latencies }));
    return this;
  }

  /** Sets the attribute filter `name`: what this ticket is (`values`) and what it accepts (`accepts`). */
  attribute(name: string, attribute: { values?: readonly string[]; accepts?: readonly string[] }): this {
    this.input.attributes[name] = create(AttributeSchema, {
      values: [...(attribute.values ?? [])],
      accepts: [...(attribute.accepts ?? [])],
    });
    return this;
  }

  /** The message built so far (a copy: the builder can go on). */
  build(): EngineInput {
    return fromBinary(EngineInputSchema, this.toBinary());
  }

  /** The serialized message, as `Ticket.engine_input` carries it. */
  toBinary(): Uint8Array {
    return toBinary(EngineInputSchema, this.input);
  }
}

/** A new EngineInput builder. */
export function engineInput(): EngineInputBuilder {
  return new EngineInputBuilder();
}

/** Serializes an engine input given as a message, an init shape or a builder. */
export function encodeEngineInput(input: EngineInputLike): Uint8Array {
  if (input instanceof EngineInputBuilder) return input.toBinary();
  return toBinary(EngineInputSchema, create(EngineInputSchema, input as EngineInputInit));
}

/** Parses a serialized EngineInput (e.g. the engine_input of a ticket in a ticket.orphaned outcome). */
export function decodeEngineInput(bytes: Uint8Array): EngineInput {
  return fromBinary(EngineInputSchema, bytes);
}

/** Parses a serialized EngineOutput; undefined when there is none. */
export function decodeEngineOutput(bytes: Uint8Array | undefined): EngineOutput | undefined {
  return bytes === undefined ? undefined : fromBinary(EngineOutputSchema, bytes);
}

/** A match's engine output: its teams (player ids), the attribute intersections and the chosen host. */
export function matchEngineOutput(match: Pick<Match, 'engineOutput'>): EngineOutput | undefined {
  return decodeEngineOutput(match.engineOutput);
}

/** A ticket's engine input, when it has one. */
export function ticketEngineInput(ticket: Pick<Ticket, 'engineInput'>): EngineInput | undefined {
  return ticket.engineInput === undefined ? undefined : decodeEngineInput(ticket.engineInput);
}

/** Metadata as bytes: a string is taken as its UTF-8 encoding. */
export function encodeMetadata(metadata: Uint8Array | string): Uint8Array {
  return typeof metadata === 'string' ? new TextEncoder().encode(metadata) : metadata;
}

/** A ticket's metadata read as UTF-8 text (what encodeMetadata made of a string); undefined when it has none. */
export function metadataText(ticket: Pick<Ticket, 'metadata'>): string | undefined {
  return ticket.metadata === undefined ? undefined : new TextDecoder().decode(ticket.metadata);
}
