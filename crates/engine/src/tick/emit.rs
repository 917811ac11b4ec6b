//! A formed match's output: its tickets and teams, its hosts (acceptable mask, preferred host) and its
//! per-filter accept intersections, staged where the match was formed and then written to the caller's
//! buffers in commit order.

use super::lanes::{host_words, lanes_max, lat_words, row_words, HostMask, LatBound};
use super::layout::{prefetch_range, Ctx};
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

/// Formed matches' output, worked out where each was formed (a thread trying seeds apart, in
/// tick/speculate.rs, while the match's tickets are in its caches) and copied to the caller's buffers
/// when it commits.
#[derive(Debug, Default)]
pub(crate) struct Staged {
    /// Per ticket: its `Sorted::rows` first word (pool index, and skill position << 32), and its team.
    entries: Vec<u64>,
    teams: Vec<u32>,
    /// Per match: where its tickets end, its ruleset, its preferred host, its acceptable hosts (`hw`
    /// words) and its accept intersections (`f` words).
    ends: Vec<u32>,
    rulesets: Vec<u32>,
    preferred: Vec<u32>,
    hosts: Vec<u64>,
    accepts: Vec<u64>,
}

/// One staged match (`Staged::get`).
pub(super) struct StagedMatch<'a> {
    pub(super) entries: &'a [u64],
    teams: &'a [u32],
    ruleset: u32,
    preferred: u32,
    hosts: &'a [u64],
    accepts: &'a [u64],
}

impl Staged {
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.teams.clear();
        self.ends.clear();
        self.rulesets.clear();
        self.preferred.clear();
        self.hosts.clear();
        self.accepts.clear();
    }

    /// Stages the match of ruleset `r` formed of the live positions `sel` in teams `sel_team`, and
    /// answers its index. Its hosts are `acceptable` when the scan kept to common hosts (`host_filtered`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stage<M: HostMask>(
        &mut self,
        ctx: &Ctx<'_>,
        sel: &[u32],
        sel_team: &[u32],
        r: usize,
        host_filtered: bool,
        acceptable: M,
        lat: &LatBound,
    ) -> usize {
        let s = ctx.s;
        let rw = row_words(ctx.h);
        self.entries.extend(sel.iter().map(|&p| s.rows[p as usize * rw]));
        self.teams.extend_from_slice(sel_team);
        self.ends.push(self.entries.len() as u32);
        self.rulesets.push(r as u32);

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
        self.preferred.push(preferred);
        let hw = host_words(ctx.h);
        let at = self.hosts.len();
        self.hosts.resize(at + hw, 0);
        acc.write(&mut self.hosts[at..]);

        let attrs_of = |t: u32| ctx.attrs(t, s.hot[t as usize + 1].meta).chunks_exact(2);
        let at = self.accepts.len();
        self.accepts.extend(attrs_of(sel[0]).map(|va| va[1]));
        for &t in &sel[1..] {
            for (dst, va) in self.accepts[at..].iter_mut().zip(attrs_of(t)) {
                *dst &= va[1];
            }
        }
        self.ends.len() - 1
    }

    /// Asks for every line of the staged matches at once: the committing thread reads what another
    /// thread wrote, and line by line each read would wait for the other core (tick/speculate.rs).
    pub(super) fn prefetch(&self) {
        prefetch_range(&self.entries, 0, self.entries.len());
        prefetch_range(&self.teams, 0, self.teams.len());
        prefetch_range(&self.ends, 0, self.ends.len());
        prefetch_range(&self.rulesets, 0, self.rulesets.len());
        prefetch_range(&self.preferred, 0, self.preferred.len());
        prefetch_range(&self.hosts, 0, self.hosts.len());
        prefetch_range(&self.accepts, 0, self.accepts.len());
    }

    /// The staged match `k`, for `hw` host words and `f` filter columns a match.
    pub(super) fn get(&self, k: usize, hw: usize, f: usize) -> StagedMatch<'_> {
        let from = if k == 0 { 0 } else { self.ends[k - 1] as usize };
        let to = self.ends[k] as usize;
        StagedMatch {
            entries: &self.entries[from..to],
            teams: &self.teams[from..to],
            ruleset: self.rulesets[k],
            preferred: self.preferred[k],
            hosts: &self.hosts[k * hw..(k + 1) * hw],
            accepts: &self.accepts[k * f..(k + 1) * f],
        }
    }
}

/// Writes the staged match `x` as match `m` of `out`, its tickets from `written` on.
pub(super) fn emit(out: &mut MatchBuffers<'_>, m: usize, written: usize, x: &StagedMatch<'_>) {
    let len = x.entries.len();
    out.match_ruleset[m] = x.ruleset;
    let dst = out.match_tickets[written..written + len].iter_mut().zip(&mut out.ticket_team[written..written + len]);
    for ((ticket, team), (&e, &t)) in dst.zip(x.entries.iter().zip(x.teams)) {
        *ticket = e as u32;
        *team = t;
    }
    out.match_offsets[m + 1] = (written + len) as u32;
    out.match_preferred_host[m] = x.preferred;
    let hw = x.hosts.len();
    out.match_acceptable_hosts[m * hw..(m + 1) * hw].copy_from_slice(x.hosts);
    let f = x.accepts.len();
    out.match_accepts[m * f..(m + 1) * f].copy_from_slice(x.accepts);
}

#[cfg(test)]
mod tests {
    use super::super::layout::{prepare, Sorted};
    use super::super::scratch::Scratch;
    use super::super::test_pool::TestPool;
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
        prepare(&pool.columns(), &params, &mut s, &mut [crate::RuleDiagnostics::default()], None);
        let ctx = Ctx { s: &s, f: 2, h: 3, norm: 0.1 };
        let mut sc = Scratch::default();
        // Live positions in skill order: ticket 0, then 1; the seed (ticket 1) first.
        sc.sel.extend([1, 0]);
        sc.sel_team.extend([0, 1]);
        let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(6, 2, 3));
        let lat = LatBound::new(100, 3);
        let mut staged = Staged::default();

        // Without `require_host` the acceptable hosts are computed here: costs 80, 90, 120.
        let k = staged.stage(&ctx, &sc.sel, &sc.sel_team, 2, false, 0u64, &lat);
        emit(&mut out.buffers(), 0, 0, &staged.get(k, 1, 2));
        assert_eq!(out.match_ruleset[0], 2);
        assert_eq!(out.match_tickets[..2], [1, 0]);
        assert_eq!(out.ticket_team[..2], [0, 1]);
        assert_eq!(out.match_offsets[1], 2);
        assert_eq!(out.match_acceptable_hosts[0], 0b011);
        assert_eq!(out.match_preferred_host[0], 0);
        // Per filter the AND of the accepts: u64::MAX & 0b111, 0b011 & 0b110.
        assert_eq!(out.match_accepts[..2], [0b111, 0b010]);

        // With `require_host` the scan's mask is kept; the cheapest of it is preferred.
        let k = staged.stage(&ctx, &sc.sel, &sc.sel_team, 0, true, 0b010u64, &lat);
        emit(&mut out.buffers(), 1, 2, &staged.get(k, 1, 2));
        assert_eq!(out.match_offsets[2], 4);
        assert_eq!(out.match_tickets[2..4], [1, 0]);
        assert_eq!((out.match_acceptable_hosts[1], out.match_preferred_host[1]), (0b010, 1));
        assert_eq!(out.match_accepts[2..4], [0b111, 0b010]);

        // No host within the bound: none acceptable, and the one with the lowest worst latency
        // (80, 90, 120) preferred.
        let k = staged.stage(&ctx, &sc.sel, &sc.sel_team, 0, false, 0u64, &LatBound::new(20, 3));
        emit(&mut out.buffers(), 2, 4, &staged.get(k, 1, 2));
        assert_eq!((out.match_acceptable_hosts[2], out.match_preferred_host[2]), (0, 0));
    }
}
