//! Writing a formed match into the caller's buffers: its tickets and teams, its hosts (acceptable
//! mask, preferred host) and its per-filter accept intersections.

use super::lanes::{host_words, lanes_max, lat_words, HostMask, LatBound};
use super::layout::Ctx;
use crate::{MatchBuffers, MAX_HOSTS, NO_HOST};

/// Of the hosts in `choices`, the one with the lowest worst latency over the tickets at live positions
/// `sel` (the lowest index on ties), and that latency; `(NO_HOST, u32::MAX)` when `choices` is empty.
pub(super) fn cheapest_host<M: HostMask>(ctx: &Ctx<'_>, sel: &[u32], choices: M) -> (u32, u32) {
    let (mut host, mut best) = (NO_HOST, u32::MAX);
    if choices == M::EMPTY {
        return (host, best);
    }
    // Cost of host h = max latency over the match: lane-wise max of the latency rows (at most 16
    // words for 64 hosts, 64 for MAX_HOSTS; the wider buffer only for the queues that need it).
    let (mut narrow, mut wide);
    let w = lat_words(ctx.h);
    let cost: &mut [u64] = if w <= 16 {
        narrow = [0u64; 16];
        &mut narrow[..w]
    } else {
        wide = [0u64; MAX_HOSTS / 4];
        &mut wide[..w]
    };
    for &p in sel {
        for (c, &x) in cost.iter_mut().zip(ctx.lat(p as usize)) {
            *c = lanes_max(*c, x);
        }
    }
    choices.for_each(|hst| {
        let c = u32::from((cost[hst / 4] >> (16 * (hst % 4))) as u16);
        if c < best {
            best = c;
            host = hst as u32;
        }
    });
    (host, best)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn emit<M: HostMask>(
    ctx: &Ctx<'_>,
    sel: &[u32],
    sel_team: &[u32],
    out: &mut MatchBuffers<'_>,
    m: usize,
    written: usize,
    r: usize,
    host_filtered: bool,
    acceptable: M,
    lat: &LatBound,
) {
    let s = ctx.s;
    let len = sel.len();
    out.match_ruleset[m] = r as u32;
    let dst = out.match_tickets[written..written + len].iter_mut().zip(&mut out.ticket_team[written..written + len]);
    for ((ticket, team), (&p, &t)) in dst.zip(sel.iter().zip(sel_team)) {
        *ticket = ctx.ticket(p as usize);
        *team = t;
    }
    out.match_offsets[m + 1] = (written + len) as u32;

    // A scan that did not filter on latency leaves the mask to compute here.
    let mut acc = acceptable;
    if !host_filtered {
        acc = M::all(ctx.h);
        for &t in sel {
            acc = acc.and(lat.host_mask(ctx.lat(t as usize)));
        }
    }
    // The preferred host minimises the worst latency: among the acceptable hosts, or, when none is
    // (a match formed without a common host), among all of them.
    let (preferred, _) = cheapest_host(ctx, sel, if acc != M::EMPTY { acc } else { M::all(ctx.h) });
    out.match_preferred_host[m] = preferred;
    let hw = host_words(ctx.h);
    acc.write(&mut out.match_acceptable_hosts[m * hw..(m + 1) * hw]);

    let f = ctx.f;
    let inter = &mut out.match_accepts[m * f..(m + 1) * f];
    let attrs_of = |t: u32| ctx.attrs(t, s.hot[t as usize + 1].meta).chunks_exact(2);
    for (dst, va) in inter.iter_mut().zip(attrs_of(sel[0])) {
        *dst = va[1];
    }
    for &t in &sel[1..] {
        for (dst, va) in inter.iter_mut().zip(attrs_of(t)) {
            *dst &= va[1];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::test_pool::TestPool;
    use super::super::layout::{prepare, Sorted};
    use super::super::scratch::Scratch;
    use super::*;
    use crate::{Expansion, FilterMode, MatchOutput, OutputCapacity, Ruleset, TickParams};

    #[test]
    fn emit_writes_tickets_hosts_and_accepts() {
        let modes = [FilterMode::Overlap, FilterMode::Containment];
        let mut pool = TestPool::new(2, 3);
        pool.ticket(1, 0.5, 0.0).latency(&[40, 90, 120]).attr(1, 0b01, 0b011);
        pool.ticket(1, 0.6, 1.0).latency(&[80, 30, 100]).attr(0, 0b1, 0b111).attr(1, 0b10, 0b110);
        let rs = Ruleset {
            teams: 2,
            team_size: 1,
            max_skill_spread: f64::INFINITY,
            max_team_imbalance: f64::INFINITY,
            max_latency_ms: 100,
            require_host: false,
            relaxation: &[],
            expansion: Expansion::NONE,
        };
        let rulesets = [rs, rs, rs];
        let params = TickParams {
            mmr_normalization_ref: 0.1,
            party_synergy_bonus: 0.0,
            filters: &modes,
            rulesets: &rulesets,
            now_ms: 0.0,
            seed: 0,
        };
        let mut s = Sorted::default();
        prepare(&pool.columns(), &params, &mut s, &mut [crate::RuleDiagnostics::default()]);
        let ctx = Ctx { s: &s, f: 2, h: 3, norm: 0.1 };
        let mut sc = Scratch::default();
        // Live positions in skill order: ticket 0, then 1; the seed (ticket 1) first.
        sc.sel.extend([1, 0]);
        sc.sel_team.extend([0, 1]);
        let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(6, 2, 3));
        let lat = LatBound::new(100, 3);

        // Without `require_host` the acceptable hosts are computed here: costs 80, 90, 120.
        emit(&ctx, &sc.sel, &sc.sel_team, &mut out.buffers(), 0, 0, 2, false, 0, &lat);
        assert_eq!(out.match_ruleset[0], 2);
        assert_eq!(out.match_tickets[..2], [1, 0]);
        assert_eq!(out.ticket_team[..2], [0, 1]);
        assert_eq!(out.match_offsets[1], 2);
        assert_eq!(out.match_acceptable_hosts[0], 0b011);
        assert_eq!(out.match_preferred_host[0], 0);
        // Per filter the AND of the accepts: u64::MAX & 0b111, 0b011 & 0b110.
        assert_eq!(out.match_accepts[..2], [0b111, 0b010]);

        // With `require_host` the scan's mask is kept; the cheapest of it is preferred.
        emit(&ctx, &sc.sel, &sc.sel_team, &mut out.buffers(), 1, 2, 0, true, 0b010, &lat);
        assert_eq!(out.match_offsets[2], 4);
        assert_eq!(out.match_tickets[2..4], [1, 0]);
        assert_eq!((out.match_acceptable_hosts[1], out.match_preferred_host[1]), (0b010, 1));
        assert_eq!(out.match_accepts[2..4], [0b111, 0b010]);

        // No host within the bound: none acceptable, and the one with the lowest worst latency
        // (80, 90, 120) preferred.
        emit(&ctx, &sc.sel, &sc.sel_team, &mut out.buffers(), 2, 4, 0, false, 0, &LatBound::new(20, 3));
        assert_eq!((out.match_acceptable_hosts[2], out.match_preferred_host[2]), (0, 0));
    }
}
