//! Growing one candidate match around a seed: scan outwards in skill order over the unused
//! tickets, take each one that keeps every bound (ruleset, room in a team, skill spread,
//! attributes, a common host), and balance the teams once they are full. A candidate that fails
//! adds the rule decisions against it to the ruleset's diagnostics.

use super::balance::{balance, range};
use super::classes::FilterBits;
use super::emit::cheapest_host;
use super::lanes::{lat_words, HostMask, LatBound};
use super::layout::Ctx;
use super::links::Skip;
use super::scratch::{Agg, Scratch};
use crate::{Bounds, Rejection, RuleDiagnostics, Ruleset};

/// Bit offsets of the per-candidate rejection counts packed in one u64 (see `try_form`).
const LANE_PARTY: u32 = 0;
const LANE_SPREAD: u32 = 16;
const LANE_ATTRS: u32 = 32;
const LANE_HOST: u32 = 48;

/// The largest `t` with `t / norm <= spread` (IEEE division, `spread >= 0`, `norm > 0`):
/// division is monotone, so for every x (negative, infinite and NaN included),
/// `x / norm > spread` exactly when `x > t`.
fn spread_threshold(spread: f64, norm: f64) -> f64 {
    if f64::INFINITY / norm <= spread {
        return f64::INFINITY;
    }
    let ok = |t: f64| t / norm <= spread;
    // `spread * norm` is within an ulp or two of the answer unless it is subnormal or overflows:
    // step to it from there, and bisect only when that does not settle at once.
    let guess = spread * norm;
    if guess.is_finite() && guess >= f64::MIN_POSITIVE {
        let mut t = guess;
        for _ in 0..4 {
            if !ok(t) {
                t = f64::from_bits(t.to_bits() - 1);
            } else if ok(f64::from_bits(t.to_bits() + 1)) {
                t = f64::from_bits(t.to_bits() + 1);
            } else {
                return t;
            }
        }
    }
    // Bisect over the bit patterns of [0, inf], which order like the values: `lo` passes,
    // `hi` fails.
    let (mut lo, mut hi) = (0u64, f64::INFINITY.to_bits());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(f64::from_bits(mid)) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    f64::from_bits(lo)
}

/// Tries to build a match of ruleset `r` around the seed at live position `sp`, under the
/// seed's bounds: the candidate of the lowest cost among those `grow` makes (see the body). On success
/// `sc.sel` holds the live positions (seed first) and `sc.sel_team` their teams, and the
/// acceptable-host mask (exact only with `host_filter`), the latency bound and whether the match is the
/// first scan's (no other candidate was grown: `Found::one_scan`) are returned. On failure the rule
/// decisions against the first candidate are added to `diag` (docs/rule-diagnostics.md).
#[allow(clippy::too_many_arguments)]
pub(super) fn try_form<M: HostMask, S: Skip>(
    ctx: &Ctx<'_>,
    links: &mut S,
    sc: &mut Scratch,
    sp: u32,
    bounds: &Bounds,
    host_filter: bool,
    r: usize,
    rs: &Ruleset<'_>,
    diag: &mut RuleDiagnostics,
) -> Option<Found<M>> {
    let first = grow(ctx, links, sc, sp, bounds, host_filter, r, rs, 0.0, diag)?;
    // The nearest tickets to the seed make a candidate; when its spread uses a good part of the bound,
    // also grow one around a centre below the seed and one above it (the seed stays in both), and keep
    // the candidate of the lowest cost. A dense pool's first candidate is tight and costs nothing more.
    let spread = range(&sc.sel_eff);
    // (NaN never explores; the spread is finite and the bound not NaN, so it does not occur.)
    if spread / ctx.norm <= EXPLORE_SPREAD_SHARE * bounds.max_skill_spread {
        return Some(Found { hosts: first.0, lat: first.1, one_scan: true });
    }
    let mut best = first;
    let mut best_cost = cost(ctx, sc, bounds, rs, host_filter, first.0);
    sc.keep_best();
    let mut ignored = RuleDiagnostics::default();
    for shift in [-0.5 * spread, 0.5 * spread] {
        if let Some(other) = grow(ctx, links, sc, sp, bounds, host_filter, r, rs, shift, &mut ignored) {
            let c = cost(ctx, sc, bounds, rs, host_filter, other.0);
            if c < best_cost {
                (best, best_cost) = (other, c);
                sc.keep_best();
            }
        }
    }
    sc.restore_best();
    Some(Found { hosts: best.0, lat: best.1, one_scan: false })
}

/// A match `try_form` formed: its acceptable hosts (exact only when the scan kept to common hosts) and
/// latency bound, and whether it is the only candidate grown. Such a match is what its scan took of the
/// tickets it met nearest first, each one it passed over having changed nothing; so the same scan finds
/// it again when tickets it passed over (or never reached) have been taken meanwhile, and only the
/// taking of one of its own tickets can change it (tick/speculate.rs spares such tries a retry).
#[derive(Clone, Copy, Debug)]
pub(super) struct Found<M> {
    pub(super) hosts: M,
    pub(super) lat: LatBound,
    pub(super) one_scan: bool,
}

/// A first candidate whose skill spread is above this share of the bound in force is compared with
/// the candidates grown around shifted centres (`try_form`).
const EXPLORE_SPREAD_SHARE: f64 = 0.25;

/// `x / bound`, or 0 for an unbounded (or zero) bound: a term of the cost.
fn share(x: f64, bound: f64) -> f64 {
    if bound > 0.0 && bound < f64::INFINITY {
        x / bound
    } else {
        0.0
    }
}

/// The quality cost of the selected candidate (lower is better): its skill spread, team imbalance and
/// worst latency at its best host, each divided by its bound in force. `hosts` is the common acceptable
/// host mask when the scan kept one; otherwise every host counts.
fn cost<M: HostMask>(
    ctx: &Ctx<'_>,
    sc: &Scratch,
    bounds: &Bounds,
    rs: &Ruleset<'_>,
    host_filter: bool,
    hosts: M,
) -> f64 {
    let spread = range(&sc.sel_eff) / ctx.norm;
    let mut sums = [0.0f64; 64];
    let teams = (rs.teams as usize).min(64);
    for ((&e, &p), &t) in sc.sel_eff.iter().zip(&sc.sel_party).zip(&sc.sel_team) {
        if (t as usize) < teams {
            sums[t as usize] += e * f64::from(p);
        }
    }
    let imbalance = if teams > 1 && rs.teams as usize <= 64 {
        range(&sums[..teams]) / f64::from(rs.team_size) / ctx.norm
    } else {
        0.0
    };
    let latency = if ctx.h == 0 {
        0.0
    } else {
        let choices = if host_filter { hosts } else { M::all(ctx.h) };
        f64::from(cheapest_host(ctx, &sc.sel, choices).1)
    };
    share(spread, bounds.max_skill_spread)
        + share(imbalance, bounds.max_team_imbalance)
        + share(latency, f64::from(bounds.max_latency_ms))
}

/// Grows a candidate match of ruleset `r` around the seed at live position `sp`: the scan takes the
/// unused tickets nearest to `seed's skill + shift` first. On success `sc.sel` holds the live positions
/// (seed first) and `sc.sel_team` their teams, and the acceptable-host mask (exact only with
/// `host_filter`) and the latency bound are returned. On failure the rule decisions against the
/// candidate are added to `diag` (docs/rule-diagnostics.md).
#[allow(clippy::too_many_arguments)]
fn grow<M: HostMask, S: Skip>(
    ctx: &Ctx<'_>,
    links: &mut S,
    sc: &mut Scratch,
    sp: u32,
    bounds: &Bounds,
    host_filter: bool,
    r: usize,
    rs: &Ruleset<'_>,
    shift: f64,
    diag: &mut RuleDiagnostics,
) -> Option<(M, LatBound)> {
    let s = ctx.s;
    let w = lat_words(ctx.h);
    let (hot, rows) = (&s.hot[..], &s.rows[..]);
    let seed = hot[sp as usize + 1];
    let team_size = rs.team_size;
    let size_s = seed.party();
    if size_s > team_size {
        diag.fail(Rejection::PartySize);
        return None;
    }
    let (spread, lat_bound) = (bounds.max_skill_spread, bounds.max_latency_ms);
    if host_filter && ctx.h == 0 {
        diag.fail(Rejection::NoAcceptableHost);
        return None;
    }
    // The bounds follow the seed's wait. The seed is the oldest ticket processed so far that is
    // still unused; bounds only grow with wait, so they are never wider than those of the
    // candidate's oldest.
    //
    // `span / norm > spread` becomes one comparison (a division per candidate costs more than
    // the rest of its checks): the threshold is found once per candidate.
    let max_span = spread_threshold(spread, ctx.norm);
    let lat = LatBound::new(lat_bound, ctx.h);
    let row_of = |p: u32| &rows[p as usize * (w + 1) + 1..(p as usize + 1) * (w + 1)];
    let mut hosts = if host_filter { lat.host_mask::<M>(row_of(sp)) } else { M::EMPTY };
    if host_filter && hosts == M::EMPTY {
        diag.fail(Rejection::NoAcceptableHost);
        return None;
    }

    let Scratch { sel, sel_team, sel_party, sel_eff, room, overlap, wide, agg, overlap_values, two_teams, .. } = sc;
    let (wide_values, wide_words) = (&mut sc.wide_values, &mut sc.wide_words);
    let teams = rs.teams as usize;
    sel.clear();
    sel_team.clear();
    sel_party.clear();
    sel_eff.clear();
    room.clear();
    room.resize(teams, team_size);
    sel.push(sp);
    sel_team.push(0);
    sel_party.push(size_s);
    sel_eff.push(seed.eff);
    room[0] -= size_s;
    let mut remaining = rs.players_per_match() - size_s;
    if remaining == 0 {
        return Some((hosts, lat));
    }
    // A candidate fits some team iff its party is at most the largest room (which also bounds
    // the players still missing).
    let mut max_room = if teams > 1 { team_size } else { team_size - size_s };
    let e_s = seed.eff;
    let (mut lo, mut hi) = (e_s, e_s);
    let bit = 1u32 << r;
    let norm = ctx.norm;

    // Attribute compatibility with every selected ticket. With `FilterBits`: per filter, the
    // pairs compatible with all selected tickets. Otherwise from running aggregates:
    // containment (`v_c ⊆ a_s` and `v_s ⊆ a_c` for all s) is exactly `v_c ⊆ AND a` and
    // `OR v ⊆ a_c`; overlap with every selected value needs `v_c` non-zero (to meet the
    // `u64::MAX` "unspecified" values) and meeting each distinct other value.
    let fb = &s.bits;
    let (class_bits, compat) = (&fb.class_bits[..], &fb.compat[..]);
    let mut allowed = [u64::MAX; FilterBits::MAX_FILTERS];
    let filters = fb.filters;
    let allowed = &mut allowed[..if fb.enabled { filters } else { 0 }];
    let bits_of = |meta: u32| {
        let c = (meta >> 8) as usize;
        &class_bits[c * filters..(c + 1) * filters]
    };
    agg.clear();
    overlap_values.clear();
    wide_values.clear();
    wide_words.clear();
    if fb.enabled {
        for (k, (a, &b)) in allowed.iter_mut().zip(bits_of(seed.meta)).enumerate() {
            *a = compat[64 * k + b.trailing_zeros() as usize];
        }
    } else {
        let seed_attrs = ctx.attrs(sp, seed.meta);
        for (k, (&ov, va)) in overlap.iter().zip(seed_attrs.chunks_exact(2)).enumerate() {
            if ov {
                agg.push(Agg { and_accepts: u64::MAX, or_values: 0, nonzero: u64::MAX, wide: false });
                if va[0] != u64::MAX {
                    overlap_values.push((k, va[0]));
                }
            } else {
                agg.push(Agg { and_accepts: va[1], or_values: va[0], nonzero: 0, wide: false });
            }
        }
        for &(k, w) in wide.iter() {
            for g in &mut agg[k..k + w] {
                *g = Agg { and_accepts: u64::MAX, or_values: 0, nonzero: 0, wide: true };
            }
        }
        add_wide_values(wide, seed_attrs, wide_values, wide_words);
    }
    let attrs_ok = |agg: &[Agg],
                    overlap_values: &[(usize, u64)],
                    wide_values: &[(usize, usize)],
                    wide_words: &[u64],
                    rc: &[u64]| {
        let mut ok = true;
        for (g, va) in agg.iter().zip(rc.chunks_exact(2)) {
            let (v, a) = (va[0], va[1]);
            ok &= (v & !g.and_accepts) | (g.or_values & !a) == 0;
            ok &= (v | !g.nonzero) != 0;
        }
        for &(k, x) in overlap_values {
            ok &= rc[2 * k] & x != 0;
        }
        if !wide.is_empty() {
            ok &= wide_ok(wide, wide_values, wide_words, rc);
        }
        ok
    };

    // Scan outwards from the seed in skill order, nearest first (ties to the right), over unused
    // tickets only, until the match is full, both sides leave the window, or `limit` tickets
    // were examined, so a crowded or incompatible neighbourhood cannot make one seed cost O(n).
    let limit = (rs.players_per_match() as usize * 16).clamp(64, 16_384);
    // Raw-unit window, widened by a hair so it never prunes a ticket the exact (divided) spread
    // check would accept. Distances are infinite outside it; the sentinel records at both ends
    // of `hot` give infinity or NaN, so the scan stops there without bounds checks.
    let win = spread * norm * (1.0 + 1e-12);
    // Inside the window, a ticket's distance is from the scan's centre (the seed's skill, shifted);
    // along each side it still grows monotonically, so the sides merge in order of distance.
    let centre = e_s + shift;
    let left_of = |x: f64| if e_s - x <= win { centre - x } else { f64::INFINITY };
    let right_of = |x: f64| if x - e_s <= win { x - centre } else { f64::INFINITY };
    // The next unused slot on each side (slot = live position + 1) and its distance.
    let mut left = links.find(sp, 0);
    let mut right = links.find(sp + 2, 1);
    let mut dl = left_of(hot[left as usize].eff);
    let mut dr = right_of(hot[right as usize].eff);
    // Rule decisions against this candidate, kept only if it fails. One register holds the four
    // counts as 16-bit lanes (a scan examines at most 16,384 tickets), so the scan's registers do
    // not spill for them.
    let mut rejected = 0u64;
    let mut examined = limit;
    for i in 0..limit {
        let from_left = dl < dr;
        let p = if from_left {
            let p = left - 1;
            left = links.find(p, 0);
            dl = left_of(hot[left as usize].eff);
            p
        } else {
            if dr == f64::INFINITY {
                examined = i;
                break;
            }
            let p = right - 1;
            right = links.find(right + 1, 1);
            dr = right_of(hot[right as usize].eff);
            p
        };
        let c = hot[p as usize + 1];

        // Cheapest and most selective checks first; all are pure, so the order does not change
        // which tickets are taken. Skill order: a left candidate is at or below every selected
        // ticket, a right one at or above, so only one end of the skill range moves.
        if c.mask & bit == 0 {
            // A ticket of another ruleset is no candidate here.
            continue;
        }
        // A party the teams as placed have no room for may still fit two teams placed anew.
        let repack = c.party() > max_room;
        if repack && !(teams == 2 && c.party() <= remaining && two_teams.fits(sel_party, c.party(), team_size)) {
            rejected += 1 << LANE_PARTY;
            continue;
        }
        let span = if from_left { hi - c.eff } else { c.eff - lo };
        if span > max_span {
            rejected += 1 << LANE_SPREAD;
            continue;
        }
        let ok = if fb.enabled {
            allowed.iter().zip(bits_of(c.meta)).fold(true, |ok, (&a, &b)| ok & (a & b != 0))
        } else {
            attrs_ok(agg, overlap_values, wide_values, wide_words, ctx.attrs(p, c.meta))
        };
        if !ok {
            rejected += 1 << LANE_ATTRS;
            continue;
        }
        let m = if host_filter {
            let m = lat.host_mask::<M>(row_of(p));
            if hosts.and(m) == M::EMPTY {
                rejected += 1 << LANE_HOST;
                continue;
            }
            m
        } else {
            M::EMPTY
        };

        // Best fit: the fullest team that still has room, so exact fits are preferred.
        let size = c.party();
        let mut best = 0;
        let mut best_room = u32::MAX;
        for (k, &rm) in room.iter().enumerate() {
            if rm >= size && rm < best_room {
                best = k;
                best_room = rm;
            }
        }
        sel.push(p);
        sel_team.push(best as u32);
        sel_party.push(size);
        sel_eff.push(c.eff);
        if repack {
            two_teams.place(sel_party, team_size, sel_team);
            room.fill(team_size);
            for (&t, &sz) in sel_team.iter().zip(sel_party.iter()) {
                room[t as usize] -= sz;
            }
        } else {
            room[best] -= size;
        }
        remaining -= size;
        hosts = hosts.and(m);
        if remaining == 0 {
            examined = i + 1;
            break;
        }
        max_room = room.iter().copied().max().unwrap_or(0);
        if from_left {
            lo = c.eff;
        } else {
            hi = c.eff;
        }
        if fb.enabled {
            for (k, (a, &b)) in allowed.iter_mut().zip(bits_of(c.meta)).enumerate() {
                *a &= compat[64 * k + b.trailing_zeros() as usize];
            }
        } else {
            let rc = ctx.attrs(p, c.meta);
            for (k, (g, va)) in agg.iter_mut().zip(rc.chunks_exact(2)).enumerate() {
                if g.nonzero != 0 {
                    if va[0] != u64::MAX && !overlap_values.contains(&(k, va[0])) {
                        overlap_values.push((k, va[0]));
                    }
                } else if !g.wide {
                    g.and_accepts &= va[1];
                    g.or_values |= va[0];
                }
            }
            add_wide_values(wide, rc, wide_values, wide_words);
        }
    }
    let full = remaining == 0;
    if full && (teams == 1 || balance(norm, sc, &Ruleset { max_team_imbalance: bounds.max_team_imbalance, ..*rs })) {
        return Some((hosts, lat));
    }
    let d = &mut diag.rejections;
    if full {
        d[Rejection::TeamImbalance as usize] += 1;
    } else {
        // Short of players. Where the skill window cut the scan off, the nearest unused ticket
        // beyond it (outside the window its distance reads infinite) was turned away by the spread
        // bound, when it competes in the ruleset (the sentinels at the ends compete in none).
        let beyond = |slot: u32, d: f64| u64::from(d == f64::INFINITY && hot[slot as usize].mask & bit != 0);
        d[Rejection::SkillSpread as usize] += beyond(left, dl) + beyond(right, dr);
    }
    let lane = |shift: u32| rejected >> shift & 0xFFFF;
    d[Rejection::SkillSpread as usize] += lane(LANE_SPREAD);
    d[Rejection::NoAcceptableHost as usize] += lane(LANE_HOST);
    d[Rejection::Attributes as usize] += lane(LANE_ATTRS);
    d[Rejection::PartySize as usize] += lane(LANE_PARTY);
    diag.failed += 1;
    diag.examined += examined as u64;
    None
}

/// Adds a selected ticket's values of each `wide` overlap filter (its row `rc`) to the distinct
/// ones, unless unspecified (every column `u64::MAX`) or there already.
fn add_wide_values(wide: &[(usize, usize)], rc: &[u64], values: &mut Vec<(usize, usize)>, words: &mut Vec<u64>) {
    for (i, &(k, w)) in wide.iter().enumerate() {
        let columns = || rc[2 * k..2 * (k + w)].iter().step_by(2);
        if columns().all(|&v| v == u64::MAX) {
            continue;
        }
        if values.iter().any(|&(j, at)| j == i && words[at..at + w].iter().eq(columns())) {
            continue;
        }
        values.push((i, words.len()));
        words.extend(columns());
    }
}

/// Whether the row `rc` meets, in every `wide` overlap filter, every distinct selected value set, and
/// has a value (so it meets the unspecified ones too).
fn wide_ok(wide: &[(usize, usize)], values: &[(usize, usize)], words: &[u64], rc: &[u64]) -> bool {
    let meets =
        |k: usize, w: usize, x: &[u64]| rc[2 * k..2 * (k + w)].iter().step_by(2).zip(x).any(|(&v, &x)| v & x != 0);
    wide.iter().all(|&(k, w)| rc[2 * k..2 * (k + w)].iter().step_by(2).any(|&v| v != 0))
        && values.iter().all(|&(i, at)| {
            let (k, w) = wide[i];
            meets(k, w, &words[at..at + w])
        })
}

#[cfg(test)]
mod tests {
    use super::super::layout::{prepare, Sorted};
    use super::super::links::Links;
    use super::super::sort::mix;
    use super::super::test_pool::TestPool;
    use super::*;
    use crate::{FilterMode, TickParams};

    fn ruleset(team_size: u32, max_skill_spread: f64, require_host: bool) -> Ruleset<'static> {
        Ruleset {
            teams: 1,
            team_size,
            max_skill_spread,
            max_team_imbalance: f64::INFINITY,
            max_latency_ms: 100,
            require_host,
            relaxation: &[],
            expansion: crate::Expansion::NONE,
        }
    }

    /// Pool indices of the match `try_form` grows around `seed` (a pool index), and its host mask.
    fn form(pool: &TestPool, modes: &[FilterMode], rs: Ruleset<'_>, seed: u32) -> Option<(Vec<u32>, u64)> {
        let rulesets = [rs];
        let params = TickParams {
            mmr_normalization_ref: 0.1,
            party_synergy_bonus: 0.0,
            filters: modes,
            rulesets: &rulesets,
            now_ms: 0.0,
            seed: 0,
        };
        let mut s = Sorted::default();
        let columns = pool.columns();
        prepare(&columns, &params, &mut s, &mut [RuleDiagnostics::default()], None);
        let mut links = Links::default();
        links.reset(s.live);
        let mut sc = Scratch::default();
        sc.set_filters(modes);
        let ctx = Ctx { s: &s, f: columns.filter_count, h: columns.host_count, norm: 0.1 };
        let sp = (0..s.live).find(|&p| ctx.ticket(p) == seed).unwrap() as u32;
        let bounds = rs.bounds_for_wait(0.0);
        let diag = &mut RuleDiagnostics::default();
        let found = try_form(&ctx, &mut &links, &mut sc, sp, &bounds, rs.require_host, 0, &rs, diag)?;
        Some((sc.sel.iter().map(|&p| ctx.ticket(p as usize)).collect(), found.hosts))
    }

    /// The seed (0) at 0.50, with neighbours at 0.45 (1), 0.56 (2), 0.40 (3) and 0.90 (4).
    fn neighbourhood(f: usize, h: usize) -> TestPool {
        let mut pool = TestPool::new(f, h);
        for (i, mmr) in [0.50, 0.45, 0.56, 0.40, 0.90].into_iter().enumerate() {
            pool.ticket(1, mmr, i as f64);
        }
        pool
    }

    #[test]
    fn try_form_takes_the_nearest_tickets_first() {
        let pool = neighbourhood(0, 0);
        assert_eq!(form(&pool, &[], ruleset(3, f64::INFINITY, false), 0), Some((vec![0, 1, 2], 0)));
        assert_eq!(form(&pool, &[], ruleset(5, f64::INFINITY, false), 4), Some((vec![4, 2, 0, 1, 3], 0)));
        // Within 0.5 normalized units (0.05 raw) of every ticket: only 0 and 1.
        assert_eq!(form(&pool, &[], ruleset(2, 0.5, false), 0), Some((vec![0, 1], 0)));
        assert_eq!(form(&pool, &[], ruleset(3, 0.5, false), 0), None);
        // A party larger than the team never matches.
        let mut duo = TestPool::new(0, 0);
        duo.ticket(2, 0.5, 0.0).ticket(1, 0.5, 1.0);
        assert_eq!(form(&duo, &[], ruleset(1, f64::INFINITY, false), 0), None);
    }

    #[test]
    fn try_form_skips_tickets_incompatible_with_any_chosen_one() {
        for many_classes in [false, true] {
            // Containment: 1 and 2 exclude each other; the others accept both.
            let mut full = neighbourhood(1, 0);
            let rows = [(0, u64::MAX), (0b10, 0b10), (0b01, 0b01), (0, u64::MAX), (0, u64::MAX)];
            for (i, &(v, a)) in rows.iter().enumerate() {
                full.set_attr(i, 0, v, a);
            }
            if many_classes {
                // More than 512 distinct rows, far away in skill: no bitsets, running aggregates instead.
                for i in 0..600 {
                    full.ticket(1, 100.0, 10.0).attr(0, 1 << 20 | i, u64::MAX);
                }
            }
            let got = form(&full, &[FilterMode::Containment], ruleset(3, f64::INFINITY, false), 0);
            assert_eq!(got, Some((vec![0, 1, 3], 0)), "many classes: {many_classes}");
        }
    }

    #[test]
    fn try_form_keeps_a_common_host_when_one_is_required() {
        let mut pool = TestPool::new(0, 2);
        for (i, (mmr, lat)) in
            [(0.50, [50, 200]), (0.45, [200, 50]), (0.56, [50, 50]), (0.40, [60, 200])].into_iter().enumerate()
        {
            pool.ticket(1, mmr, i as f64).latency(&lat);
        }
        assert_eq!(form(&pool, &[], ruleset(3, f64::INFINITY, true), 0), Some((vec![0, 2, 3], 0b01)));
        // Without `require_host`, latency blocks no ticket (the mask is left to `emit`).
        assert_eq!(form(&pool, &[], ruleset(3, f64::INFINITY, false), 0), Some((vec![0, 1, 2], 0)));
    }

    #[test]
    fn spread_threshold_matches_division() {
        let mut z = 11u64;
        let mut unit = || {
            z = mix(z);
            (z >> 11) as f64 / (1u64 << 53) as f64
        };
        let spreads = [0.0, 0.5, 1.0, 3.0, 1e-300, 1e300, f64::MAX, f64::INFINITY];
        let norms = [0.1, 1.0, 100.0, 3e-7, 1e-310, f64::MAX];
        for &spread in &spreads {
            for &norm in &norms {
                let t = spread_threshold(spread, norm);
                let mut xs = vec![0.0, -0.0, t, -t, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MAX, 1e-320];
                if t.is_finite() {
                    xs.extend([f64::from_bits(t.to_bits() + 1), f64::from_bits(t.to_bits().saturating_sub(1))]);
                }
                for _ in 0..2000 {
                    let x = spread * norm * 2.0 * unit();
                    xs.extend([x, f64::from_bits(x.to_bits() + 1), f64::from_bits(x.to_bits().saturating_sub(1))]);
                }
                for x in xs {
                    assert_eq!(x / norm > spread, x > t, "x={x:e} spread={spread:e} norm={norm:e} t={t:e}");
                }
            }
        }
    }
}
