// Plain-JSON engine payloads over HTTP (docs/api-reference.md): `engineInput` of a ticket or backfill
// request given as an EngineInput in protobuf JSON instead of base64. The stored ticket holds the bytes the
// same input sent as base64 gives; the same limits (on the serialized message) and errors naming the field
// apply; and such tickets match like any other.
import { create, fromJson, toBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { EngineInputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil, SMALL_LIMIT_BYTES, SMALL_LIMITS_QUEUE } from '../support/queues.js';
import { BASIC_QUEUE, useService } from '../support/service.js';
import { httpRequest } from '../support/transports.js';

const BASIC_QUEUE_ID = 'test.basic';
const env = useService({ queues: { [BASIC_QUEUE_ID]: BASIC_QUEUE, 'json.duel': duelQueue(50), 'json.limits': SMALL_LIMITS_QUEUE } });

const INPUT = {
  players: [{ playerId: 'alice', mmr: 0.5, latencies: { 'eu-west': 30 } }],
  attributes: { game_mode: { values: ['ranked'] } },
};

const createTicket = (queue: string, ticket: Record<string, unknown>) =>
  httpRequest(env.service, 'POST', `/v1/queues/${queue}/tickets`, { ticket });
const storedInput = async (queue: string, id: string) =>
  ((await httpRequest(env.service, 'GET', `/admin/v1/queues/${queue}/tickets/${id}`)).body.ticket as { engineInput: string }).engineInput;

describe('engineInput as protobuf JSON over HTTP', () => {
  it('stores the same bytes as the input sent as base64', async () => {
    const bytes = toBinary(EngineInputSchema, fromJson(EngineInputSchema, INPUT));
    const [asJson, asBase64, snake] = [uuid(), uuid(), uuid()];
    expect((await createTicket(BASIC_QUEUE_ID, { id: asJson, engineInput: INPUT })).status).toBe(200);
    expect((await createTicket(BASIC_QUEUE_ID, { id: asBase64, engineInput: Buffer.from(bytes).toString('base64') })).status).toBe(200);
    expect((await createTicket(BASIC_QUEUE_ID, { id: snake, engine_input: INPUT })).status).toBe(200);
    const stored = await storedInput(BASIC_QUEUE_ID, asJson);
    expect(Buffer.from(stored, 'base64')).toEqual(Buffer.from(bytes));
    expect(await storedInput(BASIC_QUEUE_ID, asBase64)).toBe(stored);
    expect(await storedInput(BASIC_QUEUE_ID, snake)).toBe(stored);
  });

  it('matches tickets given that way', async () => {
    const ids = [uuid(), uuid()];
    for (const [i, id] of ids.entries()) {
      const res = await createTicket('json.duel', { id, engineInput: { players: [{ playerId: `p${i}`, mmr: 0.5 }] } });
      expect(res.status).toBe(200);
    }
    const matched = await pollUntil(
      async () => (await httpRequest(env.service, 'GET', `/admin/v1/queues/json.duel/tickets/${ids[0]}`)).body.state,
      (state) => state === 'resolved',
    );
    expect(matched).toBe('resolved');
  });

  it('refuses JSON that is not an EngineInput, naming the field', async () => {
    for (const bad of [{ players: 'x' }, { nope: 1 }, { players: [{ mmr: 'high' }] }]) {
      const res = await createTicket(BASIC_QUEUE_ID, { id: uuid(), engineInput: bad });
      expect({ bad, status: res.status, code: res.body.code }).toEqual({ bad, status: 400, code: 'INVALID_ARGUMENT' });
      expect(res.body.message).toContain('ticket.engine_input');
    }
    const backfill = await httpRequest(env.service, 'POST', `/v1/queues/${BASIC_QUEUE_ID}/backfills`, {
      backfillRequest: { matchId: uuid(), engineInput: { players: 'x' } },
    });
    expect([backfill.status, backfill.body.code]).toEqual([400, 'INVALID_ARGUMENT']);
    expect(backfill.body.message).toContain('backfill_request.engine_input');
  });

  it('applies max_engine_input_bytes to the serialized input', async () => {
    // Exactly the limit when serialized: accepted; one byte more: refused, as bytes would be.
    const sized = (bytes: number) => {
      // One character of player id serialized; every further one adds a byte (short strings: a 1-byte length).
      const base = toBinary(EngineInputSchema, create(EngineInputSchema, { players: [{ playerId: 'x', mmr: 0.5 }] })).length;
      return { players: [{ playerId: 'x'.repeat(bytes - base + 1), mmr: 0.5 }] };
    };
    const fits = sized(SMALL_LIMIT_BYTES);
    expect(toBinary(EngineInputSchema, fromJson(EngineInputSchema, fits)).length).toBe(SMALL_LIMIT_BYTES);
    expect((await createTicket('json.limits', { id: uuid(), engineInput: fits })).status).toBe(200);
    const over = await createTicket('json.limits', { id: uuid(), engineInput: sized(SMALL_LIMIT_BYTES + 1) });
    expect([over.status, over.body.code]).toEqual([400, 'INVALID_ARGUMENT']);
    expect(over.body.message).toMatch(/max_engine_input_bytes/);
  });

  it('takes a backfill request whose engineInput is JSON', async () => {
    const res = await httpRequest(env.service, 'POST', `/v1/queues/${BASIC_QUEUE_ID}/backfills`, {
      backfillRequest: { matchId: uuid(), engineInput: INPUT },
    });
    expect(res.status).toBe(200);
  });
});
