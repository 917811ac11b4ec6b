// Reference implementation of the standard matching engine's tick, in plain TypeScript. It ports
// `run_tick` (crates/engine/src/validate.rs + crates/engine/src/tick/) one step at a time and is
// meant to be READ: it documents the algorithm of docs/engine.md and is the oracle of the differential
// test (test/engine/engine-differential.test.ts), which requires bit-identical output from the native engine.
//
// It takes the same inputs as the napi binding (PoolArrays, QueueParams, nowMs, seed) and writes the same
// MatchArrays layout, rule diagnostics (`ruleCounts`, docs/rule-diagnostics.md) and the per-ticket refusal
// record (`ticketRefusals`, the same doc's "Per ticket") included. Faithfulness notes:
// - Floating-point expressions are evaluated in the same order as the Rust code (JS numbers are f64, and
//   Rust does not fuse multiply-adds), so every comparison sees the same bits.
// - u64 bitsets (attributes, acceptable hosts) are bigint; u32 values (ruleset masks) use >>> 0.
// - What the Rust code does only for speed (copying columns into skill order, prefetching, path halving
//   in the union-find) is either kept because it is short or replaced by the obvious equivalent; none of it
//   changes the result.
import type { MatchArrays, PoolArrays, QueueParams, RulesetParams } from '../../../src/engine/native.js';
import { balanceTeams } from './reference-balance.js';
import { candidateCost } from './reference-cost.js';
import { placeTwoTeams } from './reference-packing.js';
import { cmp, fmax, fmin, mix, range } from './reference-numbers.js';
import {
  ATTRIBUTES,
  EXAMINED,
  FAILED,
  NO_ACCEPTABLE_HOST,
  PARTY_SIZE,
  REFUSAL_NONE,
  refusalOf,
  SKILL_SPREAD,
  TEAM_IMBALANCE,
} from './reference-diagnostics.js';
import { RULE_COLUMNS, validate } from './reference-validate.js';
import { type Bounds, boundsForWait, widestLatencyMs } from '../../../src/engine/ruleset-bounds.js';

export { mix };

/** `match_preferred_host` value when a match has no host (u32::MAX). */
export const NO_HOST = 0xffff_ffff;
const U64_MAX = 0xffff_ffff_ffff_ffffn;
/** Same as TickEngine, but synchronous and in TypeScript. */
export class ReferenceTickEngine {
  constructor(private params: QueueParams) {}

  configure(params: QueueParams): void {
    this.params = params;
  }

  run(pool: PoolArrays, out: MatchArrays, nowMs: number, seed: number | bigint): number {
    return referenceTick(pool, this.params, out, nowMs, seed);
  }
}

/**
 * Matches one queue's pool once: writes the matches into `out` and returns how many were formed.
 * Throws on invalid input (where run_tick returns Err), before writing anything.
 */
export function referenceTick(pool: PoolArrays, params: QueueParams, out: MatchArrays, nowMs: number, seed: number | bigint): number {
  validate(pool, params, out, nowMs);
  const n = pool.ticketCount;
  const F = pool.filterCount;
  const H = pool.hostCount;
  const norm = params.mmrNormalizationRef;
  const rulesets = params.rulesets;
  const containment = params.filterModes.map((m) => m === 'containment');
  const seed64 = BigInt.asUintN(64, BigInt(seed));

  out.matchOffsets[0] = 0;
  // Rule diagnostics: per ruleset, the failed candidate matches and the rule decisions against them.
  const ruleCounts = out.ruleCounts;
  ruleCounts?.fill(0, 0, rulesets.length * RULE_COLUMNS);
  const count = (r: number, column: number, k = 1): void => {
    if (ruleCounts !== undefined) ruleCounts[r * RULE_COLUMNS + column]! += k;
  };
  // Per ticket, why it still waits: the rejections of the current seed's failed candidates, over its rulesets.
  const refusals = out.ticketRefusals;
  const seedRejected = [0, 0, 0, 0, 0];
  /** A candidate of ruleset r failed at once, for `reason`. */
  const failAtCounted = (r: number, reason: number): undefined => {
    count(r, reason);
    count(r, FAILED);
    seedRejected[reason]!++;
    return undefined;
  };
  // Every ticket in one of the queue's rulesets starts as set aside (no_acceptable_host); every one the seed
  // loop reaches is overwritten below.
  const validMask = rulesets.length >= 32 ? 0xffff_ffff : (1 << rulesets.length) - 1;
  for (let i = 0; refusals !== undefined && i < n; i++)
    refusals[i] = (pool.rulesetMask[i]! & validMask) >>> 0 !== 0 ? NO_ACCEPTABLE_HOST + 1 : REFUSAL_NONE;
  if (n === 0 || rulesets.length === 0) return 0;

  // ---- 1. Skill order: tickets sorted by (effective skill, pool index). ----------------------------
  // eff = mmr_mean + party_synergy_bonus * (party_size - 1). -0 and +0 sort together (order_key).
  const effOf = (i: number): number => pool.mmrMean[i]! + params.partySynergyBonus * (pool.partySize[i]! - 1);
  const bySkill = Array.from({ length: n }, (_, i) => i);
  const effByTicket = bySkill.map(effOf);
  bySkill.sort((a, b) => cmp(effByTicket[a]!, effByTicket[b]!) || a - b);
  // Per skill position p: the ticket (pool index), its effective skill, party size and ruleset mask.
  const ticket = bySkill;
  const eff = ticket.map((i) => effByTicket[i]!);
  const party = ticket.map((i) => pool.partySize[i]!);
  const rulesetMask = ticket.map((i) => pool.rulesetMask[i]!);

  // ---- 2. Seed order: oldest first; equal arrivals by a seeded hash of the pool index (its high 32 bits),
  // then by SKILL POSITION (tick/layout.rs packs `hash & 0xFFFF_FFFF_0000_0000 | p` into one u64 key). ----------
  const tieHash = ticket.map((i) => Number(mix(seed64 ^ mix(BigInt(i))) >> 32n));
  const seedOrder = Array.from({ length: n }, (_, p) => p);
  seedOrder.sort((p, q) => cmp(pool.arrivalMs[ticket[p]!]!, pool.arrivalMs[ticket[q]!]!) || tieHash[p]! - tieHash[q]! || p - q);

  // ---- Per-ticket helpers (p, q are skill positions). ------------------------------------------------
  /** Bit h set when the ticket's latency to host h is within `bound`. */
  const hostMask = (p: number, bound: number): bigint => {
    const row = ticket[p]! * H;
    let m = 0n;
    for (let h = 0; h < H; h++) if (pool.latencyMs[row + h]! <= bound) m |= 1n << BigInt(h);
    return m;
  };
  /** Every attribute filter accepts the pair: overlap = values intersect; containment = each side's
   *  values are within the other's accepts. */
  const compatible = (p: number, q: number): boolean => {
    const a = ticket[p]! * F;
    const b = ticket[q]! * F;
    for (let f = 0; f < F; f++) {
      const va = pool.attrValues[a + f]!;
      const vb = pool.attrValues[b + f]!;
      const ok = containment[f] ? ((va & ~pool.attrAccepts[b + f]!) | (vb & ~pool.attrAccepts[a + f]!)) === 0n : (va & vb) !== 0n;
      if (!ok) return false;
    }
    return true;
  };
  const waitOf = (p: number): number => nowMs - pool.arrivalMs[ticket[p]!]!;

  // ---- Unused tickets, skipped in near-constant time. --------------------------------------------------
  // Union-find "next unused slot" to the left and to the right, with path halving. Slot k is skill
  // position k - 1; slots 0 and n + 1 are sentinels that are never used.
  const used = new Uint8Array(n);
  const nextLeft = Uint32Array.from({ length: n + 2 }, (_, k) => k);
  const nextRight = Uint32Array.from({ length: n + 2 }, (_, k) => k);
  const find = (next: Uint32Array, x: number): number => {
    for (;;) {
      const p = next[x]!;
      if (p === x) return x;
      const gp = next[p]!;
      next[x] = gp;
      x = gp;
    }
  };
  const markUsed = (p: number): void => {
    used[p] = 1;
    nextRight[p + 1] = p + 2;
    nextLeft[p + 1] = p;
  };

  // ---- 4. Candidate search around one seed, for one ruleset. ---------------------------------------------
  interface Candidate {
    /** Skill positions, seed first, then in the order the scan added them. */
    sel: number[];
    team: number[];
    /** AND of the host masks of `sel` (the acceptable hosts when the ruleset requires a host). */
    hosts: bigint;
  }

  /** The candidate's cost (reference-cost.ts): over the common acceptable hosts when latency filtered, else all. */
  /** Every host's bit (0 without hosts). */
  const allHosts = H === 0 ? 0n : U64_MAX >> BigInt(64 - H);
  /** Of the hosts in `choices`, the one with the lowest worst latency over `sel` (lowest index on ties) and
   *  that latency (emit.rs `cheapest_host`); [NO_HOST, u32::MAX] when `choices` is empty. */
  const cheapestHost = (sel: readonly number[], choices: bigint): [number, number] => {
    let host = NO_HOST;
    let best = 0xffff_ffff;
    for (let h = 0; h < H; h++) {
      if (((choices >> BigInt(h)) & 1n) === 0n) continue;
      const worst = Math.max(...sel.map((p) => pool.latencyMs[ticket[p]! * H + h]!));
      if (worst < best) [host, best] = [h, worst];
    }
    return [host, best];
  };
  /** The candidate's cost (reference-cost.ts): latency at its cheapest common acceptable host when latency
   *  filtered, else at the cheapest of all. */
  const cost = (c: Candidate, rs: RulesetParams, bounds: Bounds, hostFilter: boolean): number =>
    candidateCost(
      {
        eff: c.sel.map((p) => eff[p]!),
        party: c.sel.map((p) => party[p]!),
        team: c.team,
        latency: H === 0 ? 0 : cheapestHost(c.sel, hostFilter ? c.hosts : allHosts)[1],
      },
      rs,
      norm,
      bounds,
    );

  /**
   * The candidate match around seed `sp`: the nearest tickets first; when their spread uses more than a
   * quarter of the bound, also the candidates grown around a centre half that spread below and above the
   * seed, and the one of the lowest cost wins (the first on ties). Only the first candidate's failure counts.
   */
  const tryForm = (
    sp: number,
    r: number,
    rs: RulesetParams,
    bounds: Bounds,
    hostFilter: boolean,
    counted: boolean,
  ): Candidate | undefined => {
    const first = grow(sp, r, rs, bounds, hostFilter, 0, counted);
    if (first === undefined) return undefined;
    const spread = range(first.sel.map((p) => eff[p]!));
    if (spread / norm <= 0.25 * bounds.maxSkillSpread) return first;
    let best = first;
    let bestCost = cost(first, rs, bounds, hostFilter);
    for (const shift of [-0.5 * spread, 0.5 * spread]) {
      const other = grow(sp, r, rs, bounds, hostFilter, shift, false);
      if (other === undefined) continue;
      const c = cost(other, rs, bounds, hostFilter);
      if (c < bestCost) {
        best = other;
        bestCost = c;
      }
    }
    return best;
  };

  /**
   * Grows one candidate: the scan takes the unused tickets nearest to the seed's skill + `shift` first.
   * `hostFilter`: the candidate must keep a common acceptable host. `counted`: a failure counts in the
   * rule diagnostics.
   */
  const grow = (
    sp: number,
    r: number,
    rs: RulesetParams,
    bounds: Bounds,
    hostFilter: boolean,
    shift: number,
    counted: boolean,
  ): Candidate | undefined => {
    const failAt = (r: number, reason: number): undefined => (counted ? failAtCounted(r, reason) : undefined);
    const teamSize = rs.teamSize;
    const seedSize = party[sp]!;
    if (seedSize > teamSize) return failAt(r, PARTY_SIZE);
    if (hostFilter && H === 0) return failAt(r, NO_ACCEPTABLE_HOST);
    // Bounds from the seed's wait: every older unused ticket has already seeded, so the seed is normally
    // the candidate's oldest; when it is not, these bounds are only tighter.
    const { maxSkillSpread: spread, maxLatencyMs: latBound } = bounds;
    let hosts = hostMask(sp, latBound);
    if (hostFilter && hosts === 0n) return failAt(r, NO_ACCEPTABLE_HOST);

    const sel = [sp];
    const team = [0];
    const room = new Array<number>(rs.teams).fill(teamSize);
    room[0]! -= seedSize;
    let remaining = rs.teams * teamSize - seedSize;
    const eSeed = eff[sp]!;
    let lo = eSeed;
    let hi = eSeed;

    // Scan outwards in skill order over unused tickets, nearer side first (ties go right), until the match
    // is full, both sides leave the skill window, or `limit` tickets were examined.
    const limit = Math.min(Math.max(rs.teams * teamSize * 16, 64), 16_384);
    // Raw-unit window, widened by a hair so it never prunes what the exact spread check would accept.
    const win = spread * norm * (1.0 + 1e-12);
    // Inside the window, distances are from the scan's centre; along each side they still grow.
    const centre = eSeed + shift;
    const distLeft = (slot: number): number => {
      if (slot === 0) return Infinity;
      return eSeed - eff[slot - 1]! <= win ? centre - eff[slot - 1]! : Infinity;
    };
    const distRight = (slot: number): number => {
      if (slot === n + 1) return Infinity;
      return eff[slot - 1]! - eSeed <= win ? eff[slot - 1]! - centre : Infinity;
    };
    let left = find(nextLeft, sp); // slot of the seed is sp + 1
    let right = find(nextRight, sp + 2);
    let dl = distLeft(left);
    let dr = distRight(right);
    let examined = 0;
    // Rule decisions against this candidate by reason (column), counted only if it fails.
    const rejected = [0, 0, 0, 0, 0];
    while (remaining > 0 && examined < limit) {
      let p: number;
      if (dl < dr) {
        p = left - 1;
        left = find(nextLeft, left - 1);
        dl = distLeft(left);
      } else if (dr < Infinity) {
        p = right - 1;
        right = find(nextRight, right + 1);
        dr = distRight(right);
      } else break;
      examined++;

      // The ticket joins when all of these hold. A ticket that fails one counts under the first it fails, in
      // this order (the Rust scan's).
      if (((rulesetMask[p]! >>> r) & 1) === 0) continue; // competes in this ruleset (else no candidate here)
      const size = party[p]!;
      // Best fit: the fullest team that still has room (lowest index on ties).
      let best = -1;
      for (let t = 0; t < rs.teams; t++) if (room[t]! >= size && (best === -1 || room[t]! < room[best]!)) best = t;
      // A party the teams as placed have no room for may fit two teams placed anew.
      const repacked =
        best === -1 && rs.teams === 2 && size <= remaining ? placeTwoTeams([...sel.map((o) => party[o]!), size], teamSize) : undefined;
      if (best === -1 && repacked === undefined) {
        rejected[PARTY_SIZE]!++; // fits in a team
        continue;
      }
      const nlo = fmin(lo, eff[p]!);
      const nhi = fmax(hi, eff[p]!);
      if ((nhi - nlo) / norm > spread) {
        rejected[SKILL_SPREAD]!++; // skill spread within bound
        continue;
      }
      if (!sel.every((o) => compatible(o, p))) {
        rejected[ATTRIBUTES]!++; // attribute-compatible with everyone chosen
        continue;
      }
      const m = hostMask(p, latBound);
      if (hostFilter && (hosts & m) === 0n) {
        rejected[NO_ACCEPTABLE_HOST]!++; // an acceptable host remains
        continue;
      }

      sel.push(p);
      if (repacked === undefined) {
        team.push(best);
        room[best]! -= size;
      } else {
        team.splice(0, team.length, ...repacked);
        room.fill(teamSize);
        sel.forEach((o, k) => {
          room[team[k]!]! -= party[o]!;
        });
      }
      remaining -= size;
      lo = nlo;
      hi = nhi;
      hosts &= m;
    }
    const full = remaining === 0;
    const balanced = () => balanceTeams(sel, team, { ...rs, maxTeamImbalance: bounds.maxTeamImbalance }, { eff, party }, norm);
    if (full && (rs.teams === 1 || balanced())) return { sel, team, hosts };

    // Failed: full but unbalanced, or short of players. Then the nearest unused ticket beyond the skill
    // window on each side (if it competes in the ruleset) was turned away by the spread bound.
    if (full) rejected[TEAM_IMBALANCE]!++;
    else {
      if (dl === Infinity && left !== 0 && ((rulesetMask[left - 1]! >>> r) & 1) === 1) rejected[SKILL_SPREAD]!++;
      if (dr === Infinity && right !== n + 1 && ((rulesetMask[right - 1]! >>> r) & 1) === 1) rejected[SKILL_SPREAD]!++;
    }
    if (!counted) return undefined;
    for (const [reason, k] of rejected.entries()) {
      count(r, reason, k);
      seedRejected[reason]! += k;
    }
    count(r, FAILED);
    count(r, EXAMINED, examined);
    return undefined;
  };

  // ---- Output of one match. -----------------------------------------------------------------------------------
  let matches = 0;
  let written = 0;
  const emit = (c: Candidate, r: number, latBound: number, hostFiltered: boolean): void => {
    const m = matches;
    out.matchRuleset[m] = r;
    c.sel.forEach((p, k) => {
      out.matchTickets[written + k] = ticket[p]!;
      out.ticketTeam[written + k] = c.team[k]!;
    });
    out.matchOffsets[m + 1] = written + c.sel.length;

    // Acceptable hosts: every host within the (relaxed) latency bound of every ticket. A scan that kept a
    // common host already maintained that set; otherwise it is computed here and may be empty.
    let acceptable = c.hosts;
    if (!hostFiltered) {
      acceptable = allHosts;
      for (const p of c.sel) acceptable &= hostMask(p, latBound);
    }
    // Preferred: the acceptable host with the lowest cost (max latency over the tickets), lowest index on ties;
    // with none acceptable, the cheapest of all hosts.
    const [preferred] = cheapestHost(c.sel, acceptable !== 0n ? acceptable : allHosts);
    out.matchPreferredHost[m] = preferred;
    out.matchAcceptableHosts[m] = acceptable;

    // Per filter: the intersection of the tickets' accepts.
    for (let f = 0; f < F; f++) {
      let inter = U64_MAX;
      for (const p of c.sel) inter &= pool.attrAccepts[ticket[p]! * F + f]!;
      out.matchAccepts[m * F + f] = inter;
    }
    matches++;
    written += c.sel.length;
  };

  // ---- Tickets that can be in no match are used from the start: for every ruleset they compete in, it
  // requires a host and none of theirs is within its widest latency bound. Seeds skip them and scans step
  // over them without counting them as examined. Each counts as a candidate of each of its rulesets that
  // failed for want of a host (as its seed would have). -----------------------------------------------------
  const widest = rulesets.map((rs) => (rs.requireHost ? widestLatencyMs(rs) : undefined));
  for (let p = 0; p < n; p++) {
    let possible = false;
    for (let r = 0; r < rulesets.length && !possible; r++) {
      if (((rulesetMask[p]! >>> r) & 1) === 0) continue;
      const bound = widest[r];
      possible = bound === undefined || hostMask(p, bound) !== 0n;
    }
    if (!possible) {
      markUsed(p);
      for (let r = 0; r < rulesets.length; r++) if (((rulesetMask[p]! >>> r) & 1) === 1) failAtCounted(r, NO_ACCEPTABLE_HOST);
    }
  }

  // ---- 3. Oldest first: each unused seed tries its rulesets in ascending index; the first match wins. ------
  // A seed that forms nothing records its refusal; every ticket of a match (a failed seed among them) none.
  for (const sp of seedOrder) {
    if (used[sp]) continue;
    seedRejected.fill(0);
    let formed = false;
    for (let r = 0; r < rulesets.length && !formed; r++) {
      if (((rulesetMask[sp]! >>> r) & 1) === 0) continue; // bits >= the ruleset count are ignored
      const rs = rulesets[r]!;
      const bounds = boundsForWait(rs, waitOf(sp));
      // Latency is a filter first: a common acceptable host; without require_host, once the seed's bounds
      // allow it (or with no hosts at all), a match without one.
      let c: Candidate | undefined;
      let hostFiltered = true;
      const filtered = rs.requireHost || H > 0;
      if (filtered) c = tryForm(sp, r, rs, bounds, true, true);
      if (c === undefined && (bounds.anyHost || (H === 0 && !rs.requireHost))) {
        // A seed fails at most once per ruleset in the diagnostics: after a filtered attempt, only it counts.
        c = tryForm(sp, r, rs, bounds, false, !filtered);
        hostFiltered = false;
      }
      if (c === undefined) continue;
      emit(c, r, bounds.maxLatencyMs, hostFiltered);
      for (const p of c.sel) {
        markUsed(p);
        if (refusals !== undefined) refusals[ticket[p]!] = REFUSAL_NONE;
      }
      formed = true;
    }
    if (!formed && refusals !== undefined) refusals[ticket[sp]!] = refusalOf(seedRejected);
  }
  return matches;
}
