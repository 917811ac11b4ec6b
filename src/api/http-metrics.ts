// GET /metrics in the Prometheus text format: the core's metrics snapshot, then the process's own metrics.
import type { ServerResponse } from 'node:http';
import type { Operator } from '../core/operator.js';
import type { ProcessMetrics } from './process-metrics.js';

export function metrics(res: ServerResponse, operator: Operator, processMetrics: ProcessMetrics): void {
  const snapshot = operator.metricsSnapshot();
  const lines: string[] = [];
  const gauge = (name: string, help: string, samples: [labels: string, value: number | string][]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
  };
  gauge('matchmaker_up', 'Whether the service is serving (1) or starting or stopping (0).', [['', snapshot.serving ? 1 : 0]]);
  if (snapshot.opened) {
    const { queues, deliveries, lastSequence } = snapshot.opened;
    const label = (queueId: string) => `{queue_id="${queueId}"}`;
    gauge(
      'matchmaker_pool_tickets',
      'Active tickets in the queue pool.',
      queues.map((q) => [label(q.queueId), q.activeTickets]),
    );
    gauge(
      'matchmaker_resolved_tickets',
      'Resolved tickets kept for reactivation.',
      queues.map((q) => [label(q.queueId), q.resolvedTickets]),
    );
    gauge(
      'matchmaker_backfill_requests',
      'Active backfill requests.',
      queues.map((q) => [label(q.queueId), q.backfillRequests]),
    );
    gauge(
      'matchmaker_outcome_deliveries_parked',
      'Deliveries parked after exhausting retries (alert on > 0).',
      deliveries.map((d) => [label(d.queueId), d.parked ? 1 : 0]),
    );
    gauge('matchmaker_outcome_last_sequence', 'Highest producer_sequence recorded.', [['', String(lastSequence)]]);
    gauge(
      'matchmaker_outcome_delivered_sequence',
      'Highest producer_sequence delivered per queue (push sinks).',
      deliveries.filter((d) => d.sink !== 'websocket').map((d) => [label(d.queueId), d.deliveredThrough]),
    );
  }
  lines.push(...processMetrics.lines());
  const body = `${lines.join('\n')}\n`;
  res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
