// The engine fills backfill requests: compatible tickets near the running match's skill and under its host
// take its open slots, ahead of new matches, and backfill.created carries them.
import { describe, expect, it } from 'vitest';
import { engineInput, uuid } from '../support/fixtures.js';
import { pollUntil } from '../support/queues.js';
import { useService } from '../support/service.js';
import { grpcTransport, httpRequest } from '../support/transports.js';
import type { OutcomeJson } from '../support/outcomes.js';

const env = useService({
  queues: {
    'bf.fill': `
config:
  tick_interval_ms: 50
  engine:
    attribute_filters:
      - name: mode
  rulesets:
    - id: 2v2
      teams: 2
      team_size: 2
      require_host: true
      max_latency_ms: 80
`,
  },
});

const solo = (name: string, mmr: number, latencies: Record<string, number>, mode: string) =>
  engineInput({ players: [{ playerId: name, mmr, latencies }], attributes: { mode: { values: [mode], accepts: [mode] } } });

describe('backfill fulfilment', () => {
  it('fills open slots with compatible tickets near the match skill, under its host', async () => {
    const api = grpcTransport(env.service);
    const near1 = uuid();
    const near2 = uuid();
    const far = uuid();
    const otherMode = uuid();
    const metadata = new Uint8Array([7, 7]);
    await api.createTicket({ id: near1, queueId: 'bf.fill', engineInput: solo('n1', 0.52, { fra: 30, ams: 60 }, 'ranked'), metadata });
    await api.createTicket({ id: near2, queueId: 'bf.fill', engineInput: solo('n2', 0.47, { fra: 40, ams: 20 }, 'ranked') });
    await api.createTicket({ id: far, queueId: 'bf.fill', engineInput: solo('f', 0.5, { fra: 200, ams: 10 }, 'ranked') });
    await api.createTicket({ id: otherMode, queueId: 'bf.fill', engineInput: solo('o', 0.5, { fra: 10 }, 'casual') });

    // The running match has two players on fra (its host: their worst latency is lowest there).
    const matchId = uuid();
    const created = await api.createBackfillRequest({
      queueId: 'bf.fill',
      matchId,
      slotsRequested: 2,
      engineInput: engineInput({
        players: [
          { playerId: 'in1', mmr: 0.5, latencies: { fra: 15, ams: 70 } },
          { playerId: 'in2', mmr: 0.5, latencies: { fra: 25, ams: 90 } },
        ],
        attributes: { mode: { values: ['ranked'], accepts: ['ranked'] } },
      }),
    });
    if (!created.ok) throw new Error('create failed');

    const outcome = await pollUntil(
      async () =>
        ((await httpRequest(env.service, 'GET', '/admin/v1/outcomes?queue_id=bf.fill')).body.outcomes as OutcomeJson[]).find(
          (o) => o.kind === 'backfill.created',
        ),
      (o) => o !== undefined,
    );
    const backfill = outcome!.backfillCreated!.backfill;
    expect(backfill.request).toMatchObject({ id: created.value.backfillId, matchId, slotsRequested: 2 });
    expect(backfill.assignedTickets.map((t) => t.id).sort()).toEqual([near1, near2].sort());
    expect(backfill.assignedTickets.find((t) => t.id === near1)!.metadata).toBe(Buffer.from(metadata).toString('base64'));

    // The assigned tickets are resolved into the running match; the others wait; the request is done.
    for (const id of [near1, near2]) {
      expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/bf.fill/tickets/${id}`)).body).toMatchObject({
        state: 'resolved',
        matchId,
      });
    }
    for (const id of [far, otherMode]) {
      expect((await httpRequest(env.service, 'GET', `/admin/v1/queues/bf.fill/tickets/${id}`)).body.state).toBe('active');
    }
    const cancel = await api.cancelBackfillRequests('bf.fill', [created.value.backfillId]);
    expect(cancel.ok && cancel.value.failedBackfillIds).toEqual([created.value.backfillId]);
    api.close();
  });
});
