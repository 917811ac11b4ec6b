// Every row of the spec's "States and transitions" table, in its order, against the real service.
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { engineInput, uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { useService } from '../support/service.js';
import { grpcTransport, httpRequest, type Transport } from '../support/transports.js';
import type { OutcomeJson } from '../support/outcomes.js';

const FAST_DUEL = duelQueue(50, { config: { terminal_retention_ttl_secs: 600 } });
const SHORT_RETENTION = duelQueue(50, { config: { terminal_retention_ttl_secs: 1 } });
const EXPIRING = `
config:
  tick_interval_ms: 100
  ticket_ttl_secs: 1
  backfill_ttl_secs: 1
  rulesets:
    - id: 5v5
      teams: 2
      team_size: 5
`;
const quiet = (rulesets: string, limits = '') => `
config:
  tick_interval_ms: 3600000
${limits}  rulesets:
${rulesets}`;
const DUEL = `    - id: duel
      teams: 2
      team_size: 1
`;
const TRIO = (size: number) => `    - id: trio
      teams: 2
      team_size: ${size}
`;

const env = useService({
  queues: {
    'st.duel': FAST_DUEL,
    'st.retention': SHORT_RETENTION,
    'st.expiry': EXPIRING,
    'st.reload': quiet(DUEL + TRIO(3)),
    'st.retire': duelQueue(3600000),
  },
});

const outcomes = async (queueId: string) =>
  (await httpRequest(env.service, 'GET', `/admin/v1/outcomes?queue_id=${queueId}&limit=10000`)).body.outcomes as OutcomeJson[];
const ticketState = async (queueId: string, id: string) =>
  (await httpRequest(env.service, 'GET', `/admin/v1/queues/${queueId}/tickets/${id}`)).body;
const solo = (name: string) => engineInput({ players: [{ playerId: name, mmr: 0.5 }] });
const party = (n: number) => engineInput({ players: Array.from({ length: n }, (_, i) => ({ playerId: `p${i}`, mmr: 0.5 })) });

/** Two solo tickets in a fast 1v1 queue; resolves once their match is recorded. */
async function matchedPair(api: Transport, queueId: string) {
  const ids = [uuid(), uuid()];
  for (const id of ids) expect((await api.createTicket({ id, queueId, engineInput: solo(id) })).ok).toBe(true);
  const match = await pollUntil(
    async () => (await outcomes(queueId)).find((o) => o.matchCreated?.match.tickets.some((t) => t.id === ids[0])),
    (o) => o !== undefined,
  );
  expect(match).toBeDefined();
  return { ids, matchId: match!.matchCreated!.match.id };
}

describe('states and transitions', () => {
  it('(none) --CreateTicket--> active; the same id cannot make two pool entries', async () => {
    const api = grpcTransport(env.service);
    const id = uuid();
    for (let i = 0; i < 3; i++) expect((await api.createTicket({ id, queueId: 'st.reload', engineInput: solo('x') })).ok).toBe(true);
    expect((await ticketState('st.reload', id)).state).toBe('active');
    const queues = (await httpRequest(env.service, 'GET', '/admin/v1/queues')).body.queues as { queueId: string; activeTickets: number }[];
    expect(queues.find((q) => q.queueId === 'st.reload')!.activeTickets).toBe(1);
    await api.cancelTicket('st.reload', id);
    api.close();
  });

  it('active --match formed--> resolved, with match.created; the tickets leave the pool', async () => {
    const api = grpcTransport(env.service);
    const { ids, matchId } = await matchedPair(api, 'st.duel');
    for (const id of ids) expect(await ticketState('st.duel', id)).toMatchObject({ state: 'resolved', matchId });
    api.close();
  });

  it('active --CancelTicket--> removed from matchmaking', async () => {
    const api = grpcTransport(env.service);
    const id = uuid();
    await api.createTicket({ id, queueId: 'st.reload', engineInput: solo('y') });
    expect((await api.cancelTicket('st.reload', id)).ok).toBe(true);
    expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/st.reload/tickets/${id}`)).status).toBe(404);
    api.close();
  });

  it('resolved --CancelTicket--> unchanged: FAILED_PRECONDITION, and the match outcome stands', async () => {
    const api = grpcTransport(env.service);
    const { ids, matchId } = await matchedPair(api, 'st.duel');
    expect(await api.cancelTicket('st.duel', ids[0]!)).toMatchObject({ ok: false, code: 'FAILED_PRECONDITION' });
    expect(await ticketState('st.duel', ids[0]!)).toMatchObject({ state: 'resolved', matchId });
    api.close();
  });

  it('resolved --ReactivateTickets--> active, keeping the original created_at', async () => {
    const api = grpcTransport(env.service);
    const { ids } = await matchedPair(api, 'st.duel');
    const before = (await ticketState('st.duel', ids[0]!)).ticket as { createdAt: string };
    // Reactivate one ticket only, so it cannot immediately re-match with its partner.
    const res = await api.reactivateTickets('st.duel', [ids[0]!]);
    expect(res.ok && res.value.failedTicketIds).toEqual([]);
    const after = await ticketState('st.duel', ids[0]!);
    expect(after.state).toBe('active');
    expect((after.ticket as { createdAt: string }).createdAt).toBe(before.createdAt);
    await api.cancelTicket('st.duel', ids[0]!);
    api.close();
  });

  it('resolved past terminal_retention_ttl_secs --ReactivateTickets--> gone: listed in failed_ticket_ids', async () => {
    const api = grpcTransport(env.service);
    const { ids } = await matchedPair(api, 'st.retention');
    // Past the 1 s retention the tickets are forgotten (a reactivation before then would succeed).
    await pollUntil(
      async () => (await httpRequest(env.service, 'GET', `/admin/v1/queues/st.retention/tickets/${ids[0]}`)).status,
      (status) => status === 404,
    );
    const res = await api.reactivateTickets('st.retention', ids);
    expect(res.ok && [...res.value.failedTicketIds].sort()).toEqual([...ids].sort());
    api.close();
  });

  it('active --aging out--> expired, with ticket.expired', async () => {
    const api = grpcTransport(env.service);
    const id = uuid();
    await api.createTicket({ id, queueId: 'st.expiry', engineInput: solo('z') });
    const expired = await pollUntil(
      async () => (await outcomes('st.expiry')).filter((o) => o.kind === 'ticket.expired').flatMap((o) => o.ticketsExpired!.ticketIds),
      (ids) => ids.includes(id),
    );
    expect(expired).toContain(id);
    expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/st.expiry/tickets/${id}`)).status).toBe(404);
    api.close();
  });

  it('active --ClearQueuePool--> removed, with ticket.removed CLEAR_COMMAND; backfill requests too', async () => {
    const api = grpcTransport(env.service);
    const id = uuid();
    await api.createTicket({ id, queueId: 'st.reload', engineInput: solo('c') });
    const backfill = await api.createBackfillRequest({ queueId: 'st.reload', matchId: uuid(), rulesetId: 'duel' });
    expect((await api.clearQueuePool('st.reload')).ok).toBe(true);
    const all = await outcomes('st.reload');
    expect(all.some((o) => o.ticketsRemoved?.reason === 'CLEAR_COMMAND' && o.ticketsRemoved.ticketIds.includes(id))).toBe(true);
    expect(
      all.some(
        (o) =>
          o.backfillRequestsRemoved?.reason === 'CLEAR_COMMAND' &&
          backfill.ok &&
          o.backfillRequestsRemoved.backfillRequestIds.includes(backfill.value.backfillId),
      ),
    ).toBe(true);
    api.close();
  });

  it('hot reload: a removed ruleset orphans its tickets and requests; changed params remove what no longer fits; a broken limit removes with QUEUE_CONFIG_CHANGED', async () => {
    const api = grpcTransport(env.service);
    await api.clearQueuePool('st.reload');
    const namesDuel = uuid();
    const namesTrio = uuid();
    const trioAll = uuid();
    const soloAll = uuid();
    await api.createTicket({ id: namesDuel, queueId: 'st.reload', engineInput: solo('a'), rulesetIds: ['duel'] });
    await api.createTicket({ id: namesTrio, queueId: 'st.reload', engineInput: party(3), rulesetIds: ['trio'] });
    await api.createTicket({ id: trioAll, queueId: 'st.reload', engineInput: party(3) });
    await api.createTicket({ id: soloAll, queueId: 'st.reload', engineInput: solo('d'), metadata: new Uint8Array(100) });
    const duelBackfill = await api.createBackfillRequest({ queueId: 'st.reload', matchId: uuid(), rulesetId: 'duel' });
    const trioBackfill = await api.createBackfillRequest({ queueId: 'st.reload', matchId: uuid(), rulesetId: 'trio' });
    if (!duelBackfill.ok || !trioBackfill.ok) throw new Error('backfill create failed');

    // duel removed, trio shrunk to 2 per team.
    writeFileSync(join(env.service.queueDir, 'st.reload.yaml'), quiet(TRIO(2)));
    // Ticket removals are committed slice by slice while the pool is rebuilt: wait for all three.
    const orphaned = await pollUntil(
      () => outcomes('st.reload'),
      (all) =>
        all.filter((o) => o.kind === 'ticket.orphaned').length +
          all.flatMap((o) => (o.ticketsRemoved?.reason === 'RULESET_PARAMS_CHANGED' ? o.ticketsRemoved.ticketIds : [])).length >=
        3,
    );
    const ticketOrphans = orphaned.filter((o) => o.kind === 'ticket.orphaned');
    expect(ticketOrphans.map((o) => [o.ticketOrphaned!.ticket.id, o.ticketOrphaned!.rulesetId])).toEqual([[namesDuel, 'duel']]);
    const backfillOrphans = orphaned.filter((o) => o.kind === 'backfill.orphaned');
    expect(backfillOrphans.map((o) => [o.backfillRequestOrphaned!.backfillRequest.id, o.backfillRequestOrphaned!.rulesetId])).toEqual([
      [duelBackfill.value.backfillId, 'duel'],
    ]);
    const paramsChanged = orphaned
      .filter((o) => o.ticketsRemoved?.reason === 'RULESET_PARAMS_CHANGED')
      .flatMap((o) => o.ticketsRemoved!.ticketIds);
    expect(paramsChanged.sort()).toEqual([namesTrio, trioAll].sort());
    expect((await ticketState('st.reload', soloAll)).state).toBe('active');
    expect((await httpRequest(env.service, 'GET', '/admin/v1/queues')).body.queues).toContainEqual(
      expect.objectContaining({ queueId: 'st.reload', activeTickets: 1, backfillRequests: 1 }),
    );

    // A lower metadata limit breaks the remaining ticket: QUEUE_CONFIG_CHANGED.
    writeFileSync(join(env.service.queueDir, 'st.reload.yaml'), quiet(TRIO(2), '  limits:\n    max_metadata_bytes: 50\n'));
    const configChanged = await pollUntil(
      async () =>
        (await outcomes('st.reload'))
          .filter((o) => o.ticketsRemoved?.reason === 'QUEUE_CONFIG_CHANGED')
          .flatMap((o) => o.ticketsRemoved!.ticketIds),
      (ids) => ids.length > 0,
    );
    expect(configChanged).toEqual([soloAll]);
    expect((await ticketState('st.reload', trioAll)).state).toBeUndefined();
    // The trio backfill request still fits.
    const cancel = await api.cancelBackfillRequests('st.reload', [trioBackfill.value.backfillId]);
    expect(cancel.ok && cancel.value.failedBackfillIds).toEqual([]);
    api.close();
  });

  it('active --queue retirement--> removed with QUEUE_RETIRED', async () => {
    const api = grpcTransport(env.service);
    const id = uuid();
    await api.createTicket({ id, queueId: 'st.retire', engineInput: solo('r') });
    rmSync(join(env.service.queueDir, 'st.retire.yaml'));
    const removed = await pollUntil(
      async () =>
        (await outcomes('st.retire'))
          .filter((o) => o.ticketsRemoved?.reason === 'QUEUE_RETIRED')
          .flatMap((o) => o.ticketsRemoved!.ticketIds),
      (ids) => ids.includes(id),
    );
    expect(removed).toContain(id);
    api.close();
  });

  it('backfill (none) --CreateBackfillRequest--> active; the same match_id replaces the open request', async () => {
    const api = grpcTransport(env.service);
    const matchId = uuid();
    const first = await api.createBackfillRequest({ queueId: 'st.reload', matchId, rulesetId: 'trio' });
    const second = await api.createBackfillRequest({ queueId: 'st.reload', matchId, rulesetId: 'trio' });
    if (!first.ok || !second.ok) throw new Error('create failed');
    const cancel = await api.cancelBackfillRequests('st.reload', [first.value.backfillId, second.value.backfillId]);
    expect(cancel.ok && cancel.value.failedBackfillIds).toEqual([first.value.backfillId]);
    api.close();
  });

  it('backfill active --aging out--> expired, with backfill.expired', async () => {
    const api = grpcTransport(env.service);
    const res = await api.createBackfillRequest({ queueId: 'st.expiry', matchId: uuid() });
    if (!res.ok) throw new Error('create failed');
    const expired = await pollUntil(
      async () =>
        (await outcomes('st.expiry'))
          .filter((o) => o.kind === 'backfill.expired')
          .flatMap((o) => o.backfillRequestsExpired!.backfillRequestIds),
      (ids) => ids.includes(res.value.backfillId),
    );
    expect(expired).toContain(res.value.backfillId);
    api.close();
  });

  it('backfill active --CancelBackfillRequests--> removed', async () => {
    const api = grpcTransport(env.service);
    const res = await api.createBackfillRequest({ queueId: 'st.reload', matchId: uuid(), rulesetId: 'trio' });
    if (!res.ok) throw new Error('create failed');
    const cancel = await api.cancelBackfillRequests('st.reload', [res.value.backfillId, res.value.backfillId]);
    expect(cancel.ok && cancel.value.failedBackfillIds).toEqual([]);
    const again = await api.cancelBackfillRequests('st.reload', [res.value.backfillId]);
    expect(again.ok && again.value.failedBackfillIds).toEqual([res.value.backfillId]);
    api.close();
  });
});
