// Recorded outcomes are kept for OUTCOME_RETENTION_SECS: delivered ones (or, for the websocket sink, any)
// are forgotten after it; an undelivered outcome of a push sink is never dropped.
import { describe, expect, it } from 'vitest';
import { uuid } from '../support/fixtures.js';
import { duelQueue, pollUntil } from '../support/queues.js';
import { removeDirs, startService, tempDir, useService, writeQueues, type TestService } from '../support/service.js';
import { grpcTransport, httpRequest } from '../support/transports.js';

const queue = (outcomes: Record<string, unknown>) => duelQueue(3600000, { outcomes });

const env = useService({
  queues: {
    'ret.stream': queue({ sink: 'websocket' }),
    // A webhook nobody listens on: its outcomes stay undelivered.
    'ret.hook': queue({
      sink: 'webhook',
      webhook: {
        url: 'http://127.0.0.1:9/hook',
        secret: 's',
        timeout_ms: 200,
        max_retries: 1000,
        retry_base_delay_ms: 50,
        retry_max_delay_ms: 100,
      },
    }),
  },
  env: { OUTCOME_RETENTION_SECS: '1' },
});

const outcomesOf = async (queueId: string) =>
  (await httpRequest(env.service, 'GET', `/admin/v1/outcomes?queue_id=${queueId}`)).body.outcomes as { id: string }[];

describe('outcome retention', () => {
  it('forgets outcomes past the window, but never an undelivered one', async () => {
    const api = grpcTransport(env.service);
    for (const queueId of ['ret.stream', 'ret.hook']) {
      expect((await api.createTicket({ id: uuid(), queueId })).ok).toBe(true);
      expect((await api.clearQueuePool(queueId)).ok).toBe(true);
    }
    expect(await outcomesOf('ret.stream')).toHaveLength(1);
    const kept = await outcomesOf('ret.hook');
    expect(kept).toHaveLength(1);
    const gone = await pollUntil(
      () => outcomesOf('ret.stream'),
      (list) => list.length === 0,
      15_000,
    );
    expect(gone).toEqual([]);
    expect(await outcomesOf('ret.hook')).toEqual(kept);
    api.close();
  });
});

describe('producer_sequence after retention', () => {
  it('continues across a restart even when retention emptied the outbox', async () => {
    const queueDir = tempDir('queues');
    const dataDir = tempDir('data');
    writeQueues(queueDir, { 'ret.seq': queue({ sink: 'websocket' }) });
    const first = await startService({ queueDir, dataDir, env: { OUTCOME_RETENTION_SECS: '1' } });
    const api = grpcTransport(first);
    for (let i = 0; i < 3; i++) {
      await api.createTicket({ id: uuid(), queueId: 'ret.seq' });
      await api.clearQueuePool('ret.seq');
    }
    api.close();
    const list = async (s: TestService) =>
      (await httpRequest(s, 'GET', '/admin/v1/outcomes')).body.outcomes as { producerSequence: string }[];
    expect((await list(first)).map((o) => o.producerSequence)).toEqual(['1', '2', '3']);
    await pollUntil(
      () => list(first),
      (l) => l.length === 0,
      15_000,
    );
    expect(await first.stop()).toBe(0);

    const second = await startService({ queueDir, dataDir, env: { OUTCOME_RETENTION_SECS: '3600' } });
    const api2 = grpcTransport(second);
    await api2.createTicket({ id: uuid(), queueId: 'ret.seq' });
    await api2.clearQueuePool('ret.seq');
    api2.close();
    expect((await list(second)).map((o) => o.producerSequence)).toEqual(['4']);
    await second.stop();
    removeDirs(queueDir, dataDir);
  });
});
