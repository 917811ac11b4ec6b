// A queue's statistics (docs/explain-and-statistics.md) over HTTP (GET /admin/v1/queues/{id}/statistics) and
// gRPC (matchmaker.admin.v1.MatchmakerAdminService/GetQueueStatistics), against the real service: the tickets
// and players waiting per ruleset, the matches and waits of the window, the estimate for a new ticket once the
// history holds enough matched tickets, and NOT_FOUND for an unknown queue.
import { create, fromJson, type JsonValue } from '@bufbuild/protobuf';
import { credentials, makeGenericClientConstructor, type Client } from '@grpc/grpc-js';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grpcServiceDefinition, MatchmakerAdminService } from '../../src/api/grpc-definitions.js';
import {
  AnswerScope,
  GetQueueStatisticsRequestSchema,
  GetQueueStatisticsResponseSchema,
  type GetQueueStatisticsResponse,
} from '../../src/gen/matchmaker/admin/v1/admin_pb.js';
import { createTrio, PAIRS_QUEUE, solo, TRIO_QUEUE } from '../support/explain-pool.js';
import { uuid } from '../support/fixtures.js';
import { pollUntil } from '../support/queues.js';
import { useService } from '../support/service.js';
import { grpcTransport, grpcUnary, httpRequest, httpResult, type Result, type Transport } from '../support/transports.js';

/** Two rulesets: a ticket of "both" counts in each, one of "solo" only in "solo". */
const TWO_RULESETS = stringify({
  config: {
    tick_interval_ms: 3_600_000,
    rulesets: [
      { id: 'solo', teams: 2, team_size: 5 },
      { id: 'both', teams: 2, team_size: 5 },
    ],
  },
});

const env = useService({ queues: { 'stats.trio': TRIO_QUEUE, 'stats.pairs': PAIRS_QUEUE, 'stats.two': TWO_RULESETS } });

const AdminClient = makeGenericClientConstructor(grpcServiceDefinition(MatchmakerAdminService), 'MatchmakerAdminService');
let admin: Client;
let core: Transport;
/** Tickets matched in stats.pairs before the tests ran. */
const PAIRED = 12;

beforeAll(async () => {
  admin = new AdminClient(`127.0.0.1:${env.service.grpcPort}`, credentials.createInsecure());
  core = grpcTransport(env.service);
  await createTrio('stats.trio', async (ticket) => expect((await core.createTicket(ticket)).ok).toBe(true));
  for (let i = 0; i < PAIRED; i++)
    expect((await core.createTicket({ id: uuid(), queueId: 'stats.pairs', engineInput: solo() })).ok).toBe(true);
  for (const rulesetIds of [['solo'], [], ['solo']]) {
    expect((await core.createTicket({ id: uuid(), queueId: 'stats.two', engineInput: solo(), rulesetIds })).ok).toBe(true);
  }
});
afterAll(() => {
  admin.close();
  core.close();
});

const fetchers: [string, (queueId: string) => Promise<Result<GetQueueStatisticsResponse>>][] = [
  [
    'http',
    async (queueId) => {
      const result = httpResult(await httpRequest(env.service, 'GET', `/admin/v1/queues/${encodeURIComponent(queueId)}/statistics`));
      return result.ok ? { ok: true, value: fromJson(GetQueueStatisticsResponseSchema, result.value as JsonValue) } : result;
    },
  ],
  ['grpc', (queueId) => grpcUnary(admin, 'GetQueueStatistics', create(GetQueueStatisticsRequestSchema, { queueId }))],
];

describe.each(fetchers)('GetQueueStatistics over %s', (_, statistics) => {
  const ok = async (queueId: string) => {
    const result = await statistics(queueId);
    if (!result.ok) throw new Error(`${result.code}: ${result.message}`);
    return result.value;
  };

  it('the tickets and players waiting, per ruleset and for the queue; no matches, no waits, no estimate', async () => {
    const s = await ok('stats.trio');
    expect(s).toMatchObject({ queueId: 'stats.trio', scope: AnswerScope.LEADER, notes: [] });
    expect(s.windowSecs).toBeGreaterThan(0);
    expect(s.windowSecs).toBeLessThanOrEqual(300);
    const expected = { ticketsWaiting: 6, playersWaiting: 8, matches: 0, matchedTickets: 0, matchesPerMinute: 0, waitP50Secs: 0 };
    expect(s.queue).toMatchObject({ rulesetId: '', ...expected });
    expect(s.rulesets).toHaveLength(1);
    expect(s.rulesets[0]).toMatchObject({ rulesetId: 'trio', ...expected });
    expect(s.queue!.estimatedWaitNewTicket).toMatchObject({ available: false, basedOnTickets: 0 });
    expect(s.queue!.estimatedWaitNewTicket!.reason).toMatch(/too little history: 0 ticket\(s\) matched in the last 300 s \(10 needed\)/);
  });

  it('a ticket counts in each of its rulesets, once for the queue', async () => {
    const s = await ok('stats.two');
    expect(s.queue).toMatchObject({ ticketsWaiting: 3, playersWaiting: 3 });
    expect(s.rulesets.map((r) => [r.rulesetId, r.ticketsWaiting])).toEqual([
      ['solo', 3],
      ['both', 1],
    ]);
  });

  it('the matches of the window: their count and rate, the waits, and an estimate once enough tickets were matched', async () => {
    const s = await pollUntil(
      () => ok('stats.pairs'),
      (v) => v.queue?.matchedTickets === PAIRED,
    );
    expect(s.queue).toMatchObject({ ticketsWaiting: 0, playersWaiting: 0, matches: PAIRED / 2, matchedTickets: PAIRED });
    expect(s.rulesets[0]).toMatchObject({ rulesetId: 'pairs', matches: PAIRED / 2, matchedTickets: PAIRED });
    // The rate is over the span the history covers (this process started moments ago).
    expect(s.queue!.matchesPerMinute).toBeCloseTo(((PAIRED / 2) * 60) / s.windowSecs, 6);
    const { waitP50Secs: p50, waitP95Secs: p95, waitP99Secs: p99 } = s.queue!;
    expect(0 <= p50 && p50 <= p95 && p95 <= p99 && p99 < 30).toBe(true);
    // 12 matched tickets: enough for the estimate of a new ticket, the median wait.
    expect(s.queue!.estimatedWaitNewTicket).toMatchObject({ available: true, basedOnTickets: PAIRED, remainingSecs: p50 });
  });

  it('an unknown queue is NOT_FOUND', async () => {
    expect(await statistics('stats.nope')).toMatchObject({ ok: false, code: 'NOT_FOUND' });
  });
});
