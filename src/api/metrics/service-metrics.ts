// The service's Prometheus metrics, through prom-client: Node's own (heap, event-loop lag, GC pauses,
// handles), requests by operation, transport and code, what queues do (queue-metrics.ts), outcome
// delivery, and gauges read from the operator's snapshot at each scrape. docs/metrics.md lists them.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MetricsSnapshot } from '../../core/operator.js';
import type { DeliveryTelemetry } from '../../outcomes/delivery-telemetry.js';
import type { QueueTelemetry } from '../../queue/queue-telemetry.js';
import { queueMetrics } from './queue-metrics.js';

export type Transport = 'grpc' | 'http';

/** Request latencies from sub-millisecond answers to the slowest a default deadline allows. */
const REQUEST_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** From a delivery in the same tick to one that waited out retries. */
const DELIVERY_LAG_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800];

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly queues: QueueTelemetry;
  readonly delivery: DeliveryTelemetry;
  private readonly requests: Counter<'operation' | 'transport' | 'code'>;
  private readonly requestSeconds: Histogram<'operation' | 'transport' | 'code'>;
  private readonly accessRefusals: Counter<'scope' | 'code'>;
  /** The state as the scrape in progress read it, once for all its gauges. */
  private scraped: MetricsSnapshot | undefined;

  constructor(private readonly snapshot: () => MetricsSnapshot) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'matchmaker_requests_total',
      help: 'Requests answered, by operation, transport and code (OK or the spec error code).',
      labelNames: ['operation', 'transport', 'code'],
      registers,
    });
    this.requestSeconds = new Histogram({
      name: 'matchmaker_request_duration_seconds',
      help: 'Time from a request read to its answer, by operation, transport and code.',
      labelNames: ['operation', 'transport', 'code'],
      buckets: REQUEST_BUCKETS_SECONDS,
      registers,
    });
    this.accessRefusals = new Counter({
      name: 'matchmaker_access_refusals_total',
      help: 'Calls refused for their bearer token, by the scope they needed and the code (docs/security.md).',
      labelNames: ['scope', 'code'],
      registers,
    });
    this.queues = queueMetrics(registers);
    this.delivery = deliveryMetrics(registers);
    stateGauges(registers, () => this.scraped ?? snapshot());
  }

  /** One answered request; `operation` is the spec's method name (CreateTicket). */
  observeRequest(operation: string, transport: Transport, code: string, seconds: number): void {
    const labels = { operation, transport, code };
    this.requests.inc(labels);
    this.requestSeconds.observe(labels, seconds);
  }

  /** A call refused for its token: UNAUTHENTICATED, PERMISSION_DENIED or RESOURCE_EXHAUSTED. */
  accessRefused(scope: string, code: string): void {
    this.accessRefusals.inc({ scope, code });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  async text(): Promise<string> {
    this.scraped = this.snapshot();
    try {
      return await this.registry.metrics();
    } finally {
      this.scraped = undefined;
    }
  }
}

function deliveryMetrics(registers: Registry[]): DeliveryTelemetry {
  const labelNames = ['queue_id', 'sink'] as const;
  const lag = new Histogram({
    name: 'matchmaker_outcome_delivery_lag_seconds',
    help: 'Per outcome, time from its occurrence to the sink acknowledging it (push sinks).',
    labelNames,
    buckets: DELIVERY_LAG_BUCKETS_SECONDS,
    registers,
  });
  const retries = new Counter({
    name: 'matchmaker_outcome_delivery_retries_total',
    help: 'Failed delivery attempts that were retried.',
    labelNames,
    registers,
  });
  const parked = new Counter({
    name: 'matchmaker_outcome_deliveries_parked_total',
    help: 'Deliveries parked after their retries were spent.',
    labelNames,
    registers,
  });
  return {
    delivered(queueId, sink, lagsSeconds) {
      const child = lag.labels({ queue_id: queueId, sink });
      for (const seconds of lagsSeconds) child.observe(seconds);
    },
    retried: (queueId, sink) => retries.inc({ queue_id: queueId, sink }),
    parked: (queueId, sink) => parked.inc({ queue_id: queueId, sink }),
  };
}

/** Gauges of the state as it is at the scrape, all read from `current`. */
function stateGauges(registers: Registry[], current: () => MetricsSnapshot): void {
  const gauge = (
    name: string,
    help: string,
    labelNames: string[],
    read: (s: MetricsSnapshot, set: (labels: Record<string, string>, value: number) => void) => void,
  ) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        read(current(), (labels, value) => this.set(labels, value));
      },
    });
  gauge('matchmaker_up', 'Whether the service is serving (1) or starting or stopping (0).', [], (s, set) => set({}, s.serving ? 1 : 0));
  // A queue whose value is undefined (a replicated-mode figure, embedded) has no sample.
  const perQueue = (
    name: string,
    help: string,
    value: (q: NonNullable<MetricsSnapshot['opened']>['queues'][number]) => number | undefined,
  ) =>
    gauge(name, help, ['queue_id'], (s, set) => {
      for (const q of s.opened?.queues ?? []) {
        const v = value(q);
        if (v !== undefined) set({ queue_id: q.queueId }, v);
      }
    });
  perQueue('matchmaker_pool_tickets', 'Active tickets in the queue pool.', (q) => q.activeTickets);
  perQueue('matchmaker_resolved_tickets', 'Resolved tickets kept for reactivation.', (q) => q.resolvedTickets);
  perQueue('matchmaker_backfill_requests', 'Active backfill requests.', (q) => q.backfillRequests);
  perQueue(
    'matchmaker_queue_leading',
    'Whether this replica leads the queue: ticks it and delivers its outcomes (always 1, embedded).',
    (q) => (q.leading ? 1 : 0),
  );
  perQueue('matchmaker_queue_serving', 'Whether the queue takes requests on this replica.', (q) => (q.serving ? 1 : 0));
  perQueue(
    'matchmaker_replication_applied_position',
    'The replicated mode: the log position of the last entry this replica applied to the queue (replicas agree once caught up).',
    (q) => q.logPosition,
  );
  perQueue(
    'matchmaker_replication_term',
    "The replicated mode: the term this replica applies the queue leader's entries under (the log position of its claim).",
    (q) => q.logTerm,
  );
  gauge('matchmaker_outcome_deliveries_parked', 'Deliveries parked after exhausting retries (alert on > 0).', ['queue_id'], (s, set) => {
    for (const d of s.opened?.deliveries ?? []) set({ queue_id: d.queueId }, d.parked ? 1 : 0);
  });
  gauge('matchmaker_outcome_last_sequence', 'Highest producer_sequence recorded.', [], (s, set) => {
    if (s.opened) set({}, Number(s.opened.lastSequence));
  });
  gauge(
    'matchmaker_outcome_recorded_sequence',
    'Highest producer_sequence recorded per queue: a push sink is caught up when its delivered sequence equals it.',
    ['queue_id'],
    (s, set) => {
      for (const d of s.opened?.deliveries ?? []) set({ queue_id: d.queueId }, Number(d.lastRecorded));
    },
  );
  gauge('matchmaker_outcome_delivered_sequence', 'Highest producer_sequence delivered per queue (push sinks).', ['queue_id'], (s, set) => {
    for (const d of s.opened?.deliveries ?? []) if (d.sink !== 'websocket') set({ queue_id: d.queueId }, Number(d.deliveredThrough));
  });
}
