// A queue's recent matches, per ruleset, as the statistics and the wait estimates read them
// (docs/explain-and-statistics.md): how many matches and matched tickets in each 10-second bucket of the
// last five minutes, and the matched tickets' waits. Bounded: per ruleset at most BUCKETS buckets, each with
// at most WAIT_SAMPLES waits (beyond that a uniform sample, whose waits then stand for several tickets).
// Fed from the applied `match.commit` records, so every replica that applies the queue's log keeps one.

/** The statistics and the estimates look back this far. */
export const HISTORY_WINDOW_MS = 5 * 60_000;
const BUCKET_MS = 10_000;
const BUCKETS = HISTORY_WINDOW_MS / BUCKET_MS;
/** Waits kept per bucket; beyond that a uniform sample (reservoir). */
const WAIT_SAMPLES = 256;
/** An estimate needs at least this many matched tickets behind it (docs/explain-and-statistics.md). */
export const MIN_ESTIMATE_TICKETS = 10;

interface Bucket {
  startMs: number;
  matches: number;
  players: number;
  /** Matched tickets (each ticket's wait is in `waitsMs`, or represented there once it is full). */
  tickets: number;
  waitsMs: number[];
}

/** Matched tickets' waits over a window: each kept wait stands for `weight` tickets of its bucket. */
export interface WaitSample {
  waitMs: number;
  weight: number;
}

/** What a window of the history holds. */
export interface HistoryWindow {
  windowMs: number;
  matches: number;
  tickets: number;
  players: number;
  waits: WaitSample[];
}

/** The remaining wait the history predicts for a ticket that has waited some time, or why it cannot. */
export type WaitEstimate =
  | { available: true; remainingMs: number; basedOnTickets: number }
  | { available: false; basedOnTickets: number; reason: string };

export class MatchHistory {
  private readonly byRuleset = new Map<string, Bucket[]>();

  constructor(private readonly random: () => number = Math.random) {}

  /** A committed match of `rulesetId` at `atMs`: its tickets' waits (creation to match) and its players. */
  record(rulesetId: string, atMs: number, waitsMs: readonly number[], players: number): void {
    let buckets = this.byRuleset.get(rulesetId);
    if (!buckets) this.byRuleset.set(rulesetId, (buckets = []));
    const startMs = atMs - (atMs % BUCKET_MS);
    // Records come in log order, so in time order but for clock skew between leaders: a late one joins its bucket.
    let bucket = buckets.find((b) => b.startMs === startMs);
    if (!bucket) {
      bucket = { startMs, matches: 0, players: 0, tickets: 0, waitsMs: [] };
      buckets.push(bucket);
      buckets.sort((a, b) => a.startMs - b.startMs);
    }
    bucket.matches++;
    bucket.players += players;
    for (const ms of waitsMs) {
      bucket.tickets++;
      if (bucket.waitsMs.length < WAIT_SAMPLES) bucket.waitsMs.push(ms);
      else {
        const slot = Math.floor(this.random() * bucket.tickets);
        if (slot < WAIT_SAMPLES) bucket.waitsMs[slot] = ms;
      }
    }
    const oldest = Math.max(...buckets.map((b) => b.startMs)) - (BUCKETS - 1) * BUCKET_MS;
    while (buckets.length > 0 && buckets[0]!.startMs < oldest) buckets.shift();
  }

  /** The matches of `rulesetIds` in the window ending at `nowMs` (buckets that started within it). */
  window(rulesetIds: readonly string[], nowMs: number): HistoryWindow {
    const from = nowMs - HISTORY_WINDOW_MS;
    const out: HistoryWindow = { windowMs: HISTORY_WINDOW_MS, matches: 0, tickets: 0, players: 0, waits: [] };
    for (const id of rulesetIds) {
      for (const b of this.byRuleset.get(id) ?? []) {
        if (b.startMs < from || b.startMs > nowMs) continue;
        out.matches += b.matches;
        out.tickets += b.tickets;
        out.players += b.players;
        const weight = b.tickets / b.waitsMs.length;
        for (const waitMs of b.waitsMs) out.waits.push({ waitMs, weight });
      }
    }
    return out;
  }
}

/** The weighted nearest-rank quantile q (0 < q <= 1) of the waits; undefined when there are none. */
export function waitQuantile(waits: readonly WaitSample[], q: number): number | undefined {
  if (waits.length === 0) return undefined;
  const sorted = [...waits].sort((a, b) => a.waitMs - b.waitMs);
  const total = sorted.reduce((sum, w) => sum + w.weight, 0);
  let seen = 0;
  for (const w of sorted) {
    seen += w.weight;
    // A hair of slack: weights are ratios, and their sum may fall short of q * total by rounding.
    if (seen >= q * total * (1 - 1e-12)) return w.waitMs;
  }
  return sorted[sorted.length - 1]!.waitMs;
}

/**
 * The estimated remaining wait of a ticket that has waited `waitedMs`: among the matched tickets of the window
 * that had waited at least as long when they were matched, the median of what they waited beyond that. Too
 * little history (fewer than MIN_ESTIMATE_TICKETS such tickets) gives no estimate.
 */
export function estimateRemainingWait(history: HistoryWindow, waitedMs: number): WaitEstimate {
  const longer = history.waits.filter((w) => w.waitMs >= waitedMs).map((w) => ({ waitMs: w.waitMs - waitedMs, weight: w.weight }));
  const basedOnTickets = Math.round(longer.reduce((sum, w) => sum + w.weight, 0));
  if (basedOnTickets < MIN_ESTIMATE_TICKETS) {
    const secs = Math.round(history.windowMs / 1000);
    const waited = waitedMs > 0 ? ` after waiting at least ${(waitedMs / 1000).toFixed(1)} s` : '';
    return {
      available: false,
      basedOnTickets,
      reason: `too little history: ${basedOnTickets} ticket(s) matched${waited} in the last ${secs} s (${MIN_ESTIMATE_TICKETS} needed)`,
    };
  }
  return { available: true, remainingMs: waitQuantile(longer, 0.5)!, basedOnTickets };
}
