// How long the service's event loop stopped while a bench loaded it, read from its own /metrics once a
// second: prom-client's event-loop lag (a monitorEventLoopDelay histogram, reset at each scrape, so each
// sample is the longest delay of that second) and its GC durations by kind. A pause in a run over a large
// pool that the same run over an empty pool lacks comes from the pool: its ticks' host side, or GC of its heap.

export interface ServicePauses {
  /** One sample a second, in order: the longest event-loop delay of that second, ms. */
  perSecondMaxMs: number[];
  maxMs: number;
  /** The 99th percentile of the per-second maxima, ms. */
  p99OfMaxMs: number;
  /** Seconds whose longest delay was over 20 ms. */
  secondsOver20Ms: number;
  /** GC during the watch, by kind: how many pauses, how many over 10 ms, total ms. */
  gc: Record<string, { count: number; over10Ms: number; totalMs: number }>;
}

interface GcTotals {
  [kind: string]: { count: number; under10Ms: number; sumS: number };
}

async function scrape(httpPort: number): Promise<{ lagMaxS: number | undefined; gc: GcTotals }> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  const lag = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text);
  const gc: GcTotals = {};
  for (const m of text.matchAll(/^nodejs_gc_duration_seconds_(bucket|count|sum)\{([^}]*)\} (\S+)$/gm)) {
    const kind = /kind="([^"]+)"/.exec(m[2]!)?.[1];
    if (!kind) continue;
    const t = (gc[kind] ??= { count: 0, under10Ms: 0, sumS: 0 });
    if (m[1] === 'count') t.count = Number(m[3]);
    else if (m[1] === 'sum') t.sumS = Number(m[3]);
    else if (/le="0\.01"/.test(m[2]!)) t.under10Ms = Number(m[3]);
  }
  return { lagMaxS: lag ? Number(lag[1]) : undefined, gc };
}

/** Starts sampling; `stop()` answers what was seen since the start. */
export function watchServicePauses(httpPort: number): { stop(): Promise<ServicePauses> } {
  const maxima: number[] = [];
  let first: GcTotals | undefined;
  let last: GcTotals | undefined;
  let stopped = false;
  const sampling = (async () => {
    // The service's first /metrics answer holds its loop for over 100 ms (prom-client's first collection):
    // a scrape a second before the watch takes that pause, and the next resets the lag histogram, so
    // neither that pause nor what came before the watch is counted.
    await scrape(httpPort);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    first = (await scrape(httpPort)).gc;
    while (!stopped) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const s = await scrape(httpPort).catch(() => undefined);
      if (!s) continue;
      if (s.lagMaxS !== undefined) maxima.push(s.lagMaxS * 1000);
      last = s.gc;
    }
  })();
  return {
    async stop() {
      stopped = true;
      await sampling;
      const sorted = [...maxima].sort((a, b) => a - b);
      const gc: ServicePauses['gc'] = {};
      for (const [kind, end] of Object.entries(last ?? {})) {
        const start = first?.[kind] ?? { count: 0, under10Ms: 0, sumS: 0 };
        const count = end.count - start.count;
        gc[kind] = { count, over10Ms: count - (end.under10Ms - start.under10Ms), totalMs: Math.round((end.sumS - start.sumS) * 1000) };
      }
      return {
        perSecondMaxMs: maxima.map((ms) => Math.round(ms)),
        maxMs: sorted.at(-1) ?? 0,
        p99OfMaxMs: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0,
        secondsOver20Ms: sorted.filter((ms) => ms > 20).length,
        gc,
      };
    },
  };
}

export function formatPauses(p: ServicePauses): string {
  const gc = Object.entries(p.gc)
    .filter(([, g]) => g.count > 0)
    .map(([kind, g]) => `${kind} ${g.count} (${g.over10Ms} over 10 ms, ${g.totalMs} ms)`)
    .join(', ');
  return `  service event loop: longest pause ${p.maxMs.toFixed(1)} ms, p99 of per-second maxima ${p.p99OfMaxMs.toFixed(1)} ms, ${p.secondsOver20Ms} of ${p.perSecondMaxMs.length} s over 20 ms; GC: ${gc}`;
}
