// The dashboard's recent history of each queue, from what the queues report (QueueTelemetry): arrivals,
// matches, waits, match quality and the rules that refused candidates, in 10-second buckets over the last
// 15 minutes, and the last matches formed. Kept in memory by the replica that leads the queue; a restart
// starts it afresh (Prometheus keeps the long history).
import type { MatchFacts, QueueTelemetry, TickFacts } from '../../queue/queue-telemetry.js';

export const BUCKET_MS = 10_000;
export const BUCKETS = 90;
/** Waits kept per bucket for its percentiles; beyond that a uniform sample (reservoir) is kept. */
const WAIT_SAMPLES = 512;
const RECENT_MATCHES = 20;

interface Bucket {
  startMs: number;
  created: number;
  matches: number;
  players: number;
  waitsSeen: number;
  waitsMs: number[];
  spreadSum: number;
  imbalanceSum: number;
  pool: number | undefined;
  /** `${rulesetId}\u0000${rule}` -> candidates refused. */
  rejections: Map<string, number>;
}

export interface RecentMatch {
  matchId: string;
  rulesetId: string;
  atMs: number;
  teams: string[][];
  host: string | undefined;
  skillSpread: number;
  teamImbalance: number;
  longestWaitMs: number;
}

/** One queue's series, oldest first; `null` where a bucket had nothing to measure. */
export interface QueueSeries {
  bucketMs: number;
  startMs: number[];
  arrivalsPerMinute: number[];
  matchesPerMinute: number[];
  playersPerMinute: number[];
  waitP50Secs: (number | null)[];
  waitP95Secs: (number | null)[];
  skillSpreadMean: (number | null)[];
  teamImbalanceMean: (number | null)[];
  poolSize: (number | null)[];
}

export interface RuleCount {
  rulesetId: string;
  rule: string;
  count: number;
}

class QueueHistory {
  private readonly buckets: Bucket[] = [];
  readonly recent: RecentMatch[] = [];

  bucket(nowMs: number): Bucket {
    const startMs = nowMs - (nowMs % BUCKET_MS);
    const last = this.buckets[this.buckets.length - 1];
    if (last?.startMs === startMs) return last;
    const fresh: Bucket = {
      startMs,
      created: 0,
      matches: 0,
      players: 0,
      waitsSeen: 0,
      waitsMs: [],
      spreadSum: 0,
      imbalanceSum: 0,
      pool: undefined,
      rejections: new Map(),
    };
    this.buckets.push(fresh);
    while (this.buckets.length > 0 && this.buckets[0]!.startMs <= startMs - BUCKETS * BUCKET_MS) this.buckets.shift();
    return fresh;
  }

  addWait(b: Bucket, ms: number): void {
    b.waitsSeen++;
    if (b.waitsMs.length < WAIT_SAMPLES) b.waitsMs.push(ms);
    else {
      const slot = Math.floor(Math.random() * b.waitsSeen);
      if (slot < WAIT_SAMPLES) b.waitsMs[slot] = ms;
    }
  }

  series(nowMs: number): QueueSeries {
    const byStart = new Map(this.buckets.map((b) => [b.startMs, b]));
    const perMinute = 60_000 / BUCKET_MS;
    const current = nowMs - (nowMs % BUCKET_MS);
    const s: QueueSeries = {
      bucketMs: BUCKET_MS,
      startMs: [],
      arrivalsPerMinute: [],
      matchesPerMinute: [],
      playersPerMinute: [],
      waitP50Secs: [],
      waitP95Secs: [],
      skillSpreadMean: [],
      teamImbalanceMean: [],
      poolSize: [],
    };
    for (let i = BUCKETS - 1; i >= 0; i--) {
      const startMs = current - i * BUCKET_MS;
      const b = byStart.get(startMs);
      const sorted = b ? [...b.waitsMs].sort((x, y) => x - y) : [];
      s.startMs.push(startMs);
      s.arrivalsPerMinute.push((b?.created ?? 0) * perMinute);
      s.matchesPerMinute.push((b?.matches ?? 0) * perMinute);
      s.playersPerMinute.push((b?.players ?? 0) * perMinute);
      s.waitP50Secs.push(percentile(sorted, 0.5));
      s.waitP95Secs.push(percentile(sorted, 0.95));
      s.skillSpreadMean.push(b && b.matches > 0 ? b.spreadSum / b.matches : null);
      s.teamImbalanceMean.push(b && b.matches > 0 ? b.imbalanceSum / b.matches : null);
      s.poolSize.push(b?.pool ?? null);
    }
    return s;
  }

  /** Candidates refused per ruleset and rule over the last `windowMs`, most first. */
  rules(nowMs: number, windowMs: number): RuleCount[] {
    const totals = new Map<string, number>();
    for (const b of this.buckets) {
      if (b.startMs < nowMs - windowMs) continue;
      for (const [key, count] of b.rejections) totals.set(key, (totals.get(key) ?? 0) + count);
    }
    return [...totals]
      .map(([key, count]) => {
        const [rulesetId, rule] = key.split('\u0000') as [string, string];
        return { rulesetId, rule, count };
      })
      .sort((a, b) => b.count - a.count);
  }
}

/** Nearest-rank percentile of sorted values (seconds), null when there are none. */
function percentile(sortedMs: readonly number[], q: number): number | null {
  if (sortedMs.length === 0) return null;
  return sortedMs[Math.min(sortedMs.length - 1, Math.ceil(q * sortedMs.length) - 1)]! / 1000;
}

export class QueueActivity implements QueueTelemetry {
  private readonly queues = new Map<string, QueueHistory>();

  constructor(private readonly now: () => number = Date.now) {}

  ticketsCreated(queueId: string, count: number): void {
    this.current(queueId).created += count;
  }

  ticketsLeft(): void {}

  backfillFilled(): void {}

  matchFormed(m: MatchFacts): void {
    const history = this.history(m.queueId);
    const b = history.bucket(this.now());
    b.matches++;
    b.players += m.players;
    b.spreadSum += m.skillSpread;
    b.imbalanceSum += m.teamImbalance;
    for (const ms of m.waitsMs) history.addWait(b, ms);
    const { matchId, rulesetId, atMs, teams, host, skillSpread, teamImbalance } = m;
    history.recent.unshift({ matchId, rulesetId, atMs, teams, host, skillSpread, teamImbalance, longestWaitMs: Math.max(0, ...m.waitsMs) });
    history.recent.length = Math.min(history.recent.length, RECENT_MATCHES);
  }

  tick(t: TickFacts): void {
    const b = this.current(t.queueId);
    for (const r of t.rejections) {
      const key = `${r.rulesetId}\u0000${r.rule}`;
      b.rejections.set(key, (b.rejections.get(key) ?? 0) + r.count);
    }
  }

  /** The pool's size now (sampled by the dashboard's reader, so an idle queue still has a line). */
  samplePool(queueId: string, size: number): void {
    this.current(queueId).pool = size;
  }

  view(queueId: string, ruleWindowMs: number): { series: QueueSeries; rules: RuleCount[]; recentMatches: RecentMatch[] } {
    const history = this.history(queueId);
    const nowMs = this.now();
    return { series: history.series(nowMs), rules: history.rules(nowMs, ruleWindowMs), recentMatches: history.recent };
  }

  private history(queueId: string): QueueHistory {
    let history = this.queues.get(queueId);
    if (!history) this.queues.set(queueId, (history = new QueueHistory()));
    return history;
  }

  private current(queueId: string): Bucket {
    return this.history(queueId).bucket(this.now());
  }
}
