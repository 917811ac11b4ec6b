// Explaining a ticket (docs/explain-and-statistics.md) over HTTP (GET .../tickets/{id}:explain) and gRPC
// (matchmaker.admin.v1.MatchmakerAdminService/ExplainTicket), against the real service: a handmade pool whose
// counts per rule are known, the rule the tick recorded against a ticket its spread bound keeps waiting, a
// matched ticket reported resolved, and the errors.
import { create, fromJson, type JsonValue } from '@bufbuild/protobuf';
import { credentials, makeGenericClientConstructor, type Client } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpcServiceDefinition, MatchmakerAdminService } from '../../src/api/grpc-definitions.js';
import {
  AnswerScope,
  ExplainTicketRequestSchema,
  ExplainTicketResponseSchema,
  type ExplainTicketResponse,
} from '../../src/gen/matchmaker/admin/v1/admin_pb.js';
import { stringify } from 'yaml';
import { createTrio, memberInput, PAIRS_QUEUE, refusedAfter, solo, TARGET_COUNTS, TRIO_QUEUE } from '../support/explain-pool.js';
import { uuid } from '../support/fixtures.js';
import { pollUntil } from '../support/queues.js';
import { useService } from '../support/service.js';
import { grpcTransport, grpcUnary, httpRequest, httpResult, type Result, type Transport } from '../support/transports.js';

/**
 * Two rulesets without require_host: "wide" widens linearly (its base every second) and may form without a
 * common host after 60 s; "anyhost" does not widen and may form without a common host at once.
 */
const WIDENING_QUEUE = stringify({
  config: {
    tick_interval_ms: 3_600_000,
    rulesets: [
      { id: 'wide', teams: 1, team_size: 3, max_skill_spread: 1.0, expansion: { curve: 'linear', over_secs: 1, any_host_after_secs: 60 } },
      { id: 'anyhost', teams: 1, team_size: 3, max_skill_spread: 1.0, expansion: { curve: 'none', any_host_after_secs: 0 } },
    ],
  },
});

const env = useService({ queues: { 'explain.trio': TRIO_QUEUE, 'explain.pairs': PAIRS_QUEUE, 'explain.widening': WIDENING_QUEUE } });

const AdminClient = makeGenericClientConstructor(grpcServiceDefinition(MatchmakerAdminService), 'MatchmakerAdminService');
let admin: Client;
let core: Transport;
let trio: Awaited<ReturnType<typeof createTrio>>;
/** When every member of the trio pool was in. */
let trioCreatedMs: number;

beforeAll(async () => {
  admin = new AdminClient(`127.0.0.1:${env.service.grpcPort}`, credentials.createInsecure());
  core = grpcTransport(env.service);
  trio = await createTrio('explain.trio', async (ticket) => expect((await core.createTicket(ticket)).ok).toBe(true));
  trioCreatedMs = Date.now();
});
afterAll(() => {
  admin.close();
  core.close();
});

/** ExplainTicket over one transport, as the response message (HTTP's JSON read back through the schema). */
const explainers: [string, (queueId: string, ticketId: string) => Promise<Result<ExplainTicketResponse>>][] = [
  [
    'http',
    async (queueId, ticketId) => {
      const path = `/admin/v1/queues/${encodeURIComponent(queueId)}/tickets/${encodeURIComponent(ticketId)}:explain`;
      const result = httpResult(await httpRequest(env.service, 'GET', path));
      return result.ok ? { ok: true, value: fromJson(ExplainTicketResponseSchema, result.value as JsonValue) } : result;
    },
  ],
  ['grpc', (queueId, ticketId) => grpcUnary(admin, 'ExplainTicket', create(ExplainTicketRequestSchema, { queueId, ticketId }))],
];

describe.each(explainers)('ExplainTicket over %s', (_, explain) => {
  const ok = async (queueId: string, ticketId: string) => {
    const result = await explain(queueId, ticketId);
    if (!result.ok) throw new Error(`${result.code}: ${result.message}`);
    return result.value;
  };

  it('a ticket its spread bound keeps waiting: the counts per rule, the bounds, and skill_spread recorded by the tick', async () => {
    const x = await pollUntil(
      () => ok('explain.trio', trio.target),
      (v) => refusedAfter(v, trioCreatedMs),
    );
    expect(x).toMatchObject({ queueId: 'explain.trio', ticketId: trio.target, state: 'active', matchId: '', scope: AnswerScope.LEADER });
    expect(x.lastRefusal?.rule).toBe('skill_spread');
    // The tick that recorded it ran after the ticket was created, and not after the answer.
    const tickAtMs = Number(x.lastRefusal!.tickAt!.seconds) * 1000 + x.lastRefusal!.tickAt!.nanos / 1e6;
    const createdMs = Number(x.createdAt!.seconds) * 1000 + x.createdAt!.nanos / 1e6;
    expect(tickAtMs).toBeGreaterThanOrEqual(createdMs);
    expect(x.waitSecs).toBeGreaterThan(0);
    expect(x.waitSecs).toBeLessThan(60);
    expect(x.rulesets).toHaveLength(1);
    const [rs] = x.rulesets;
    expect(rs!.rulesetId).toBe('trio');
    expect(rs!.bounds).toMatchObject({ maxSkillSpread: 1, maxTeamImbalance: 1, maxLatencyMs: 100, requireHost: true });
    expect(rs!.candidates).toMatchObject({ ...TARGET_COUNTS, all: 0, playersAll: 0 });
    // The one relaxation step, at an hour of waiting.
    expect(rs!.nextRelaxation?.atWaitSecs).toBe(3600);
    expect(rs!.nextRelaxation?.continuous).toBe(false);
    expect(rs!.nextRelaxation!.inSecs).toBeCloseTo(3600 - x.waitSecs, 0);
    // Nothing was matched in this queue: no estimate, and the answer says why.
    expect(x.estimatedWait).toMatchObject({ available: false, basedOnTickets: 0 });
    expect(x.estimatedWait!.reason).toMatch(/too little history/);
  });

  it("another member's counts follow from the same pool: the duo fits with no other party of two", async () => {
    const x = await ok('explain.trio', trio.duo);
    // The duo (0.51, ranked, eu-west 50): the target is the other party of 2; high and low are beyond its
    // window, casual is casual, far has no host within 100 ms of it.
    expect(x.rulesets[0]!.candidates).toMatchObject({
      inRuleset: 5,
      partyFits: 4,
      skillWithinSpread: 3,
      attributesCompatible: 4,
      acceptableHost: 4,
      all: 0,
    });
  });

  it('bounds that widen with wait: those in force now, still widening; a common host required until any_host_after_secs', async () => {
    const id = uuid();
    const input = memberInput({ players: 1, mmr: 0.5, mode: 'ranked', latencies: { 'eu-west': 50 } });
    expect((await core.createTicket({ id, queueId: 'explain.widening', engineInput: input })).ok).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const x = await ok('explain.widening', id);
    const [wide, anyhost] = x.rulesets;
    expect([wide!.rulesetId, anyhost!.rulesetId]).toEqual(['wide', 'anyhost']);
    // Linear over 1 s: the base grown by the wait in seconds (the answer's wait is the one its bounds were taken at).
    expect(wide!.bounds!.maxSkillSpread).toBeCloseTo(1 + x.waitSecs, 9);
    expect(wide!.bounds!.maxSkillSpread).toBeGreaterThan(1.2);
    expect(wide!.nextRelaxation).toMatchObject({ continuous: true, inSecs: 0 });
    expect(wide!.bounds).toMatchObject({ requireHost: false, hostRequired: true });
    expect(anyhost!.bounds).toMatchObject({ maxSkillSpread: 1, requireHost: false, hostRequired: false });
    expect(anyhost!.nextRelaxation).toBeUndefined();
  });

  it('a matched ticket is resolved, with its match and its wait until it', async () => {
    const [a, b] = [uuid(), uuid()];
    for (const id of [a, b]) expect((await core.createTicket({ id, queueId: 'explain.pairs', engineInput: solo() })).ok).toBe(true);
    const x = await pollUntil(
      () => ok('explain.pairs', a),
      (v) => v.state === 'resolved',
    );
    expect(x.state).toBe('resolved');
    expect(x.matchId).toMatch(/^[0-9a-f-]{36}$/);
    expect(x.rulesets).toEqual([]);
    expect(x.lastRefusal).toBeUndefined();
    expect(x.waitSecs).toBeGreaterThanOrEqual(0);
    expect(x.waitSecs).toBeLessThan(30);
    expect((await ok('explain.pairs', b)).matchId).toBe(x.matchId);
  });

  it('an unknown queue or ticket is NOT_FOUND; a ticket id that is not a UUID is INVALID_ARGUMENT', async () => {
    expect(await explain('explain.nope', trio.target)).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    const unknown = await explain('explain.trio', uuid());
    expect(unknown).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    expect((unknown as { message: string }).message).toMatch(/is not in queue "explain.trio"/);
    // A ticket of another queue is not this queue's.
    expect(await explain('explain.pairs', trio.target)).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    expect(await explain('explain.trio', 'not-a-uuid')).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
  });
});

describe('ExplainTicket requests over gRPC', () => {
  it('an empty queue_id is INVALID_ARGUMENT, and the ticket id is matched in any case', async () => {
    const call = (queueId: string, ticketId: string) =>
      grpcUnary(admin, 'ExplainTicket', create(ExplainTicketRequestSchema, { queueId, ticketId }));
    expect(await call('', trio.target)).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    const upper = await call('explain.trio', trio.target.toUpperCase());
    expect(upper).toMatchObject({ ok: true, value: { ticketId: trio.target, state: 'active' } });
  });

  it('undecodable request bytes are INVALID_ARGUMENT', async () => {
    const raw = new (makeGenericClientConstructor(
      {
        ExplainTicket: {
          path: `/${MatchmakerAdminService.typeName}/ExplainTicket`,
          requestStream: false,
          responseStream: false,
          requestSerialize: (b: Buffer) => b,
          requestDeserialize: (b: Buffer) => b,
          responseSerialize: (b: Buffer) => b,
          responseDeserialize: (b: Buffer) => b,
        },
      },
      'Raw',
    ))(`127.0.0.1:${env.service.grpcPort}`, credentials.createInsecure());
    try {
      expect(await grpcUnary(raw, 'ExplainTicket', Buffer.from([0x0a, 0xff]))).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' });
    } finally {
      raw.close();
    }
  });
});
