// Parses and checks a ticket's engine_input once, at ingestion. The pool keeps the parsed form; nothing
// re-parses it per tick.
//
// The parse reads the wire form straight into what the pool and the match output use (player ids, the mean
// mmr, each host's worst latency, the attributes) instead of decoding EngineInput messages: on CreateTicket
// the generic decoder took ~7% of the main thread and ~18% of the bytes allocated (bench/RESULTS.md). It
// makes the same BinaryReader calls in the same order as @bufbuild/protobuf's decoder does for this schema
// (last value wins for a scalar, repeated entries of one map key replace the earlier one, a message value
// repeated within one map entry merges, unknown fields are skipped with the same recursion budget), so it
// accepts and refuses exactly what decoding accepts and refuses; test/operations/create-ticket.test.ts checks that
// against fromBinary on generated, merged and corrupted inputs.
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { AttributeSchema, EngineInputSchema, PlayerSchema } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import { failedPrecondition } from '../errors.js';
import { KnownStrings } from './known-strings.js';

/** A party's latency to one host: its worst player's measurement, and how many players measured it. */
export interface HostLatency {
  ms: number;
  measuredBy: number;
}

/** What the pool and the match output use of an EngineInput. */
export interface ParsedEngineInput {
  /** player_id of each player, in order; its length is the party size. */
  readonly playerIds: string[];
  /** The players' mean mmr (NaN when there are none, as for a backfill request's empty match). */
  readonly mmrMean: number;
  /**
   * Each host key some player measured, in the order a decoded message's players and latency maps list
   * them (the order the pool interns host keys in): the party's worst latency to it.
   */
  readonly latencies: ReadonlyMap<string, HostLatency>;
  /** The attributes by name. */
  readonly attributes: ReadonlyMap<string, { values: string[]; accepts: string[] }>;
}

/**
 * `field` names the request field in error messages (ticket.engine_input, backfill_request.engine_input).
 * A ticket without engine_input is one player whose player_id is the ticket id, with mmr 0, no latency
 * measurements and no attributes (docs/engine.md).
 */
export function parseTicketEngineInput(bytes: Uint8Array | undefined, ticketId: string, field: string): ParsedEngineInput {
  if (bytes === undefined) return { playerIds: [ticketId], mmrMean: 0, latencies: new Map(), attributes: new Map() };
  const input = parse(bytes, field);
  if (input.playerIds.length === 0) throw failedPrecondition(`${field} has no players: a ticket needs at least one`);
  return input;
}

/** A backfill request's engine_input describes the players already in the match; it may have none. */
export function parseBackfillEngineInput(bytes: Uint8Array | undefined, field: string): ParsedEngineInput {
  if (bytes === undefined) return { playerIds: [], mmrMean: NaN, latencies: new Map(), attributes: new Map() };
  return parse(bytes, field);
}

/**
 * A ticket's party size without parsing its engine_input whole: its players, counted (one without
 * engine_input). Undefined when the bytes do not walk.
 */
export function partySizeOf(bytes: Uint8Array | undefined): number | undefined {
  if (bytes === undefined) return 1;
  try {
    const reader = new BinaryReader(bytes);
    let players = 0;
    while (reader.pos < bytes.length) {
      const [number, wireType] = reader.tag();
      if (number === F.players.number) players++;
      reader.skip(wireType, number);
    }
    return players;
  } catch {
    return undefined;
  }
}

/**
 * A ticket's player ids, in order, read from its engine_input without parsing the rest: what a match's output
 * lists (a tick reads them for every matched ticket, whose input was checked at ingestion). The same ids
 * `parseTicketEngineInput` answers for the inputs it accepts; an input it refuses may be answered or thrown
 * on here (the parse is the check, not this).
 */
export function playerIdsOf(bytes: Uint8Array | undefined, ticketId: string): string[] {
  if (bytes === undefined) return [ticketId];
  const reader = new BinaryReader(bytes);
  const ids: string[] = [];
  while (reader.pos < bytes.length) {
    const [number, wireType] = reader.tag();
    if (number !== F.players.number) {
      reader.skip(wireType, number);
      continue;
    }
    const end = reader.uint32() + reader.pos;
    let id = '';
    while (reader.pos < end) {
      const [field, type] = reader.tag();
      if (field === F.playerId.number) id = reader.string(F.playerId.utf8Validation);
      else reader.skip(type, field);
    }
    ids.push(id);
  }
  return ids;
}

function parse(bytes: Uint8Array, field: string): ParsedEngineInput {
  let parsed: Parsed;
  try {
    parsed = new EngineInputReader(bytes).read();
  } catch (err) {
    throw failedPrecondition(`${field} does not parse as ${EngineInputSchema.typeName}: ${(err as Error).message}`);
  }
  if (parsed.firstBadMmr !== undefined) {
    const i = parsed.firstBadMmr;
    throw failedPrecondition(`${field}.players[${i}].mmr must be a finite number, got ${parsed.badMmr}`);
  }
  return parsed.input;
}

// The fields read, as the generated descriptors give them (numbers, whether a string is checked for UTF-8).
const F = {
  players: EngineInputSchema.field.players!,
  attributes: EngineInputSchema.field.attributes!,
  playerId: PlayerSchema.field.playerId!,
  mmr: PlayerSchema.field.mmr!,
  latencies: PlayerSchema.field.latencies!,
  values: AttributeSchema.field.values!,
  accepts: AttributeSchema.field.accepts!,
};
const MAP_KEY = 1;
const MAP_VALUE = 2;
/** Host keys and attribute strings, read by their bytes (player ids are not: each is new). */
const KNOWN = new KnownStrings();
/** The decoder's default recursion limit; a message read at depth d skips unknown groups with limit - d. */
const RECURSION_LIMIT = 100;

interface Parsed {
  input: ParsedEngineInput;
  firstBadMmr: number | undefined;
  badMmr: number;
}

/** One pass over an encoded EngineInput. */
class EngineInputReader {
  private readonly reader: BinaryReader;
  /** One player's latency map, in the order of a decoded map's Object.entries; reused between players. */
  private readonly playerHosts: string[] = [];
  private readonly playerMs: number[] = [];

  constructor(private readonly bytes: Uint8Array) {
    this.reader = new BinaryReader(bytes);
  }

  read(): Parsed {
    const reader = this.reader;
    const playerIds: string[] = [];
    let mmrSum = 0;
    let firstBadMmr: number | undefined;
    let badMmr = 0;
    const latencies = new Map<string, HostLatency>();
    const attributes = new Map<string, { values: string[]; accepts: string[] }>();
    const end = this.bytes.length;
    while (reader.pos < end) {
      const tag = this.tag();
      const number = tag >>> 3;
      if (number === F.players.number) {
        const mmr = this.player(reader.uint32(), playerIds);
        if (!Number.isFinite(mmr) && firstBadMmr === undefined) [firstBadMmr, badMmr] = [playerIds.length - 1, mmr];
        mmrSum += mmr;
        this.addPlayerLatencies(latencies);
      } else if (number === F.attributes.number) {
        this.attributeEntry(attributes);
      } else {
        reader.skip(tag & 7, number, RECURSION_LIMIT - 1);
      }
    }
    return { input: { playerIds, mmrMean: mmrSum / playerIds.length, latencies, attributes }, firstBadMmr, badMmr };
  }

  /** BinaryReader.tag() without the [number, wireType] array it allocates: answers the tag, checked the same way. */
  private tag(): number {
    const reader = this.reader;
    const start = reader.pos;
    const tag = reader.uint32();
    const bytesRead = reader.pos - start;
    if (bytesRead > 5 || (bytesRead === 5 && this.bytes[reader.pos - 1]! > 0x0f)) {
      throw new Error('illegal tag: varint overflows uint32');
    }
    if (tag >>> 3 <= 0 || (tag & 7) > 5) throw new Error(`illegal tag: field no ${tag >>> 3} wire type ${tag & 7}`);
    return tag;
  }

  /** Reads one Player (depth 2): pushes its id, fills playerHosts/playerMs, answers its mmr. */
  private player(length: number, playerIds: string[]): number {
    const reader = this.reader;
    let playerId = '';
    let mmr = 0;
    this.playerHosts.length = 0;
    this.playerMs.length = 0;
    const end = reader.pos + length;
    while (reader.pos < end) {
      const tag = this.tag();
      const number = tag >>> 3;
      if (number === F.playerId.number) playerId = reader.string(F.playerId.utf8Validation);
      else if (number === F.mmr.number) mmr = reader.double();
      else if (number === F.latencies.number) this.latencyEntry();
      else reader.skip(tag & 7, number, RECURSION_LIMIT - 2);
    }
    playerIds.push(playerId);
    return mmr;
  }

  private latencyEntry(): void {
    const reader = this.reader;
    let host = '';
    let ms = 0;
    const end = reader.uint32() + reader.pos;
    while (reader.pos < end) {
      const tag = this.tag();
      const number = tag >>> 3;
      if (number === MAP_KEY) host = KNOWN.read(reader, this.bytes, F.latencies.utf8Validation);
      else if (number === MAP_VALUE) ms = reader.uint32();
      else reader.skip(tag & 7, number, RECURSION_LIMIT - 2);
    }
    // A key seen again replaces its value where it first stood, as assigning to a decoded record does.
    const i = this.playerHosts.indexOf(host);
    if (i >= 0) this.playerMs[i] = ms;
    else {
      this.playerHosts.push(host);
      this.playerMs.push(ms);
    }
  }

  /** Folds the player just read into the party's worst latency per host. */
  private addPlayerLatencies(party: Map<string, HostLatency>): void {
    const hosts = this.playerHosts;
    // A decoded map is a plain object: its integer-like keys come first, in numeric order.
    const order = hosts.some(isArrayIndex) ? objectKeyOrder(hosts) : undefined;
    for (let k = 0; k < hosts.length; k++) {
      const i = order ? order[k]! : k;
      const host = hosts[i]!;
      const ms = this.playerMs[i]!;
      const seen = party.get(host);
      if (seen) {
        seen.ms = Math.max(seen.ms, ms);
        seen.measuredBy++;
      } else party.set(host, { ms, measuredBy: 1 });
    }
  }

  private attributeEntry(attributes: Map<string, { values: string[]; accepts: string[] }>): void {
    const reader = this.reader;
    let name = '';
    let attribute: { values: string[]; accepts: string[] } | undefined;
    const end = reader.uint32() + reader.pos;
    while (reader.pos < end) {
      const tag = this.tag();
      const number = tag >>> 3;
      if (number === MAP_KEY) name = KNOWN.read(reader, this.bytes, F.attributes.utf8Validation);
      else if (number === MAP_VALUE) attribute = this.attribute(reader.uint32(), attribute ?? { values: [], accepts: [] });
      else reader.skip(tag & 7, number, RECURSION_LIMIT - 1);
    }
    attributes.set(name, attribute ?? { values: [], accepts: [] });
  }

  /** Reads an Attribute (depth 2) into `into`: a value repeated within one map entry merges. */
  private attribute(length: number, into: { values: string[]; accepts: string[] }) {
    const reader = this.reader;
    const end = reader.pos + length;
    while (reader.pos < end) {
      const tag = this.tag();
      const number = tag >>> 3;
      if (number === F.values.number) into.values.push(KNOWN.read(reader, this.bytes, F.values.utf8Validation));
      else if (number === F.accepts.number) into.accepts.push(KNOWN.read(reader, this.bytes, F.accepts.utf8Validation));
      else reader.skip(tag & 7, number, RECURSION_LIMIT - 2);
    }
    return into;
  }
}

function isArrayIndex(key: string): boolean {
  // Host keys are names: most answer on their first character, without the expression.
  const first = key.charCodeAt(0);
  if (!(first >= 48 && first <= 57)) return false;
  return /^(?:0|[1-9][0-9]*)$/.test(key) && Number(key) < 2 ** 32 - 1;
}

/** Positions of `keys` in the order Object.entries lists them: array indices ascending, then the rest. */
function objectKeyOrder(keys: readonly string[]): number[] {
  const indices = keys.map((_, i) => i);
  const integer = indices.filter((i) => isArrayIndex(keys[i]!)).sort((a, b) => Number(keys[a]) - Number(keys[b]));
  return [...integer, ...indices.filter((i) => !isArrayIndex(keys[i]!))];
}
