// The process's own latency sources as metrics: event-loop delay and garbage-collection pauses. At a few
// thousand requests a second these, more than the work per request, decide the tail latency
// (bench/RESULTS.md), so an operator should see them next to the queue gauges on /metrics.
import { constants, monitorEventLoopDelay, PerformanceObserver, type IntervalHistogram, type PerformanceEntry } from 'node:perf_hooks';

/** Event-loop delay is reported over windows of this length (the last complete one). */
const LOOP_DELAY_WINDOW_MS = 10_000;

/** The histogram samples the loop with a timer of this period; each sample is the period plus the delay. */
const RESOLUTION_MS = 10;

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

interface DelaySummary {
  p50: number;
  p99: number;
  max: number;
}

export class ProcessMetrics {
  private readonly histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  private lastWindow: DelaySummary | undefined;
  private readonly rotation: NodeJS.Timeout;
  private readonly gc = new Map<string, { pauses: number; seconds: number }>(
    Object.values(GC_KINDS).map((k) => [k, { pauses: 0, seconds: 0 }]),
  );
  private readonly observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = GC_KINDS[(entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? -1];
      const totals = kind === undefined ? undefined : this.gc.get(kind);
      if (!totals) continue;
      totals.pauses += 1;
      totals.seconds += entry.duration / 1000;
    }
  });

  constructor() {
    this.histogram.enable();
    this.observer.observe({ entryTypes: ['gc'] });
    this.rotation = setInterval(() => {
      this.lastWindow = this.summary();
      this.histogram.reset();
    }, LOOP_DELAY_WINDOW_MS).unref();
  }

  /** Prometheus text lines. */
  lines(): string[] {
    const delay = this.lastWindow ?? this.summary();
    return [
      `# HELP matchmaker_event_loop_delay_seconds Event-loop delay over the last ${LOOP_DELAY_WINDOW_MS / 1000} s window (quantile 1: the longest stall).`,
      '# TYPE matchmaker_event_loop_delay_seconds gauge',
      ...(
        [
          ['0.5', delay.p50],
          ['0.99', delay.p99],
          ['1', delay.max],
        ] as const
      ).map(([q, seconds]) => `matchmaker_event_loop_delay_seconds{quantile="${q}"} ${seconds}`),
      '# HELP matchmaker_gc_pause_seconds_total Time spent in garbage-collection pauses, by kind.',
      '# TYPE matchmaker_gc_pause_seconds_total counter',
      ...[...this.gc].map(([kind, t]) => `matchmaker_gc_pause_seconds_total{kind="${kind}"} ${t.seconds}`),
      '# HELP matchmaker_gc_pauses_total Garbage-collection pauses, by kind.',
      '# TYPE matchmaker_gc_pauses_total counter',
      ...[...this.gc].map(([kind, t]) => `matchmaker_gc_pauses_total{kind="${kind}"} ${t.pauses}`),
    ];
  }

  stop(): void {
    clearInterval(this.rotation);
    this.observer.disconnect();
    this.histogram.disable();
  }

  /** The histogram so far, as delays in seconds (zeros before its first sample). */
  private summary(): DelaySummary {
    const h = this.histogram;
    const seconds = (ns: number) => (Number.isFinite(ns) && h.count > 0 ? Math.max(0, ns / 1e6 - RESOLUTION_MS) / 1000 : 0);
    return { p50: seconds(h.percentile(50)), p99: seconds(h.percentile(99)), max: seconds(h.max) };
  }
}
