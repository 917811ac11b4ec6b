// The spec's Errors table (and the validation rules of "Operation rules", "Resources and their fields" and
// "Limits") over both transports: the code name, the HTTP status, the x-svc-reason, and that the message
// names the offending field. Transport-level malformed requests are in malformed-requests.test.ts.
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import {
  CreateBackfillRequestRequestSchema,
  CreateTicketRequestSchema,
  ClearQueuePoolRequestSchema,
  CancelTicketRequestSchema,
} from '../../src/gen/matchmaker/core/v1/service_pb.js';
import { LmdbStore } from '../../src/store/lmdb-store.js';
import {
  grpcClient,
  grpcTransport,
  grpcUnary,
  httpRequest,
  httpResult,
  httpTransport,
  TRANSPORTS,
  type Failure,
  type Result,
  type Transport,
} from '../support/transports.js';
import { engineInput, party, uuid } from '../support/fixtures.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, type TestService } from '../support/service.js';
import {
  adminTicket,
  engineInputOfSize,
  healthClient,
  MULTI_RULESET_QUEUE,
  pollUntil,
  rawGrpcClient,
  SMALL_LIMIT_BYTES,
  SMALL_LIMITS_QUEUE,
} from '../support/queues.js';

/** The spec's Errors table: code name to HTTP status (written out here, not taken from src/). */
const HTTP_STATUS = { INVALID_ARGUMENT: 400, NOT_FOUND: 404, FAILED_PRECONDITION: 409, UNAVAILABLE: 503, INTERNAL: 500 } as const;
/** The standard gRPC status numbers of the same codes. */
const GRPC_STATUS = { INVALID_ARGUMENT: 3, NOT_FOUND: 5, FAILED_PRECONDITION: 9, UNAVAILABLE: 14, INTERNAL: 13 } as const;
type SpecCode = keyof typeof HTTP_STATUS;

const MMR_NAN_CASES = [
  ['NaN', Number.NaN],
  ['Infinity', Number.POSITIVE_INFINITY],
  ['-Infinity', Number.NEGATIVE_INFINITY],
] as const;

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const camel = (s: string) => s.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
/** A request field path as the message may spell it: snake_case (proto) or lowerCamelCase (JSON). */
const field = (path: string) =>
  new RegExp(
    path
      .split('.')
      .map((seg) => (seg === camel(seg) ? escapeRe(seg) : `(?:${escapeRe(seg)}|${escapeRe(camel(seg))})`))
      .join('\\.'),
  );

/** Asserts a failure with the code, the transport's status for it, and a message naming `names`. */
function expectError(transport: 'grpc' | 'http', res: Result<unknown>, code: SpecCode, ...names: (string | RegExp)[]): Failure {
  if (res.ok)
    throw new Error(
      `expected ${code}, but the call succeeded: ${JSON.stringify(res.value, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`,
    );
  expect({ code: res.code, httpStatus: res.httpStatus }).toEqual({
    code,
    httpStatus: transport === 'http' ? HTTP_STATUS[code] : undefined,
  });
  expect(typeof res.message).toBe('string');
  for (const n of names) expect(res.message).toMatch(typeof n === 'string' ? field(n) : n);
  return res;
}

/** Seeds tickets as resolved into a committed match whose outcome is not yet delivered, before the service starts. */
async function seedResolvedTickets(dataDir: string, queueId: string, ticketIds: string[]): Promise<void> {
  const store = new LmdbStore({
    path: dataDir,
    onFatal: (err) => {
      throw err;
    },
  });
  await store.commit(
    ticketIds.map((id, i) => ({
      type: 'ticket.put' as const,
      ticket: {
        queueId,
        ticketId: id,
        position: i + 1,
        ticket: toBinary(TicketSchema, create(TicketSchema, { id, queueId, createdAt: timestampNow() })),
        state: 'resolved' as const,
        matchId: uuid(),
        resolvedAtMs: Date.now(),
      },
    })),
  );
  await store.close();
}

const QUEUES = {
  'test.basic': BASIC_QUEUE,
  'test.limits': SMALL_LIMITS_QUEUE,
  'test.multi': MULTI_RULESET_QUEUE,
  'test.retiring-grpc': BASIC_QUEUE,
  'test.retiring-http': BASIC_QUEUE,
};
const COMMITTED = { grpc: uuid(), http: uuid() };

let service: TestService;
beforeAll(async () => {
  const dataDir = tempDir('data');
  await seedResolvedTickets(dataDir, 'test.basic', Object.values(COMMITTED));
  service = await startService({ queues: QUEUES, dataDir });
}, 60_000);
afterAll(async () => {
  await service.stop();
  removeDirs(service.dataDir, service.queueDir);
});

const backfillCount = async (queueId: string) => {
  const res = await httpRequest(service, 'GET', '/admin/v1/queues');
  return (res.body.queues as { queueId: string; backfillRequests: number }[]).find((q) => q.queueId === queueId)!.backfillRequests;
};

/** A CreateTicket that was refused must not have stored the ticket. */
async function expectNotStored(queueId: string, ticketId: string): Promise<void> {
  expect((await adminTicket(service, queueId, ticketId)).status).toBe(404);
}

describe.each(TRANSPORTS)('errors over %s', (name, connect) => {
  let api: Transport;
  let raw: ReturnType<typeof grpcClient>;
  const sentinel = uuid();

  /** CreateTicket / CreateBackfillRequest whose request message has no ticket / backfill_request at all. */
  const createTicketWithoutTicket = async () =>
    name === 'grpc'
      ? grpcUnary(raw, 'CreateTicket', create(CreateTicketRequestSchema))
      : httpResult(await httpRequest(service, 'POST', '/v1/queues/test.basic/tickets', {}));
  const createBackfillWithoutRequest = async () =>
    name === 'grpc'
      ? grpcUnary(raw, 'CreateBackfillRequest', create(CreateBackfillRequestRequestSchema))
      : httpResult(await httpRequest(service, 'POST', '/v1/queues/test.basic/backfills', {}));

  beforeAll(async () => {
    api = connect(service);
    raw = grpcClient(service);
    // Created before every rejected request below; the last test checks it is still there.
    expect((await api.createTicket({ id: sentinel, queueId: 'test.basic', engineInput: party(2), metadata: new Uint8Array([7]) })).ok).toBe(
      true,
    );
  });
  afterAll(() => {
    api.close();
    raw.close();
  });

  describe('INVALID_ARGUMENT / 400', () => {
    it('CreateTicket without ticket.id', async () => {
      expectError(name, await api.createTicket({ queueId: 'test.basic', engineInput: party(1) }), 'INVALID_ARGUMENT', 'ticket.id');
    });

    it.each([
      'not-a-uuid',
      '0123456789abcdef0123456789abcdef',
      '{6f1c3a52-8a9e-4c1b-9d2e-3b4a5c6d7e8f}',
      '6f1c3a52-8a9e-4c1b-9d2e-3b4a5c6d7e8f0',
      '6f1c3a52-8a9e-4c1b-9d2e-3b4a5c6d7e8g',
      ' 6f1c3a52-8a9e-4c1b-9d2e-3b4a5c6d7e8f',
    ])('CreateTicket with ticket.id %j, not a UUID', async (id) => {
      const res = expectError(name, await api.createTicket({ id, queueId: 'test.basic' }), 'INVALID_ARGUMENT', 'ticket.id');
      expect(res.message).toContain(id.trim());
    });

    it('CreateTicket without ticket.queue_id (over HTTP: an empty path segment)', async () => {
      const id = uuid();
      expectError(name, await api.createTicket({ id, queueId: '' }), 'INVALID_ARGUMENT', 'ticket.queue_id');
      await expectNotStored('test.basic', id);
    });

    it('CreateTicket without a ticket message', async () => {
      expectError(name, await createTicketWithoutTicket(), 'INVALID_ARGUMENT', 'ticket');
    });

    it(`ticket.engine_input over max_engine_input_bytes (${SMALL_LIMIT_BYTES}) is refused; exactly the limit is accepted`, async () => {
      const over = uuid();
      const input = engineInputOfSize(SMALL_LIMIT_BYTES + 1);
      expect(input.length).toBe(SMALL_LIMIT_BYTES + 1);
      expectError(
        name,
        await api.createTicket({ id: over, queueId: 'test.limits', engineInput: input }),
        'INVALID_ARGUMENT',
        'ticket.engine_input',
        /max_engine_input_bytes/,
      );
      await expectNotStored('test.limits', over);
      const atLimit = uuid();
      expect((await api.createTicket({ id: atLimit, queueId: 'test.limits', engineInput: engineInputOfSize(SMALL_LIMIT_BYTES) })).ok).toBe(
        true,
      );
      expect((await adminTicket(service, 'test.limits', atLimit)).status).toBe(200);
    });

    it(`ticket.metadata over max_metadata_bytes (${SMALL_LIMIT_BYTES}) is refused; exactly the limit is accepted`, async () => {
      const over = uuid();
      const res = await api.createTicket({ id: over, queueId: 'test.limits', metadata: new Uint8Array(SMALL_LIMIT_BYTES + 1).fill(1) });
      expectError(name, res, 'INVALID_ARGUMENT', 'ticket.metadata', /max_metadata_bytes/);
      await expectNotStored('test.limits', over);
      const atLimit = uuid();
      expect(
        (await api.createTicket({ id: atLimit, queueId: 'test.limits', metadata: new Uint8Array(SMALL_LIMIT_BYTES).fill(1) })).ok,
      ).toBe(true);
      expect((await adminTicket(service, 'test.limits', atLimit)).status).toBe(200);
    });

    it('the default limits are 32 KiB of engine_input and 4 KiB of metadata', async () => {
      const tooBigInput = uuid();
      const input = engineInputOfSize(32 * 1024 + 1);
      expectError(
        name,
        await api.createTicket({ id: tooBigInput, queueId: 'test.basic', engineInput: input }),
        'INVALID_ARGUMENT',
        'ticket.engine_input',
      );
      const tooBigMetadata = uuid();
      const metadata = new Uint8Array(4 * 1024 + 1).fill(2);
      expectError(
        name,
        await api.createTicket({ id: tooBigMetadata, queueId: 'test.basic', metadata }),
        'INVALID_ARGUMENT',
        'ticket.metadata',
      );
      await expectNotStored('test.basic', tooBigInput);
      await expectNotStored('test.basic', tooBigMetadata);
      const ok = await api.createTicket({
        id: uuid(),
        queueId: 'test.basic',
        engineInput: engineInputOfSize(32 * 1024),
        metadata: metadata.subarray(1),
      });
      expect(ok.ok).toBe(true);
    });

    it(`backfill_request.metadata and engine_input over the queue's limits`, async () => {
      const matchId = uuid();
      const before = await backfillCount('test.limits');
      const metadata = new Uint8Array(SMALL_LIMIT_BYTES + 1).fill(3);
      expectError(
        name,
        await api.createBackfillRequest({ queueId: 'test.limits', matchId, metadata }),
        'INVALID_ARGUMENT',
        'backfill_request.metadata',
        /max_metadata_bytes/,
      );
      const engine = engineInputOfSize(SMALL_LIMIT_BYTES + 1);
      expectError(
        name,
        await api.createBackfillRequest({ queueId: 'test.limits', matchId, engineInput: engine }),
        'INVALID_ARGUMENT',
        'backfill_request.engine_input',
        /max_engine_input_bytes/,
      );
      expect(await backfillCount('test.limits')).toBe(before);
    });

    it('CreateBackfillRequest without backfill_request.match_id', async () => {
      expectError(name, await api.createBackfillRequest({ queueId: 'test.basic' }), 'INVALID_ARGUMENT', 'backfill_request.match_id');
    });

    it('CreateBackfillRequest with backfill_request.match_id not a UUID', async () => {
      const res = expectError(
        name,
        await api.createBackfillRequest({ queueId: 'test.basic', matchId: 'match-1' }),
        'INVALID_ARGUMENT',
        'backfill_request.match_id',
      );
      expect(res.message).toContain('match-1');
    });

    it('CreateBackfillRequest with a backfill_request.id that is given but not a UUID', async () => {
      const before = await backfillCount('test.basic');
      const res = expectError(
        name,
        await api.createBackfillRequest({ id: 'bf-1', queueId: 'test.basic', matchId: uuid() }),
        'INVALID_ARGUMENT',
        'backfill_request.id',
      );
      expect(res.message).toContain('bf-1');
      expect(await backfillCount('test.basic')).toBe(before);
    });

    it('CreateBackfillRequest without backfill_request.queue_id (over HTTP: an empty path segment)', async () => {
      expectError(name, await api.createBackfillRequest({ queueId: '', matchId: uuid() }), 'INVALID_ARGUMENT', 'backfill_request.queue_id');
    });

    it('CreateBackfillRequest without a backfill_request message', async () => {
      expectError(name, await createBackfillWithoutRequest(), 'INVALID_ARGUMENT', 'backfill_request');
    });

    it('CancelTicket with a ticket_id that is not a UUID, or without queue_id', async () => {
      const res = expectError(name, await api.cancelTicket('test.basic', 'not-a-uuid'), 'INVALID_ARGUMENT', 'ticket_id');
      expect(res.message).toContain('not-a-uuid');
      expectError(name, await api.cancelTicket('', uuid()), 'INVALID_ARGUMENT', 'queue_id');
    });

    it('ReactivateTickets with a ticket id that is not a UUID, or without queue_id', async () => {
      const res = expectError(name, await api.reactivateTickets('test.basic', [uuid(), 'nope']), 'INVALID_ARGUMENT', 'ticket_ids[1]');
      expect(res.message).toContain('nope');
      expectError(name, await api.reactivateTickets('', [uuid()]), 'INVALID_ARGUMENT', 'queue_id');
    });

    it('CancelBackfillRequests with a backfill id that is not a UUID, or without queue_id', async () => {
      const keep = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid() });
      expect(keep.ok).toBe(true);
      const before = await backfillCount('test.basic');
      const keepId = keep.ok ? keep.value.backfillId : '';
      const res = expectError(
        name,
        await api.cancelBackfillRequests('test.basic', ['bogus', keepId]),
        'INVALID_ARGUMENT',
        'backfill_ids[0]',
      );
      expect(res.message).toContain('bogus');
      expectError(name, await api.cancelBackfillRequests('', [keepId]), 'INVALID_ARGUMENT', 'queue_id');
      // The refused call removed nothing, not even the valid id it listed.
      expect(await backfillCount('test.basic')).toBe(before);
    });
  });

  describe('NOT_FOUND / 404', () => {
    it('CreateTicket on a queue that does not exist', async () => {
      const id = uuid();
      const queueId = `test.missing-${name}`;
      expectError(name, await api.createTicket({ id, queueId, engineInput: party(1) }), 'NOT_FOUND', queueId);
      const queues = await httpRequest(service, 'GET', '/admin/v1/queues');
      expect((queues.body.queues as { queueId: string }[]).map((q) => q.queueId)).not.toContain(queueId);
    });

    it('CreateBackfillRequest on a queue that does not exist', async () => {
      expectError(name, await api.createBackfillRequest({ queueId: 'test.missing', matchId: uuid() }), 'NOT_FOUND', 'test.missing');
    });

    it('ClearQueuePool on a queue that does not exist', async () => {
      expectError(name, await api.clearQueuePool('test.missing'), 'NOT_FOUND', 'test.missing');
    });

    it('ClearQueuePool without queue_id (every ClearQueuePool failure is NOT_FOUND)', async () => {
      expectError(name, await api.clearQueuePool(''), 'NOT_FOUND', 'queue_id');
    });
  });

  describe('FAILED_PRECONDITION / 409', () => {
    it('CreateTicket naming a ruleset the queue does not have', async () => {
      const id = uuid();
      const res = expectError(
        name,
        await api.createTicket({ id, queueId: 'test.multi', rulesetIds: ['duel', 'ranked'] }),
        'FAILED_PRECONDITION',
        'ticket.ruleset_ids',
      );
      expect(res.message).toContain('ranked');
      await expectNotStored('test.multi', id);
    });

    it('CreateTicket naming a ruleset twice', async () => {
      const id = uuid();
      const res = expectError(
        name,
        await api.createTicket({ id, queueId: 'test.multi', rulesetIds: ['duel', 'squads', 'duel'] }),
        'FAILED_PRECONDITION',
        'ticket.ruleset_ids',
      );
      expect(res.message).toContain('duel');
      await expectNotStored('test.multi', id);
    });

    it.each([
      ['a truncated length', [0x0a, 0xff]],
      ['a field longer than the payload', [0x0a, 0x05, 0x01]],
      ['an invalid wire type', [0x0f, 0x01]],
    ])('CreateTicket with engine_input that does not parse as EngineInput (%s)', async (_what, bytes) => {
      const id = uuid();
      expectError(
        name,
        await api.createTicket({ id, queueId: 'test.basic', engineInput: new Uint8Array(bytes) }),
        'FAILED_PRECONDITION',
        'ticket.engine_input',
      );
      await expectNotStored('test.basic', id);
    });

    it('CreateTicket with engine_input that has no players', async () => {
      const id = uuid();
      const input = engineInput({ attributes: { game_mode: { values: ['ranked'] } } });
      expect(input.length).toBeGreaterThan(0);
      expectError(
        name,
        await api.createTicket({ id, queueId: 'test.basic', engineInput: input }),
        'FAILED_PRECONDITION',
        'ticket.engine_input',
        /player/,
      );
      await expectNotStored('test.basic', id);
    });

    it.each(MMR_NAN_CASES)('CreateTicket with a player whose mmr is %s (protobuf binary)', async (_label, mmr) => {
      const id = uuid();
      const input = engineInput({
        players: [
          { playerId: 'a', mmr: 0.5 },
          { playerId: 'b', mmr },
        ],
      });
      expectError(
        name,
        await api.createTicket({ id, queueId: 'test.basic', engineInput: input }),
        'FAILED_PRECONDITION',
        'ticket.engine_input',
        /players\[1\]/,
        /mmr/,
      );
      await expectNotStored('test.basic', id);
    });

    it('CreateTicket with a party larger than the team of a ruleset it names', async () => {
      const inDuel = uuid();
      const res = expectError(
        name,
        await api.createTicket({ id: inDuel, queueId: 'test.multi', engineInput: party(2), rulesetIds: ['duel'] }),
        'FAILED_PRECONDITION',
        'ticket.engine_input',
      );
      expect(res.message).toContain('duel');
      // It fits squads but not duel: naming both is still refused, since it names duel.
      const inBoth = uuid();
      expectError(
        name,
        await api.createTicket({ id: inBoth, queueId: 'test.multi', engineInput: party(2), rulesetIds: ['squads', 'duel'] }),
        'FAILED_PRECONDITION',
        'ticket.engine_input',
        /duel/,
      );
      await expectNotStored('test.multi', inDuel);
      await expectNotStored('test.multi', inBoth);
      // A party that fits the team of the ruleset it names is accepted.
      expect((await api.createTicket({ id: uuid(), queueId: 'test.multi', engineInput: party(3), rulesetIds: ['squads'] })).ok).toBe(true);
    });

    it("CreateTicket with no ruleset_ids: a party larger than every ruleset's team is refused, one that fits any is accepted", async () => {
      const tooBig = uuid();
      expectError(
        name,
        await api.createTicket({ id: tooBig, queueId: 'test.multi', engineInput: party(4) }),
        'FAILED_PRECONDITION',
        'ticket.engine_input',
      );
      await expectNotStored('test.multi', tooBig);
      const fitsSquads = uuid();
      expect((await api.createTicket({ id: fitsSquads, queueId: 'test.multi', engineInput: party(2) })).ok).toBe(true);
      const stored = await adminTicket(service, 'test.multi', fitsSquads);
      expect(stored.status).toBe(200);
      expect(stored.body.state).toBe('active');
    });

    it('CreateBackfillRequest without ruleset_id in a queue with several rulesets; accepted in a single-ruleset queue', async () => {
      const before = await backfillCount('test.multi');
      expectError(
        name,
        await api.createBackfillRequest({ queueId: 'test.multi', matchId: uuid() }),
        'FAILED_PRECONDITION',
        'backfill_request.ruleset_id',
      );
      expect(await backfillCount('test.multi')).toBe(before);
      expect((await api.createBackfillRequest({ queueId: 'test.multi', matchId: uuid(), rulesetId: 'squads' })).ok).toBe(true);
      const single = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid() });
      expect(single.ok).toBe(true);
    });

    it('CreateBackfillRequest with a ruleset_id the queue does not have', async () => {
      for (const queueId of ['test.multi', 'test.basic']) {
        const res = expectError(
          name,
          await api.createBackfillRequest({ queueId, matchId: uuid(), rulesetId: 'ranked' }),
          'FAILED_PRECONDITION',
          'backfill_request.ruleset_id',
        );
        expect(res.message).toContain('ranked');
      }
    });

    it('CreateBackfillRequest with engine_input that does not parse, or a non-finite mmr', async () => {
      expectError(
        name,
        await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid(), engineInput: new Uint8Array([0x0a, 0xff]) }),
        'FAILED_PRECONDITION',
        'backfill_request.engine_input',
      );
      const input = engineInput({ players: [{ playerId: 'a', mmr: Number.NaN }] });
      expectError(
        name,
        await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid(), engineInput: input }),
        'FAILED_PRECONDITION',
        'backfill_request.engine_input',
        /mmr/,
      );
    });

    it('CancelTicket, ReactivateTickets and CancelBackfillRequests on a queue that does not exist', async () => {
      const queueId = 'test.missing';
      expectError(name, await api.cancelTicket(queueId, uuid()), 'FAILED_PRECONDITION', queueId);
      expectError(name, await api.reactivateTickets(queueId, [uuid()]), 'FAILED_PRECONDITION', queueId);
      expectError(name, await api.cancelBackfillRequests(queueId, [uuid()]), 'FAILED_PRECONDITION', queueId);
    });

    it('CancelTicket of a ticket already in a committed match whose outcome is undelivered; the ticket stays in the match', async () => {
      const id = COMMITTED[name];
      const before = await adminTicket(service, 'test.basic', id);
      expect(before.status).toBe(200);
      expect(before.body.state).toBe('resolved');
      expectError(name, await api.cancelTicket('test.basic', id), 'FAILED_PRECONDITION', id);
      const after = await adminTicket(service, 'test.basic', id);
      expect(after.body).toEqual(before.body);
    });

    it('a retiring queue (its file removed) refuses CreateTicket and CancelTicket with reason QUEUE_RETIRING', async () => {
      const queueId = `test.retiring-${name}`;
      const waiting = uuid();
      expect((await api.createTicket({ id: waiting, queueId, engineInput: party(1) })).ok).toBe(true);
      rmSync(join(service.queueDir, `${queueId}.yaml`));
      const created = await pollUntil(
        () => api.createTicket({ id: uuid(), queueId }),
        (r) => !r.ok,
        15_000,
      );
      const refused = expectError(name, created, 'FAILED_PRECONDITION', queueId);
      expect(refused.reason).toBe('QUEUE_RETIRING');

      const cancel = expectError(name, await api.cancelTicket(queueId, waiting), 'FAILED_PRECONDITION', queueId);
      expect(cancel.reason).toBe('QUEUE_RETIRING');
      const backfill = expectError(name, await api.createBackfillRequest({ queueId, matchId: uuid() }), 'FAILED_PRECONDITION', queueId);
      expect(backfill.reason).toBe('QUEUE_RETIRING');
      const reactivate = expectError(name, await api.reactivateTickets(queueId, [waiting]), 'FAILED_PRECONDITION', queueId);
      expect(reactivate.reason).toBe('QUEUE_RETIRING');
      // ClearQueuePool reports every failure as NOT_FOUND, a retiring queue included.
      expectError(name, await api.clearQueuePool(queueId), 'NOT_FOUND', queueId);
    });
  });

  describe('accepted edge cases', () => {
    it('slots_requested 0 is accepted (treated as 1) and the request is stored', async () => {
      const before = await backfillCount('test.basic');
      const res = await api.createBackfillRequest({ queueId: 'test.basic', matchId: uuid(), slotsRequested: 0 });
      expect(res.ok).toBe(true);
      expect(await backfillCount('test.basic')).toBe(before + 1);
      if (!res.ok) return;
      const cancel = await api.cancelBackfillRequests('test.basic', [res.value.backfillId]);
      expect(cancel.ok && cancel.value.failedBackfillIds).toEqual([]);
    });
  });

  it('loses nothing: the ticket created before every refused request is still active, unchanged', async () => {
    const stored = await adminTicket(service, 'test.basic', sentinel);
    expect(stored.status).toBe(200);
    expect(stored.body.state).toBe('active');
    expect((stored.body.ticket as { metadata: string }).metadata).toBe(Buffer.from([7]).toString('base64'));
  });
});

describe('one condition, one answer on both transports', () => {
  let grpcApi: Transport;
  let httpApi: Transport;
  let raw: ReturnType<typeof rawGrpcClient>;
  beforeAll(() => {
    grpcApi = grpcTransport(service);
    httpApi = httpTransport(service);
    raw = rawGrpcClient(service);
  });
  afterAll(() => {
    grpcApi.close();
    raw.close();
  });

  const M = '/matchmaker.core.v1.MatchmakerService';
  const cases: [string, SpecCode, (api: Transport) => Promise<Result<unknown>>, string, Uint8Array][] = [
    [
      'ticket.id not a UUID',
      'INVALID_ARGUMENT',
      (api) => api.createTicket({ id: 'x-1', queueId: 'test.basic' }),
      `${M}/CreateTicket`,
      toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket: { id: 'x-1', queueId: 'test.basic' } })),
    ],
    [
      'unknown queue on CreateTicket',
      'NOT_FOUND',
      (api) => api.createTicket({ id: '11111111-2222-4333-8444-555555555555', queueId: 'test.nowhere' }),
      `${M}/CreateTicket`,
      toBinary(
        CreateTicketRequestSchema,
        create(CreateTicketRequestSchema, { ticket: { id: '11111111-2222-4333-8444-555555555555', queueId: 'test.nowhere' } }),
      ),
    ],
    [
      'unknown ruleset',
      'FAILED_PRECONDITION',
      (api) => api.createTicket({ id: '11111111-2222-4333-8444-555555555555', queueId: 'test.basic', rulesetIds: ['nope'] }),
      `${M}/CreateTicket`,
      toBinary(
        CreateTicketRequestSchema,
        create(CreateTicketRequestSchema, {
          ticket: { id: '11111111-2222-4333-8444-555555555555', queueId: 'test.basic', rulesetIds: ['nope'] },
        }),
      ),
    ],
    [
      'unknown queue on CancelTicket',
      'FAILED_PRECONDITION',
      (api) => api.cancelTicket('test.nowhere', '11111111-2222-4333-8444-555555555555'),
      `${M}/CancelTicket`,
      toBinary(
        CancelTicketRequestSchema,
        create(CancelTicketRequestSchema, { queueId: 'test.nowhere', ticketId: '11111111-2222-4333-8444-555555555555' }),
      ),
    ],
    [
      'unknown queue on ClearQueuePool',
      'NOT_FOUND',
      (api) => api.clearQueuePool('test.nowhere'),
      `${M}/ClearQueuePool`,
      toBinary(ClearQueuePoolRequestSchema, create(ClearQueuePoolRequestSchema, { queueId: 'test.nowhere' })),
    ],
  ];

  it.each(cases)(
    '%s: same code, the standard gRPC status number, HTTP status and the same message text',
    async (_what, code, call, path, bytes) => {
      const [overGrpc, overHttp, rawGrpc] = await Promise.all([call(grpcApi), call(httpApi), raw.call(path, bytes)]);
      const g = expectError('grpc', overGrpc, code);
      const h = expectError('http', overHttp, code);
      expect(h.message).toBe(g.message);
      expect(rawGrpc.code).toBe(GRPC_STATUS[code]);
      expect(rawGrpc.details).toBe(g.message);
    },
  );

  it('the HTTP error body is exactly {code, message} as JSON', async () => {
    const res = await httpRequest(service, 'POST', '/v1/queues/test.basic/tickets', { ticket: { id: 'x-1' } });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.body).sort()).toEqual(['code', 'message']);
    expect(res.body.code).toBe('INVALID_ARGUMENT');
  });
});

describe('UNAVAILABLE while the service shuts down', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService({ env: { SHUTDOWN_DRAIN_MS: '3000' } });
  });
  afterAll(async () => {
    await svc.kill();
    removeDirs(svc.dataDir, svc.queueDir);
  });

  it('after SIGTERM: CreateTicket is UNAVAILABLE / 503 on both transports, /readyz 503, health NOT_SERVING, then exit 0', async () => {
    const grpcApi = grpcTransport(svc);
    const httpApi = httpTransport(svc);
    const health = healthClient(svc);
    const raw = rawGrpcClient(svc);
    const createBytes = () =>
      toBinary(CreateTicketRequestSchema, create(CreateTicketRequestSchema, { ticket: { id: uuid(), queueId: 'test.basic' } }));
    try {
      // Both clients are connected and the service is serving before the signal.
      expect((await grpcApi.createTicket({ id: uuid(), queueId: 'test.basic' })).ok).toBe(true);
      expect((await httpApi.createTicket({ id: uuid(), queueId: 'test.basic' })).ok).toBe(true);
      expect((await raw.call('/matchmaker.core.v1.MatchmakerService/CreateTicket', createBytes())).code).toBe(0);
      expect(await health.check('')).toBe('SERVING');
      expect((await httpRequest(svc, 'GET', '/readyz')).status).toBe(200);

      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        svc.process.once('exit', (code, signal) => resolve({ code, signal })),
      );
      expect(svc.process.kill('SIGTERM')).toBe(true);

      const first = await pollUntil(
        () => grpcApi.createTicket({ id: uuid(), queueId: 'test.basic' }),
        (r) => !r.ok,
        10_000,
        20,
      );
      const [overHttp, rawGrpc, readyz, healthAll, healthService, backfillGrpc, backfillHttp] = await Promise.all([
        httpApi.createTicket({ id: uuid(), queueId: 'test.basic' }),
        raw.call('/matchmaker.core.v1.MatchmakerService/CreateTicket', createBytes()),
        httpRequest(svc, 'GET', '/readyz'),
        health.check(''),
        health.check('matchmaker.core.v1.MatchmakerService'),
        grpcApi.createBackfillRequest({ queueId: 'test.basic', matchId: uuid() }),
        httpApi.createBackfillRequest({ queueId: 'test.basic', matchId: uuid() }),
      ]);
      const g = expectError('grpc', first, 'UNAVAILABLE');
      const h = expectError('http', overHttp, 'UNAVAILABLE');
      // The service's own answer (the same text on both), not a client-side connection failure.
      expect(h.message).toBe(g.message);
      expect(rawGrpc.code).toBe(GRPC_STATUS.UNAVAILABLE);
      expect(rawGrpc.details).toBe(g.message);
      expectError('grpc', backfillGrpc, 'UNAVAILABLE');
      expectError('http', backfillHttp, 'UNAVAILABLE');
      expect(readyz.status).toBe(503);
      expect(healthAll).toBe('NOT_SERVING');
      expect(healthService).toBe('NOT_SERVING');

      expect(await exited).toEqual({ code: 0, signal: null });
    } finally {
      grpcApi.close();
      health.close();
      raw.close();
    }
  }, 60_000);
});
