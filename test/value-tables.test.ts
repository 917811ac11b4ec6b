// A queue's value tables past 64 entries (docs/engine.md "Filters past 64 values", "Hosts", "Value tables"): an
// attribute filter holds up to 256 distinct values, a filter past 64 values gets further columns in the pool,
// tickets created before the widening keep matching as they did; a queue holds up to 256 host keys, and a match's
// common host may be past the 64th. One more live value or host key is refused with FAILED_PRECONDITION. Real
// service, real sockets, both transports.
import { fromBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { EngineOutputSchema } from '../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { engineInput, uuid } from './support/fixtures.js';
import type { OutcomeJson } from './support/outcomes.js';
import { duelQueue, pollUntil } from './support/queues.js';
import { useService } from './support/service.js';
import { grpcTransport, httpRequest, httpTransport, type Transport } from './support/transports.js';

/** A 1v1 queue with an overlap filter (map) and a containment filter (mode), ticking every 50 ms. */
function wideQueue(): string {
  return stringify({
    config: {
      tick_interval_ms: 50,
      engine: {
        attribute_filters: [
          { name: 'map', mode: 'overlap' },
          { name: 'mode', mode: 'containment' },
        ],
      },
      rulesets: [{ id: 'duel', teams: 2, team_size: 1 }],
    },
  });
}

const env = useService({
  queues: {
    'wide.http': wideQueue(),
    'wide.grpc': wideQueue(),
    // A match needs a host within 100 ms of both players.
    'hosts.http': duelQueue(50, 100),
    'hosts.grpc': duelQueue(50, 100),
  },
});

function ticket(
  api: Transport,
  queueId: string,
  id: string,
  mmr: number,
  attributes: Record<string, { values: string[]; accepts?: string[] }>,
) {
  const input = engineInput({
    players: [{ playerId: `p-${id}`, mmr, latencies: {} }],
    attributes: Object.fromEntries(Object.entries(attributes).map(([k, a]) => [k, { values: a.values, accepts: a.accepts ?? [] }])),
  });
  return api.createTicket({ id, queueId, engineInput: input });
}

async function matchesOf(queueId: string): Promise<OutcomeJson[]> {
  const res = await httpRequest(env.service, 'GET', `/admin/v1/outcomes?queue_id=${queueId}&limit=1000`);
  return (res.body.outcomes as OutcomeJson[]).filter((o) => o.kind === 'match.created');
}

/** Each transport with its own queue: `<prefix>.grpc` and `<prefix>.http`. */
const overBoth = (prefix: string) =>
  [
    ['gRPC', `${prefix}.grpc`, () => grpcTransport(env.service)],
    ['HTTP', `${prefix}.http`, () => httpTransport(env.service)],
  ] as const;

describe.each(overBoth('wide'))('attribute filters past 64 values (%s)', (_name, queueId, transport) => {
  it('match across the widening and refuse the 257th value', async () => {
    const api = transport();
    // Before the widening: one ticket wanting map m-3, one with no map. Far apart in skill (mmr 0 and 100, the
    // default spread never covers it), so nothing matches until a partner arrives next to each.
    const early = uuid();
    const unspecified = uuid();
    expect((await ticket(api, queueId, early, 0, { map: { values: ['m-3'] } })).ok).toBe(true);
    expect((await ticket(api, queueId, unspecified, 100, {})).ok).toBe(true);
    // 250 more maps and modes interned by tickets far from everyone in skill, each alone (1000 + i): the
    // filters widen to four and five columns.
    for (let i = 0; i < 250; i++) {
      const res = await ticket(api, queueId, uuid(), 1000 + 10 * i, {
        map: { values: [`m-${i + 10}`] },
        mode: { values: [`mode-${i}`], accepts: [`mode-${i}`] },
      });
      expect(res.ok, JSON.stringify(res)).toBe(true);
    }
    // Partners: for `early`, a ticket with m-3 among maps past the first column; for `unspecified`, a ticket
    // with only the 200th map (its fourth column).
    const late = uuid();
    const far = uuid();
    expect((await ticket(api, queueId, late, 0.01, { map: { values: ['m-3', 'm-150', 'm-200'] } })).ok).toBe(true);
    expect(
      (await ticket(api, queueId, far, 100.01, { map: { values: ['m-199'] }, mode: { values: ['mode-240'], accepts: ['mode-240'] } })).ok,
    ).toBe(true);
    const matches = await pollUntil(
      () => matchesOf(queueId),
      (ms) => ms.length >= 2,
      10_000,
    );
    const pairs = matches.map((m) => m.matchCreated!.match.tickets.map((t) => t.id).sort());
    expect(pairs.sort()).toEqual([[early, late].sort(), [unspecified, far].sort()].sort());
    // The output names the accepted values past the first 64: the intersection of the tickets' accepts.
    const withFar = matches.find((m) => m.matchCreated!.match.tickets.some((t) => t.id === far))!;
    const { attributes } = fromBinary(EngineOutputSchema, Buffer.from(withFar.matchCreated!.match.engineOutput!, 'base64'));
    expect(attributes.find((a) => a.name === 'mode')!.accepts).toEqual(['mode-240']);

    // 250 maps held now (m-10..m-259, m-150, m-199 and m-200 among them; m-3 left with its match): six more reach
    // 256, the next is refused, naming the limit.
    for (const map of ['x-1', 'x-2', 'x-3', 'x-4', 'x-5', 'x-6']) {
      expect((await ticket(api, queueId, uuid(), 5000, { map: { values: [map] } })).ok).toBe(true);
    }
    const refused = await ticket(api, queueId, uuid(), 5000, { map: { values: ['x-7'] } });
    expect(refused).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
    expect(!refused.ok && refused.message).toContain('256 distinct values');
  }, 60_000);
});

describe.each(overBoth('hosts'))('host keys past 64 (%s)', (_name, queueId, transport) => {
  it('match on a common host past the 64th and refuse the 257th host key', async () => {
    const api = transport();
    const create = (id: string, mmr: number, latencies: Record<string, number>) =>
      api.createTicket({ id, queueId, engineInput: engineInput({ players: [{ playerId: `p-${id}`, mmr, latencies }] }) });
    // 250 tickets, each near one host of its own (h-0..h-249) and at the default 150 ms from every other: no two
    // share a host within 100 ms, so none matches.
    for (let i = 0; i < 250; i++) expect((await create(uuid(), 0.5, { [`h-${i}`]: 50 })).ok).toBe(true);
    // Two more, both near a new host, the 251st key (index 250, in the fourth word of 64 hosts), and beyond the
    // bound from h-3: they match, on the new host alone.
    const pair = [uuid(), uuid()];
    for (const id of pair) expect((await create(id, 0.5, { shared: 40, 'h-3': 120 })).ok).toBe(true);
    const matches = await pollUntil(
      () => matchesOf(queueId),
      (ms) => ms.length >= 1,
      10_000,
    );
    expect(matches.map((m) => m.matchCreated!.match.tickets.map((t) => t.id).sort())).toEqual([[...pair].sort()]);
    const { host } = fromBinary(EngineOutputSchema, Buffer.from(matches[0]!.matchCreated!.match.engineOutput!, 'base64'));
    expect(host).toMatchObject({ preferred: 'shared', acceptable: ['shared'] });

    // 250 host keys held now ("shared" left with its match): six more reach 256, the next is refused, naming the
    // limit.
    for (let i = 250; i < 256; i++) expect((await create(uuid(), 0.5, { [`h-${i}`]: 50 })).ok).toBe(true);
    const refused = await create(uuid(), 0.5, { 'h-256': 50 });
    expect(refused).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
    expect(!refused.ok && refused.message).toContain('256 distinct values');
  }, 60_000);
});
