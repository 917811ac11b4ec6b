// A queue's value tables past 64 entries (docs/engine.md "Filters past 64 values", "Hosts", "Value tables"): an
// attribute filter holds up to 256 distinct values, a filter past 64 values gets further columns in the pool,
// tickets created before the widening keep matching as they did; a queue holds up to 256 host keys, and a match's
// common host may be past the 64th. One more live value or host key is refused with FAILED_PRECONDITION; a value
// or host key no waiting ticket holds any more (cleared, matched, cancelled) is forgotten and makes room. Real
// service, real sockets, both transports.
import { fromBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { EngineOutputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { engineInput, uuid } from '../support/fixtures.js';
import type { OutcomeJson } from '../support/outcomes.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { removeDirs, startService, tempDir, type TestService, useService, writeQueues } from '../support/service.js';
import { grpcTransport, httpRequest, httpTransport, type Transport } from '../support/transports.js';

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

/** A 1v1 queue with an overlap filter (map), ticking every 50 ms; a match needs no host. */
const MAP_QUEUE = duelQueue(50, { config: { engine: { attribute_filters: [{ name: 'map', mode: 'overlap' }] } } });

const env = useService({
  queues: {
    'wide.http': wideQueue(),
    'wide.grpc': wideQueue(),
    // A match needs a host within 100 ms of both players.
    'hosts.http': duelQueue(50, 100),
    'hosts.grpc': duelQueue(50, 100),
    'cleared.http': MAP_QUEUE,
    'cleared.grpc': MAP_QUEUE,
    'forgets.http': MAP_QUEUE,
    'forgets.grpc': MAP_QUEUE,
    'backfill.http': MAP_QUEUE,
    'backfill.grpc': MAP_QUEUE,
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

/** A ticket of one player at `mmr` with at most one map and one host key (at 50 ms). */
function mapTicket(api: Transport, queueId: string, id: string, mmr: number, t: { map?: string; host?: string }) {
  const input = engineInput({
    players: [{ playerId: `p-${id}`, mmr, latencies: t.host === undefined ? {} : { [t.host]: 50 } }],
    attributes: t.map === undefined ? {} : { map: { values: [t.map], accepts: [] } },
  });
  return api.createTicket({ id, queueId, engineInput: input });
}

/** 256 tickets far from each other in skill (1000 + 10 i), each with a map and a host key of its own. */
async function fill(api: Transport, queueId: string, prefix: string, count = 256): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = uuid();
    const res = await mapTicket(api, queueId, id, 1000 + 10 * i, { map: `${prefix}-map-${i}`, host: `${prefix}-host-${i}` });
    expect(res.ok, JSON.stringify(res)).toBe(true);
    ids.push(id);
  }
  return ids;
}

/** A map and a host key new to the queue are both refused: each table holds 256 live entries. */
async function expectFull(api: Transport, queueId: string): Promise<void> {
  const map = await mapTicket(api, queueId, uuid(), 9000, { map: `extra-${uuid()}` });
  expect(map).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
  expect(!map.ok && map.message).toContain('attribute filter "map" already has 256 distinct values');
  const host = await mapTicket(api, queueId, uuid(), 9000, { host: `extra-${uuid()}` });
  expect(host).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
  expect(!host.ok && host.message).toContain('the host key set already has 256 distinct values');
}

describe.each(overBoth('cleared'))('a queue cleared of its tickets (%s)', (_name, queueId, transport) => {
  it('forgets their 256 values and 256 host keys, and takes new ones as many', async () => {
    const api = transport();
    await fill(api, queueId, 'old');
    await expectFull(api, queueId);
    const cleared = await api.clearQueuePool(queueId);
    expect(cleared.ok && Number(cleared.value.ticketsCleared)).toBe(256);
    // A map and a host key new to the queue: two tickets sharing them match, on that host.
    const pair = [uuid(), uuid()];
    for (const id of pair) expect((await mapTicket(api, queueId, id, 0.5, { map: 'new-map', host: 'new-host' })).ok).toBe(true);
    const matches = await pollUntil(
      () => matchesOf(queueId),
      (ms) => ms.length >= 1,
      10_000,
    );
    expect(matches[0]!.matchCreated!.match.tickets.map((t) => t.id).sort()).toEqual([...pair].sort());
    const { host } = fromBinary(EngineOutputSchema, Buffer.from(matches[0]!.matchCreated!.match.engineOutput!, 'base64'));
    expect(host).toMatchObject({ preferred: 'new-host', acceptable: ['new-host'] });
    // The tables take 256 new entries again, and refuse the next.
    await fill(api, queueId, 'new');
    await expectFull(api, queueId);
  }, 60_000);
});

describe.each(overBoth('forgets'))('tickets matched or cancelled (%s)', (_name, queueId, transport) => {
  it('make room for new values and host keys once no waiting ticket holds theirs', async () => {
    const api = transport();
    // 254 lone tickets, a ticket waiting for a partner (first-map, first-host) and one to be cancelled
    // (cancel-map, cancel-host): 256 maps and host keys.
    await fill(api, queueId, 'lone', 254);
    const [first, cancelled] = [uuid(), uuid()];
    expect((await mapTicket(api, queueId, first, 0.5, { map: 'first-map', host: 'first-host' })).ok).toBe(true);
    expect((await mapTicket(api, queueId, cancelled, 5000, { map: 'cancel-map', host: 'cancel-host' })).ok).toBe(true);
    await expectFull(api, queueId);
    // Cancelled: its map and host key are forgotten, and a new pair takes their places.
    expect((await api.cancelTicket(queueId, cancelled)).ok).toBe(true);
    expect((await mapTicket(api, queueId, uuid(), 6000, { map: 'after-cancel', host: 'after-cancel-host' })).ok).toBe(true);
    await expectFull(api, queueId);
    // Matched: the partner names values the table holds already, so it is taken while the table is full; once
    // the match leaves the pool, first-map and first-host are forgotten.
    const partner = uuid();
    expect((await mapTicket(api, queueId, partner, 0.5, { map: 'first-map', host: 'first-host' })).ok).toBe(true);
    const matches = await pollUntil(
      () => matchesOf(queueId),
      (ms) => ms.length >= 1,
      10_000,
    );
    expect(matches[0]!.matchCreated!.match.tickets.map((t) => t.id).sort()).toEqual([first, partner].sort());
    expect((await mapTicket(api, queueId, uuid(), 7000, { map: 'after-match', host: 'after-match-host' })).ok).toBe(true);
    await expectFull(api, queueId);
  }, 60_000);
});

describe.each(overBoth('backfill'))('a backfill request whose map does not fit (%s)', (_name, queueId, transport) => {
  it('waits for room without holding back the tick: tickets match meanwhile, and it is filled once its map fits', async () => {
    const api = transport();
    const lone = await fill(api, queueId, 'lone');
    // A running match of one player asks for one more, with a map no waiting ticket holds: the tables are full.
    const request = await api.createBackfillRequest({
      queueId,
      matchId: uuid(),
      rulesetId: 'duel',
      slotsRequested: 1,
      engineInput: engineInput({
        players: [{ playerId: `in-${uuid()}`, mmr: 0.5 }],
        attributes: { map: { values: ['bf-map'], accepts: [] } },
      }),
    });
    expect(request.ok, JSON.stringify(request)).toBe(true);
    // Two tickets naming a map already held match each other: the tick runs.
    const pair = [uuid(), uuid()];
    for (const id of pair) expect((await mapTicket(api, queueId, id, 3, { map: 'lone-map-0' })).ok).toBe(true);
    const matches = await pollUntil(
      () => matchesOf(queueId),
      (ms) => ms.length >= 1,
      10_000,
    );
    expect(matches[0]!.matchCreated!.match.tickets.map((t) => t.id).sort()).toEqual([...pair].sort());
    // Room for a ticket with the request's map: the request holds it during the tick now, and takes that ticket.
    expect((await api.cancelTicket(queueId, lone[0]!)).ok).toBe(true);
    const joining = uuid();
    expect((await mapTicket(api, queueId, joining, 0.5, { map: 'bf-map' })).ok).toBe(true);
    const filled = await pollUntil(
      async () =>
        ((await httpRequest(env.service, 'GET', `/admin/v1/outcomes?queue_id=${queueId}&limit=1000`)).body.outcomes as OutcomeJson[]).find(
          (o) => o.kind === 'backfill.created',
        ),
      (o) => o !== undefined,
      10_000,
    );
    expect(filled!.backfillCreated!.backfill.assignedTickets.map((t) => t.id)).toEqual([joining]);
  }, 60_000);
});

describe('a restart', () => {
  it('rebuilds the tables from the waiting tickets alone: what left before it is forgotten', async () => {
    const [queueDir, dataDir] = [tempDir('queues'), tempDir('data')];
    writeQueues(queueDir, { 'restart.duel': MAP_QUEUE });
    const services: TestService[] = [];
    try {
      const first = await startService({ queueDir, dataDir });
      services.push(first);
      const api = httpTransport(first);
      const ids = await fill(api, 'restart.duel', 'old');
      for (const id of ids.slice(0, 3)) expect((await api.cancelTicket('restart.duel', id)).ok).toBe(true);
      expect(await first.stop()).toBe(0);
      // Once the pool is rebuilt, 253 waiting tickets hold 253 maps and host keys: three new ones fit, a fourth does
      // not. (Requests are served during the rebuild; one then could take the place of a stored ticket's value.)
      const second = await startService({ queueDir, dataDir });
      services.push(second);
      const again = httpTransport(second);
      await second.waitForLog((l) => l.msg === 'pool restored');
      for (let i = 0; i < 3; i++) {
        const res = await mapTicket(again, 'restart.duel', uuid(), 8000 + 10 * i, { map: `new-map-${i}`, host: `new-host-${i}` });
        expect(res.ok, JSON.stringify(res)).toBe(true);
      }
      await expectFull(again, 'restart.duel');
      expect(second.logs.filter((l) => l.level === 50)).toEqual([]);
    } finally {
      await Promise.all(services.map((s) => s.stop()));
      removeDirs(queueDir, dataDir);
    }
  }, 60_000);
});
