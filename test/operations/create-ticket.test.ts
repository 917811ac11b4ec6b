import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acknowledgedTicketBytes, engineInputOf, poolFieldsOf, waitFieldsOf } from '../../src/store/ticket-encoding.js';
import { parseTicketEngineInput, playerIdsOf, type ParsedEngineInput } from '../../src/engine/engine-input.js';
import {
  AttributeSchema,
  EngineInputSchema,
  PlayerSchema,
  type EngineInput,
} from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { CreateTicketRequestSchema } from '../../src/gen/matchmaker/core/v1/service_pb.js';
import { httpRequest, TRANSPORTS, type Transport } from '../support/transports.js';
import { engineInputArb, party, ticketArb, timestampArb, uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';

const env = useService();

const poolSize = async (queueId: string) => {
  const res = await httpRequest(env.service, 'GET', '/admin/v1/queues');
  return (res.body.queues as { queueId: string; activeTickets: number }[]).find((q) => q.queueId === queueId)!.activeTickets;
};

describe.each(TRANSPORTS)('CreateTicket over %s', (_name, connect) => {
  let api: Transport;
  beforeAll(() => {
    api = connect(env.service);
  });
  afterAll(() => api.close());

  it('stores the ticket and answers its id', async () => {
    const id = uuid();
    const metadata = new TextEncoder().encode('correlation-42');
    const res = await api.createTicket({ id, queueId: 'test.basic', engineInput: party(2), metadata, rulesetIds: ['5v5'] });
    expect(res).toEqual({ ok: true, value: expect.objectContaining({ ticketId: id }) });
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    expect(stored.status).toBe(200);
    expect(stored.body.state).toBe('active');
    const ticket = stored.body.ticket as Record<string, unknown>;
    expect(ticket.metadata).toBe(Buffer.from(metadata).toString('base64'));
    expect(ticket.rulesetIds).toEqual(['5v5']);
  });

  it('overwrites created_at with the server time', async () => {
    const id = uuid();
    const before = Date.now();
    const res = await api.createTicket({ id, queueId: 'test.basic', createdAt: { seconds: 1n, nanos: 0 } });
    expect(res.ok).toBe(true);
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    const createdAt = Date.parse((stored.body.ticket as { createdAt: string }).createdAt);
    expect(createdAt).toBeGreaterThanOrEqual(before - 1000);
    expect(createdAt).toBeLessThanOrEqual(Date.now() + 1000);
  });

  it('accepts a ticket without engine_input (one player) and compares UUIDs case-insensitively', async () => {
    const id = uuid();
    expect((await api.createTicket({ id: id.toUpperCase(), queueId: 'test.basic' })).ok).toBe(true);
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    expect(stored.status).toBe(200);
  });

  it('is idempotent: concurrent duplicates and a later retry make one pool entry', async () => {
    const before = await poolSize('test.basic');
    const id = uuid();
    const results = await Promise.all(
      Array.from({ length: 20 }, () => api.createTicket({ id, queueId: 'test.basic', engineInput: party(1) })),
    );
    for (const r of results) expect(r).toEqual({ ok: true, value: expect.objectContaining({ ticketId: id }) });
    const retry = await api.createTicket({ id, queueId: 'test.basic', engineInput: party(3) });
    expect(retry.ok).toBe(true);
    expect(await poolSize('test.basic')).toBe(before + 1);
    // The first write wins: a retry does not replace the stored ticket.
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
    expect(stored.body.state).toBe('active');
  });
});

describe('a ticket created over one transport is the same as over the other', () => {
  it('stores identical tickets for identical requests', async () => {
    const [grpcApi, httpApi] = TRANSPORTS.map(([, connect]) => connect(env.service));
    const input = party(3, 0.7);
    const metadata = new Uint8Array([0, 1, 2, 255]);
    const ids = [uuid(), uuid()];
    expect((await grpcApi!.createTicket({ id: ids[0], queueId: 'test.basic', engineInput: input, metadata })).ok).toBe(true);
    expect((await httpApi!.createTicket({ id: ids[1], queueId: 'test.basic', engineInput: input, metadata })).ok).toBe(true);
    const [a, b] = await Promise.all(ids.map((id) => httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`)));
    const strip = (t: Record<string, unknown>) => ({ ...t, id: undefined, createdAt: undefined });
    expect(strip(a!.body.ticket as Record<string, unknown>)).toEqual(strip(b!.body.ticket as Record<string, unknown>));
    grpcApi!.close();
  });

  it('accepts snake_case field names in HTTP bodies', async () => {
    const id = uuid();
    const res = await httpRequest(env.service, 'POST', '/v1/queues/test.basic/tickets', {
      ticket: { id, queue_id: 'test.basic', ruleset_ids: ['5v5'], engine_input: Buffer.from(party(1)).toString('base64') },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ticketId: id });
  });
});

describe('the ticket as stored', () => {
  it('decodes to the same Ticket whether taken from the gRPC request bytes or encoded afresh', () => {
    fc.assert(
      fc.property(ticketArb, fc.boolean(), timestampArb, (ticket, split, now) => {
        const one = toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket }));
        // The ticket field twice: the decoder merges them, so its bytes cannot be reused as they are.
        const encoded = split ? new Uint8Array([...one, ...one]) : one;
        const decoded = fromBinary(CreateTicketRequestSchema, encoded).ticket!;
        const receivedId = decoded.id;
        decoded.id = receivedId.toLowerCase();
        decoded.createdAt = create(TimestampSchema, now);
        const stored = fromBinary(TicketSchema, acknowledgedTicketBytes(decoded, receivedId, encoded));
        expect(stored).toEqual(fromBinary(TicketSchema, toBinary(TicketSchema, decoded)));
        expect(stored.id).toBe(ticket.id.toLowerCase());
        expect(stored.createdAt).toEqual(decoded.createdAt);
      }),
      { numRuns: 300 },
    );
  });

  it("appends the server's fields to the received bytes as a protobuf writer writes them, zeros included", () => {
    const TICKET = CreateTicketRequestSchema.field.ticket!.number;
    // Seconds and nanos past the usual shape (negative, past 2^53) take the writer; the rest are written by hand.
    const seconds = fc.oneof(fc.bigInt({ min: 0n, max: 1n << 40n }), fc.bigInt({ min: -(1n << 62n), max: 1n << 62n }), fc.constant(0n));
    const nanos = fc.oneof(fc.integer({ min: 0, max: 999_999_999 }), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.constant(0));
    fc.assert(
      fc.property(ticketArb, seconds, nanos, (ticket, s, n) => {
        const encoded = toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket }));
        const decoded = fromBinary(CreateTicketRequestSchema, encoded).ticket!;
        const receivedId = decoded.id;
        decoded.id = receivedId.toLowerCase();
        decoded.createdAt = create(TimestampSchema, { seconds: s, nanos: n });
        const received = new BinaryReader(encoded);
        let ticketBytes: Uint8Array = new Uint8Array();
        while (received.pos < received.len) {
          const [number, wireType] = received.tag();
          if (number === TICKET) ticketBytes = received.bytes();
          else received.skip(wireType, number);
        }
        const tail = new BinaryWriter();
        if (decoded.id !== receivedId) tail.tag(TicketSchema.field.id!.number, WireType.LengthDelimited).string(decoded.id);
        tail
          .tag(TicketSchema.field.createdAt!.number, WireType.LengthDelimited)
          .fork()
          .tag(1, WireType.Varint)
          .int64(s)
          .tag(2, WireType.Varint)
          .int32(n)
          .join();
        expect(acknowledgedTicketBytes(decoded, receivedId, encoded)).toEqual(new Uint8Array([...ticketBytes, ...tail.finish()]));
      }),
      { numRuns: 300 },
    );
  });

  it('gives its engine_input back without decoding the rest: absent, present, or given twice', () => {
    const encode = (init: MessageInitShape<typeof TicketSchema>, withInput: boolean) =>
      toBinary(TicketSchema, create(TicketSchema, withInput ? init : { ...init, engineInput: undefined }));
    fc.assert(
      fc.property(ticketArb, fc.boolean(), fc.option(ticketArb), (ticket, withInput, second) => {
        // Two encodings one after the other decode as one merged Ticket: the later engine_input wins.
        const bytes = second ? new Uint8Array([...encode(ticket, withInput), ...encode(second, true)]) : encode(ticket, withInput);
        expect(engineInputOf(bytes)).toEqual(fromBinary(TicketSchema, bytes).engineInput);
      }),
      { numRuns: 300 },
    );
  });

  it("gives the pool's fields back as decoding does: merged encodings, partial created_at, a field of another wire type", () => {
    const CREATED_AT = TicketSchema.field.createdAt!.number;
    const pieces = fc.oneof(
      ticketArb.map((t) => toBinary(TicketSchema, create(TicketSchema, t))),
      // created_at with one of its fields only: occurrences merge field by field.
      fc
        .tuple(fc.boolean(), fc.bigInt({ min: -(2n ** 40n), max: 2n ** 40n }), fc.integer({ min: 0, max: 999_999_999 }))
        .map(([seconds, s, n]) => {
          const ts = new BinaryWriter();
          if (seconds) ts.tag(1, WireType.Varint).int64(s);
          else ts.tag(2, WireType.Varint).int32(n);
          return new BinaryWriter().tag(CREATED_AT, WireType.LengthDelimited).bytes(ts.finish()).finish();
        }),
      // created_at with neither field: an epoch timestamp, as encoding writes it.
      fc.constant(new BinaryWriter().tag(CREATED_AT, WireType.LengthDelimited).bytes(new Uint8Array()).finish()),
      // A field of the pool's with a wire type the schema does not give it.
      fc
        .constantFrom(
          TicketSchema.field.rulesetIds!.number,
          TicketSchema.field.engineInput!.number,
          CREATED_AT,
          TicketSchema.field.metadata!.number,
        )
        .map((field) => new BinaryWriter().tag(field, WireType.Varint).uint32(7).finish()),
    );
    const outcome = (read: () => unknown) => {
      try {
        return { ok: read() };
      } catch {
        return { threw: true };
      }
    };
    fc.assert(
      fc.property(fc.array(pieces, { minLength: 1, maxLength: 4 }), (parts) => {
        const bytes = new Uint8Array(parts.flatMap((p) => [...p]));
        const expected = outcome(() => {
          const { engineInput, rulesetIds, createdAt, metadata } = fromBinary(TicketSchema, bytes);
          return { engineInput, rulesetIds, createdAt, metadata };
        });
        expect(outcome(() => poolFieldsOf(bytes))).toEqual(expected);
        // The match history's walk answers what the pool's reader does, or leaves the bytes to it.
        const wait = waitFieldsOf(bytes);
        if (wait !== undefined) {
          const { engineInput, createdAt } = poolFieldsOf(bytes);
          expect(wait).toEqual({ engineInput, createdAt });
        }
      }),
      { numRuns: 500 },
    );
  });

  it('walks a stored ticket for the match history: engine_input and created_at as the reader gives them', () => {
    fc.assert(
      fc.property(ticketArb, fc.option(ticketArb), (ticket, second) => {
        const encode = (t: typeof ticket) => toBinary(TicketSchema, create(TicketSchema, t));
        const bytes = second ? new Uint8Array([...encode(ticket), ...encode(second)]) : encode(ticket);
        const { engineInput, createdAt } = poolFieldsOf(bytes);
        // Every ticket a service stores has this shape (created_at's fields not negative, seconds below 2^53).
        expect(waitFieldsOf(bytes)).toEqual({ engineInput, createdAt });
      }),
      { numRuns: 300 },
    );
  });
});

/**
 * What parseTicketEngineInput answered before it read the wire form itself: the generic decoder, then the
 * same checks and the same folding. The direct reader must answer exactly this, errors included.
 */
function decodedEngineInput(bytes: Uint8Array, field: string): ParsedEngineInput | string {
  let input: EngineInput;
  try {
    input = fromBinary(EngineInputSchema, bytes);
  } catch (err) {
    return `${field} does not parse as matchmaker.engines.standard.v1.EngineInput: ${(err as Error).message}`;
  }
  if (input.players.length === 0) return `${field} has no players: a ticket needs at least one`;
  const bad = input.players.findIndex((p) => !Number.isFinite(p.mmr));
  if (bad >= 0) return `${field}.players[${bad}].mmr must be a finite number, got ${input.players[bad]!.mmr}`;
  const latencies = new Map<string, { ms: number; measuredBy: number }>();
  for (const player of input.players) {
    for (const [host, ms] of Object.entries(player.latencies)) {
      const seen = latencies.get(host);
      if (seen) {
        seen.ms = Math.max(seen.ms, ms);
        seen.measuredBy++;
      } else latencies.set(host, { ms, measuredBy: 1 });
    }
  }
  return {
    playerIds: input.players.map((p) => p.playerId),
    mmrMean: input.players.reduce((sum, p) => sum + p.mmr, 0) / input.players.length,
    latencies,
    attributes: new Map(Object.entries(input.attributes).map(([name, a]) => [name, { values: a.values, accepts: a.accepts }])),
  };
}

function parsedOrError(bytes: Uint8Array): ParsedEngineInput | string {
  try {
    return parseTicketEngineInput(bytes, 'ticket-id', 'ticket.engine_input');
  } catch (err) {
    return (err as Error).message;
  }
}

/** Maps compared with their order: the order of `latencies` is the order host keys are interned in. */
const ordered = (p: ParsedEngineInput | string) =>
  typeof p === 'string'
    ? p
    : { ...p, latencies: [...p.latencies], attributes: [...p.attributes].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) };

describe('engine_input as CreateTicket parses it', () => {
  const encode = (init: MessageInitShape<typeof EngineInputSchema>) => toBinary(EngineInputSchema, create(EngineInputSchema, init));

  // One players field holding two Player encodings back to back is one merged player, whose latency map may
  // then list integer-like keys out of order and repeat keys; an attributes entry whose value is given twice
  // merges the two Attributes.
  const merged = fc.tuple(engineInputArb, engineInputArb).map(([a, b]) => {
    const writer = new BinaryWriter();
    const players = (init: typeof a) => init.players.map((p) => toBinary(PlayerSchema, create(PlayerSchema, p)));
    const [pa, pb] = [players(a), players(b)];
    for (const [i, p] of pa.entries()) writer.tag(1, WireType.LengthDelimited).bytes(new Uint8Array([...p, ...(pb[i] ?? [])]));
    const attribute = (x: { values: string[]; accepts: string[] }) => toBinary(AttributeSchema, create(AttributeSchema, x));
    for (const [name, x] of Object.entries(a.attributes)) {
      const y = b.attributes[name];
      const entry = writer.tag(2, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string(name);
      entry.tag(2, WireType.LengthDelimited).bytes(attribute(x));
      if (y) entry.tag(2, WireType.LengthDelimited).bytes(attribute(y));
      entry.join();
    }
    return writer.finish();
  });

  it('reads what decoding reads: concatenated and merged encodings (repeated players, replaced and repeated map keys)', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(engineInputArb.map(encode), merged), { minLength: 1, maxLength: 3 }), (parts) => {
        const bytes = new Uint8Array(parts.flatMap((part) => [...part]));
        expect(ordered(parsedOrError(bytes))).toEqual(ordered(decodedEngineInput(bytes, 'ticket.engine_input')));
      }),
      { numRuns: 500 },
    );
  });

  it('accepts and refuses what decoding accepts and refuses: truncated, corrupted and arbitrary bytes', () => {
    const corrupted = fc.tuple(engineInputArb, fc.nat(), fc.integer({ min: 0, max: 255 }), fc.nat()).map(([init, at, byte, cut]) => {
      const bytes = encode(init);
      if (bytes.length === 0) return bytes;
      bytes[at % bytes.length] = byte;
      return bytes.subarray(0, bytes.length - (cut % 3));
    });
    fc.assert(
      fc.property(fc.oneof(corrupted, fc.uint8Array({ maxLength: 60 })), (bytes) => {
        expect(ordered(parsedOrError(bytes))).toEqual(ordered(decodedEngineInput(bytes, 'ticket.engine_input')));
      }),
      { numRuns: 2000 },
    );
  });

  it("gives a match's player ids as the parse does, without parsing the rest (playerIdsOf)", () => {
    const accepted = fc
      .array(fc.oneof(engineInputArb.map(encode), merged), { minLength: 1, maxLength: 3 })
      .map((parts) => new Uint8Array(parts.flatMap((part) => [...part])));
    fc.assert(
      fc.property(accepted, (bytes) => {
        const parsed = parsedOrError(bytes);
        // Refused inputs (no players, an mmr that is no number) never reach a match.
        fc.pre(typeof parsed !== 'string' && parsed.playerIds.length > 0);
        expect(playerIdsOf(bytes, 't-1')).toEqual(parsed.playerIds);
      }),
      { numRuns: 500 },
    );
    expect(playerIdsOf(undefined, 't-1')).toEqual(['t-1']);
  });

  it('reads an absent engine_input as one player, the ticket itself', () => {
    expect(ordered(parseTicketEngineInput(undefined, 't-1', 'ticket.engine_input'))).toEqual({
      playerIds: ['t-1'],
      mmrMean: 0,
      latencies: [],
      attributes: [],
    });
  });
});
