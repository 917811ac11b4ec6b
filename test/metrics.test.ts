// GET /metrics: Prometheus text with the queue gauges and the process's own latency sources.
import { describe, expect, it } from 'vitest';
import { party, uuid } from './support/fixtures.js';
import { useService } from './support/service.js';
import { grpcTransport } from './support/transports.js';

const env = useService();

/** The value of the sample `name` (with its labels, as written) in a Prometheus text body. */
function sample(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

describe('GET /metrics', () => {
  it('reports the pool per queue, the event-loop delay and the GC pauses by kind', async () => {
    const api = grpcTransport(env.service);
    try {
      for (let i = 0; i < 3; i++)
        expect((await api.createTicket({ id: uuid(), queueId: 'test.basic', engineInput: party(1) })).ok).toBe(true);
    } finally {
      api.close();
    }
    const res = await fetch(`${env.service.baseUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();

    expect(sample(text, 'matchmaker_up')).toBe(1);
    expect(sample(text, 'matchmaker_pool_tickets{queue_id="test.basic"}')).toBeGreaterThanOrEqual(3);

    const delay = ['0.5', '0.99', '1'].map((q) => sample(text, `matchmaker_event_loop_delay_seconds{quantile="${q}"}`));
    for (const seconds of delay) {
      expect(seconds).toBeGreaterThanOrEqual(0);
      expect(seconds).toBeLessThan(60);
    }
    expect(delay[0]!).toBeLessThanOrEqual(delay[1]!);
    expect(delay[1]!).toBeLessThanOrEqual(delay[2]!);

    for (const kind of ['minor', 'major', 'incremental', 'weakcb']) {
      const pauses = sample(text, `matchmaker_gc_pauses_total{kind="${kind}"}`);
      const seconds = sample(text, `matchmaker_gc_pause_seconds_total{kind="${kind}"}`);
      expect(Number.isInteger(pauses) && pauses! >= 0).toBe(true);
      expect(seconds).toBeGreaterThanOrEqual(0);
      if (pauses === 0) expect(seconds).toBe(0);
    }
  });
});
