// Tickets created through the API turn into match.created outcomes with a correct EngineOutput.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MatchSchema, TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { EngineOutputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { MatchCreatedSchema, OutcomeSchema } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { matchCreatedOutcome } from '../../src/outcomes/outcome-encoding.js';
import { stampOf } from '../../src/outcomes/outcome-factory.js';
import { withProducer } from '../../src/store/outcome-record.js';
import { engineInput, ticketArb, timestampArb, uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { useService } from '../support/service.js';
import { grpcTransport, httpRequest, type Transport } from '../support/transports.js';
import type { MatchJson, OutcomeJson } from '../support/outcomes.js';

const env = useService({
  queues: {
    'match.duel': duelQueue(50, {
      config: { engine: { attribute_filters: [{ name: 'mode', mode: 'overlap' }] } },
      ruleset: { max_latency_ms: 100 },
    }),
    'match.trio': `
config:
  tick_interval_ms: 50
  rulesets:
    - id: 3v3
      teams: 2
      team_size: 3
      require_host: true
      max_latency_ms: 80
`,
  },
});

async function matchesOf(queueId: string): Promise<MatchJson[]> {
  const res = await httpRequest(env.service, 'GET', `/admin/v1/outcomes?queue_id=${queueId}&limit=10000`);
  return (res.body.outcomes as OutcomeJson[]).filter((o) => o.kind === 'match.created').map((o) => o.matchCreated!.match);
}

async function matchContaining(queueId: string, ticketId: string): Promise<MatchJson | undefined> {
  const found = await pollUntil(
    async () => (await matchesOf(queueId)).find((m) => m.tickets.some((t) => t.id === ticketId)),
    (m) => m !== undefined,
  );
  return found;
}

const solo = (playerId: string, mmr: number, latencies: Record<string, number>, mode?: string[]) =>
  engineInput({ players: [{ playerId, mmr, latencies }], attributes: mode ? { mode: { values: mode, accepts: mode } } : {} });

describe('matching', () => {
  it('forms a 1v1 match with its tickets, metadata verbatim, teams, host and attributes', async () => {
    const api: Transport = grpcTransport(env.service);
    const [a, b] = [uuid(), uuid()];
    const metaA = new Uint8Array([1, 2, 3]);
    expect(
      (
        await api.createTicket({
          id: a,
          queueId: 'match.duel',
          engineInput: solo('alice', 0.5, { fra: 20, ams: 35 }, ['ranked']),
          metadata: metaA,
        })
      ).ok,
    ).toBe(true);
    expect(
      (await api.createTicket({ id: b, queueId: 'match.duel', engineInput: solo('bob', 0.52, { fra: 40, ams: 30 }, ['ranked', 'casual']) }))
        .ok,
    ).toBe(true);

    const match = await matchContaining('match.duel', a);
    expect(match).toBeDefined();
    expect(match!.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(match!.rulesetId).toBe('duel');
    expect(match!.tickets.map((t) => t.id).sort()).toEqual([a, b].sort());
    expect(match!.tickets.find((t) => t.id === a)!.metadata).toBe(Buffer.from(metaA).toString('base64'));

    const output = fromBinary(EngineOutputSchema, Buffer.from(match!.engineOutput!, 'base64'));
    expect(output.teams.map((t) => t.playerIds.length)).toEqual([1, 1]);
    expect(output.teams.flatMap((t) => t.playerIds).sort()).toEqual(['alice', 'bob']);
    // Worst latency: fra 40, ams 35, so ams is preferred; both are under 100.
    expect(output.host?.preferred).toBe('ams');
    expect([...output.host!.acceptable].sort()).toEqual(['ams', 'fra']);
    expect(output.attributes).toEqual([expect.objectContaining({ name: 'mode', accepts: ['ranked'] })]);

    // The tickets left the pool: they are resolved into this match.
    const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/match.duel/tickets/${a}`);
    expect(stored.body).toMatchObject({ state: 'resolved', matchId: match!.id });
    // Cancelling a ticket in a committed match fails; the match stands.
    const cancel = await api.cancelTicket('match.duel', a);
    expect(cancel).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
    api.close();
  });

  it('keeps parties together and fills 3v3 teams exactly', async () => {
    const api = grpcTransport(env.service);
    const party = (n: number, prefix: string) =>
      engineInput({ players: Array.from({ length: n }, (_, i) => ({ playerId: `${prefix}${i}`, mmr: 0.5, latencies: { fra: 30 } })) });
    const tickets = [
      { id: uuid(), input: party(3, 'p3-') },
      { id: uuid(), input: party(2, 'p2-') },
      { id: uuid(), input: party(1, 's1-') },
    ];
    for (const t of tickets) expect((await api.createTicket({ id: t.id, queueId: 'match.trio', engineInput: t.input })).ok).toBe(true);
    const match = await matchContaining('match.trio', tickets[0]!.id);
    const output = fromBinary(EngineOutputSchema, Buffer.from(match!.engineOutput!, 'base64'));
    const teams = output.teams.map((t) => [...t.playerIds].sort());
    expect(teams.map((t) => t.length)).toEqual([3, 3]);
    expect(teams).toContainEqual(['p3-0', 'p3-1', 'p3-2']);
    expect(teams).toContainEqual(['p2-0', 'p2-1', 's1-0']);
    expect(output.host?.preferred).toBe('fra');
    api.close();
  });

  it('does not form a match that has no acceptable host when the ruleset requires one', async () => {
    const api = grpcTransport(env.service);
    const far = engineInput({
      players: [
        { playerId: 'far', mmr: 0.5, latencies: { sgp: 200 } },
        { playerId: 'far2', mmr: 0.5, latencies: { sgp: 210 } },
        { playerId: 'far3', mmr: 0.5, latencies: { sgp: 220 } },
      ],
    });
    const ids = [uuid(), uuid()];
    for (const id of ids) expect((await api.createTicket({ id, queueId: 'match.trio', engineInput: far })).ok).toBe(true);
    // Several ticks pass; the two parties stay active.
    await new Promise((r) => setTimeout(r, 400));
    for (const id of ids) {
      expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/match.trio/tickets/${id}`)).body.state).toBe('active');
    }
    api.close();
  });

  it('never matches a ticket after a successful cancel, and never matches a ticket twice', async () => {
    const api = grpcTransport(env.service);
    const created: string[] = [];
    const cancelled: string[] = [];
    // A stream of creates and cancels while ticks run every 50 ms.
    for (let i = 0; i < 200; i++) {
      const id = uuid();
      expect((await api.createTicket({ id, queueId: 'match.duel', engineInput: solo(`p${i}`, 0.5, { fra: 20 }) })).ok).toBe(true);
      created.push(id);
      if (i % 3 === 0) {
        const victim = created[Math.floor(Math.random() * created.length)]!;
        const res = await api.cancelTicket('match.duel', victim);
        if (res.ok) cancelled.push(victim);
      }
    }
    await new Promise((r) => setTimeout(r, 300));
    const matches = await matchesOf('match.duel');
    const matchedIds = matches.flatMap((m) => m.tickets.map((t) => t.id));
    expect(new Set(matchedIds).size).toBe(matchedIds.length);
    for (const id of cancelled) expect(matchedIds).not.toContain(id);
    api.close();
  });
});

describe('the match.created outcome as recorded', () => {
  it('decodes to the same Outcome as one encoded whole, with the tickets as stored', () => {
    const matchArb = fc.record({
      id: fc.uuid(),
      engineOutput: fc.uint8Array({ maxLength: 60 }),
      createdAt: timestampArb,
      rulesetId: fc.string({ maxLength: 8 }),
    });
    fc.assert(
      fc.property(
        fc.string({ maxLength: 12 }),
        matchArb,
        fc.array(ticketArb, { maxLength: 6 }),
        fc.uuid(),
        fc.bigInt({ min: 1n, max: (1n << 64n) - 1n }),
        (queueId, match, tickets, producerId, sequence) => {
          const ticketBytes = tickets.map((t) => toBinary(TicketSchema, create(TicketSchema, t)));
          const recorded = fromBinary(
            OutcomeSchema,
            withProducer(
              matchCreatedOutcome(queueId, create(MatchSchema, match), ticketBytes, stampOf(producerId, 0)).bytes,
              producerId,
              sequence,
            ),
          );
          const whole = create(OutcomeSchema, {
            id: recorded.id,
            kind: 'match.created',
            queueId,
            occurredAt: recorded.occurredAt,
            producerId,
            producerSequence: sequence,
            payload: { case: 'matchCreated', value: create(MatchCreatedSchema, { match: { ...match, tickets } }) },
          });
          expect(recorded).toEqual(fromBinary(OutcomeSchema, toBinary(OutcomeSchema, whole)));
        },
      ),
      { numRuns: 200 },
    );
  });
});
