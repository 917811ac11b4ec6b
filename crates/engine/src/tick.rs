//! The matching algorithm. Inputs are validated by `run_tick` before anything here runs, so the
//! indexing below cannot go out of bounds.

use crate::{FilterMode, MatchBuffers, PoolColumns, Ruleset, TickParams, Workspace, NO_HOST};

/// Hot per-ticket data, stored in skill order so a seed's neighbourhood is contiguous memory.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rec {
    eff: f64,
    ticket: u32,
    mask: u32,
    party: u8,
}

/// The pool re-laid out in skill order (rebuilt every tick).
#[derive(Debug, Default)]
pub(crate) struct Sorted {
    by_skill: Vec<(u64, u32)>,
    rec: Vec<Rec>,
    /// Row-major by skill position, F per row.
    vals: Vec<u64>,
    accs: Vec<u64>,
    /// Row-major by skill position, H per row.
    lat: Vec<u16>,
    /// (arrival key, seeded tie hash << 32 | skill position), sorted: the seed order.
    by_age: Vec<(u64, u64)>,
}

impl Sorted {
    pub(crate) fn reserve(&mut self, n: usize, f: usize, h: usize) {
        self.by_skill.reserve(n);
        self.rec.reserve(n);
        self.vals.reserve(n * f);
        self.accs.reserve(n * f);
        self.lat.reserve(n * h);
        self.by_age.reserve(n);
    }
}

/// Which skill positions are still unused, with O(α) skipping of used runs.
#[derive(Debug, Default)]
pub(crate) struct Links {
    next_left: Vec<u32>,
    next_right: Vec<u32>,
    used: Vec<bool>,
}

impl Links {
    pub(crate) fn reserve(&mut self, n: usize) {
        self.next_left.reserve(n + 2);
        self.next_right.reserve(n + 2);
        self.used.reserve(n);
    }

    fn mark_used(&mut self, pos: u32) {
        self.used[pos as usize] = true;
        let slot = pos + 1;
        self.next_right[slot as usize] = slot + 1;
        self.next_left[slot as usize] = slot - 1;
    }
}

/// Per-candidate scratch; all indices are skill positions or indices into `sel`.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    sel: Vec<u32>,
    sel_team: Vec<u32>,
    alt_team: Vec<u32>,
    sel_order: Vec<u32>,
    room: Vec<u32>,
    sums: Vec<f64>,
    alt_sums: Vec<f64>,
    containment: Vec<bool>,
}


/// Maps an f64 to a u64 with the same total order (for finite values), so sorts compare
/// integers instead of calling `partial_cmp`.
#[inline]
fn order_key(x: f64) -> u64 {
    // `+ 0.0` turns -0.0 into +0.0 so both zeros sort together.
    let bits = (x + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// SplitMix64 finaliser: a cheap, well-mixed hash of (seed, ticket) for arrival tie-breaks.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Cache-prefetch hint for `slice[idx]` (no-op when out of range or off x86_64). The pool's hot
/// accesses are random (seeds come in age order, not skill order), so hiding memory latency is
/// what makes 1M-ticket ticks fast.
#[inline(always)]
fn prefetch<T>(slice: &[T], idx: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = slice.get(idx) {
        // SAFETY: `_mm_prefetch` is only a hint: it has no architectural effect and cannot fault,
        // and the pointer comes from a live reference anyway. SSE is baseline on x86_64.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((x as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, idx);
}

/// Union-find "next unused position" with path halving. Slots are skill positions shifted by
/// one; slot 0 and slot n+1 are sentinels that always point to themselves.
#[inline]
fn find(next: &mut [u32], mut x: u32) -> u32 {
    loop {
        let p = next[x as usize];
        if p == x {
            return x;
        }
        let gp = next[p as usize];
        next[x as usize] = gp;
        x = gp;
    }
}

/// Per-tick immutable context, bundled so helpers take few arguments.
struct Ctx<'p, 'a> {
    pool: &'p PoolColumns<'a>,
    params: &'p TickParams<'a>,
    s: &'p Sorted,
    /// Filter f is containment (else overlap); a bool slice keeps the hot loop simple.
    containment: &'p [bool],
    f: usize,
    h: usize,
    norm: f64,
}

impl Ctx<'_, '_> {
    /// Hosts to which the ticket at skill position `p` has latency within `bound`.
    #[inline]
    fn host_mask(&self, p: usize, bound: u32) -> u64 {
        let lat = &self.s.lat[p * self.h..(p + 1) * self.h];
        let mut m = 0u64;
        for (k, &l) in lat.iter().enumerate() {
            m |= ((u32::from(l) <= bound) as u64) << k;
        }
        m
    }

    /// Attribute compatibility of the tickets at skill positions `a` and `b`.
    #[inline]
    fn compatible(&self, a: usize, b: usize) -> bool {
        let f = self.f;
        let (va, aa) = (&self.s.vals[a * f..a * f + f], &self.s.accs[a * f..a * f + f]);
        let (vb, ab) = (&self.s.vals[b * f..b * f + f], &self.s.accs[b * f..b * f + f]);
        let mut ok = true;
        // Both tests are computed and selected, so the loop has no data-dependent branches.
        for (k, &containment) in self.containment.iter().enumerate() {
            let overlap_ok = va[k] & vb[k] != 0;
            let contain_ok = (va[k] & !ab[k]) | (vb[k] & !aa[k]) == 0;
            ok &= if containment { contain_ok } else { overlap_ok };
        }
        ok
    }

    #[inline]
    fn eff(&self, p: u32) -> f64 {
        self.s.rec[p as usize].eff
    }

    #[inline]
    fn weight(&self, p: u32) -> f64 {
        let r = &self.s.rec[p as usize];
        r.eff * f64::from(r.party)
    }
}

/// Re-lays the pool out in skill order and builds the seed order.
fn prepare(pool: &PoolColumns<'_>, params: &TickParams<'_>, s: &mut Sorted) {
    let n = pool.len();
    let (f, h) = (pool.filter_count, pool.host_count);
    let eff = |i: usize| pool.mmr_mean[i] + params.party_synergy_bonus * f64::from(pool.party_size[i] - 1);

    // Ties by pool index, so the order is total and deterministic.
    s.by_skill.clear();
    s.by_skill.extend((0..n).map(|i| (order_key(eff(i)), i as u32)));
    s.by_skill.sort_unstable();

    s.rec.clear();
    s.vals.clear();
    s.accs.clear();
    s.lat.clear();
    s.by_age.clear();
    const AHEAD: usize = 16;
    for p in 0..n {
        // Reads are random (ticket order), writes sequential: prefetch the rows a few steps ahead.
        if let Some(&(_, j)) = s.by_skill.get(p + AHEAD) {
            let j = j as usize;
            prefetch(pool.mmr_mean, j);
            prefetch(pool.arrival_ms, j);
            prefetch(pool.attr_values, j * f);
            prefetch(pool.attr_accepts, j * f);
            prefetch(pool.latency_ms, j * h);
        }
        let i = s.by_skill[p].1 as usize;
        s.rec.push(Rec { eff: eff(i), ticket: i as u32, mask: pool.ruleset_mask[i], party: pool.party_size[i] });
        // Element loops: rows are a few elements, where `extend_from_slice` pays a memmove call.
        for k in i * f..(i + 1) * f {
            s.vals.push(pool.attr_values[k]);
            s.accs.push(pool.attr_accepts[k]);
        }
        for k in i * h..(i + 1) * h {
            s.lat.push(pool.latency_ms[k]);
        }
        // Oldest first; equal arrivals ordered by a seeded hash of the pool index, then position.
        let tie = (mix(params.seed ^ mix(i as u64)) & 0xFFFF_FFFF_0000_0000) | p as u64;
        s.by_age.push((order_key(pool.arrival_ms[i]), tie));
    }
    s.by_age.sort_unstable();
}

pub(crate) fn run(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    ws: &mut Workspace,
    out: &mut MatchBuffers<'_>,
) -> usize {
    let n = pool.len();
    out.match_offsets[0] = 0;
    if n == 0 || params.rulesets.is_empty() {
        return 0;
    }
    prepare(pool, params, &mut ws.sorted);
    let Workspace { sorted, links, scratch } = ws;
    scratch.containment.clear();
    scratch.containment.extend(params.filters.iter().map(|m| *m == FilterMode::Containment));
    let containment = std::mem::take(&mut scratch.containment);
    let ctx = Ctx { pool, params, s: sorted, containment: &containment, f: pool.filter_count, h: pool.host_count, norm: params.mmr_normalization_ref };

    links.next_right.clear();
    links.next_right.extend(0..(n as u32 + 2));
    links.next_left.clear();
    links.next_left.extend(0..(n as u32 + 2));
    links.used.clear();
    links.used.resize(n, false);

    let valid_rulesets: u32 = if params.rulesets.len() >= 32 { u32::MAX } else { (1u32 << params.rulesets.len()) - 1 };
    let mut matches = 0usize;
    let mut written = 0usize;

    // Seeds jump around in skill order, so their data is cold. Two-stage prefetch: the `used`
    // flag of a far seed, then, if that flag says it will really run, its skill neighbourhood
    // in every column stream.
    const FAR: usize = 16;
    const NEAR: usize = 6;
    const SPAN: usize = 8;
    let (f, h) = (ctx.f, ctx.h);
    for k in 0..n {
        if let Some(&(_, key)) = sorted.by_age.get(k + FAR) {
            prefetch(&links.used, (key & 0xFFFF_FFFF) as usize);
        }
        if let Some(&(_, key)) = sorted.by_age.get(k + NEAR) {
            let q = (key & 0xFFFF_FFFF) as usize;
            if !links.used[q] {
                let (a, b) = (q.saturating_sub(SPAN), q + SPAN);
                prefetch(&links.next_left, q);
                prefetch(&links.next_right, q + 2);
                let mut p = a;
                while p <= b {
                    prefetch(&sorted.rec, p);
                    p += 2;
                }
                for x in (a * f..=b * f).step_by(8) {
                    prefetch(&sorted.vals, x);
                    prefetch(&sorted.accs, x);
                }
                for x in (a * h..=b * h).step_by(32) {
                    prefetch(&sorted.lat, x);
                }
            }
        }
        let sp = (sorted.by_age[k].1 & 0xFFFF_FFFF) as u32;
        if links.used[sp as usize] {
            continue;
        }
        let mut mask = sorted.rec[sp as usize].mask & valid_rulesets;
        while mask != 0 {
            let r = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let rs = &params.rulesets[r];
            if let Some(acceptable) = try_form(&ctx, links, scratch, sp, r, rs) {
                emit(&ctx, scratch, out, matches, written, r, rs, acceptable);
                written += scratch.sel.len();
                matches += 1;
                for &p in &scratch.sel {
                    links.mark_used(p);
                }
                break;
            }
        }
    }
    scratch.containment = containment;
    matches
}

/// Tries to build a match of ruleset `r` around the seed at skill position `sp`. On success
/// `sc.sel` holds the skill positions (seed first), `sc.sel_team` their teams, and the
/// acceptable-host mask is returned.
fn try_form(
    ctx: &Ctx<'_, '_>,
    links: &mut Links,
    sc: &mut Scratch,
    sp: u32,
    r: usize,
    rs: &Ruleset<'_>,
) -> Option<u64> {
    let n = ctx.s.rec.len();
    let seed = ctx.s.rec[sp as usize];
    let team_size = rs.team_size;
    let size_s = u32::from(seed.party);
    if size_s > team_size {
        return None;
    }
    if rs.require_host && ctx.h == 0 {
        return None;
    }
    // The seed is the oldest ticket processed so far that is still unused; bounds only grow with
    // wait, so bounds from the seed's wait are never wider than those of the candidate's oldest.
    let (spread, lat_bound) = rs.bounds_for_wait(ctx.params.now_ms - ctx.pool.arrival_ms[seed.ticket as usize]);
    let mut hosts = ctx.host_mask(sp as usize, lat_bound);
    if rs.require_host && hosts == 0 {
        return None;
    }

    let teams = rs.teams as usize;
    sc.sel.clear();
    sc.sel_team.clear();
    sc.room.clear();
    sc.room.resize(teams, team_size);
    sc.sel.push(sp);
    sc.sel_team.push(0);
    sc.room[0] -= size_s;
    let mut remaining = rs.players_per_match() - size_s;
    let e_s = seed.eff;
    let (mut lo, mut hi) = (e_s, e_s);
    let bit = 1u32 << r;

    // Scan outwards from the seed in skill order, nearest first, over unused tickets only.
    // Bounded by `limit` examined tickets so a crowded or incompatible neighbourhood cannot make
    // one seed cost O(n).
    let limit = (rs.players_per_match() as usize * 16).clamp(64, 16_384);
    let slot = sp + 1;
    let right_sentinel = n as u32 + 1;
    let mut left = find(&mut links.next_left, slot - 1);
    let mut right = find(&mut links.next_right, slot + 1);
    let mut examined = 0usize;
    // Raw-unit window, widened by a hair so it never prunes a ticket the exact (divided) spread
    // check below would accept.
    let win = spread * ctx.norm * (1.0 + 1e-12);
    // Slot k holds skill position k - 1; distances are infinite outside the window.
    let dist_left = |left: u32| {
        if left > 0 {
            let d = e_s - ctx.eff(left - 1);
            if d <= win { d } else { f64::INFINITY }
        } else {
            f64::INFINITY
        }
    };
    let dist_right = |right: u32| {
        if right < right_sentinel {
            let d = ctx.eff(right - 1) - e_s;
            if d <= win { d } else { f64::INFINITY }
        } else {
            f64::INFINITY
        }
    };
    let (mut dl, mut dr) = (dist_left(left), dist_right(right));
    while remaining > 0 && examined < limit {
        let p = if dl < dr {
            let p = left - 1;
            left = find(&mut links.next_left, left - 1);
            dl = dist_left(left);
            p
        } else if dr < f64::INFINITY {
            let p = right - 1;
            right = find(&mut links.next_right, right + 1);
            dr = dist_right(right);
            p
        } else {
            break;
        };
        examined += 1;

        let c = ctx.s.rec[p as usize];
        if c.mask & bit == 0 {
            continue;
        }
        let size = u32::from(c.party);
        if size > remaining {
            continue;
        }
        // Best fit: the fullest team that still has room, so exact fits are preferred.
        let mut best = usize::MAX;
        for (k, &room) in sc.room.iter().enumerate() {
            if room >= size && (best == usize::MAX || room < sc.room[best]) {
                best = k;
            }
        }
        if best == usize::MAX {
            continue;
        }
        let (nlo, nhi) = (lo.min(c.eff), hi.max(c.eff));
        if (nhi - nlo) / ctx.norm > spread {
            continue;
        }
        let m = ctx.host_mask(p as usize, lat_bound);
        if rs.require_host && hosts & m == 0 {
            continue;
        }
        if !sc.sel.iter().all(|&o| ctx.compatible(o as usize, p as usize)) {
            continue;
        }
        sc.sel.push(p);
        sc.sel_team.push(best as u32);
        sc.room[best] -= size;
        remaining -= size;
        lo = nlo;
        hi = nhi;
        hosts &= m;
    }
    if remaining != 0 {
        return None;
    }
    if teams > 1 && !balance(ctx, sc, rs) {
        return None;
    }
    Some(hosts)
}

/// Team skill range (max sum - min sum) for the given sums.
fn range(sums: &[f64]) -> f64 {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for &x in sums {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    hi - lo
}

/// Rebalances `ws.sel_team` (a valid packing on entry) to shrink the spread of team skill sums,
/// keeping every team at exactly `team_size` players. Returns whether the imbalance bound holds.
fn balance(ctx: &Ctx<'_, '_>, ws: &mut Scratch, rs: &Ruleset<'_>) -> bool {
    let teams = rs.teams as usize;
    let len = ws.sel.len();
    let weight = |ws: &Scratch, i: usize| ctx.weight(ws.sel[i]);
    let party = |p: u32| ctx.s.rec[p as usize].party;

    ws.sums.clear();
    ws.sums.resize(teams, 0.0);
    for i in 0..len {
        let w = weight(ws, i);
        ws.sums[ws.sel_team[i] as usize] += w;
    }

    // Greedy: biggest parties first (hardest to place), strongest first within a size, each to
    // the weakest team with room. May fail to pack; then the scan's packing is kept.
    ws.sel_order.clear();
    ws.sel_order.extend(0..len as u32);
    {
        let sel = &ws.sel;
        ws.sel_order.sort_unstable_by(|&a, &b| {
            let (pa, pb) = (sel[a as usize], sel[b as usize]);
            party(pb).cmp(&party(pa)).then(ctx.eff(pb).total_cmp(&ctx.eff(pa))).then(pa.cmp(&pb))
        });
    }
    ws.alt_team.clear();
    ws.alt_team.resize(len, 0);
    ws.alt_sums.clear();
    ws.alt_sums.resize(teams, 0.0);
    ws.room.clear();
    ws.room.resize(teams, rs.team_size);
    let mut packed = true;
    for k in 0..len {
        let i = ws.sel_order[k] as usize;
        let size = u32::from(party(ws.sel[i]));
        let mut best = usize::MAX;
        for tm in 0..teams {
            if ws.room[tm] >= size && (best == usize::MAX || ws.alt_sums[tm] < ws.alt_sums[best]) {
                best = tm;
            }
        }
        if best == usize::MAX {
            packed = false;
            break;
        }
        ws.room[best] -= size;
        ws.alt_team[i] = best as u32;
        ws.alt_sums[best] += weight(ws, i);
    }
    if packed && range(&ws.alt_sums) < range(&ws.sums) {
        std::mem::swap(&mut ws.sel_team, &mut ws.alt_team);
        std::mem::swap(&mut ws.sums, &mut ws.alt_sums);
    }

    // Improving swaps of equal-size parties between the strongest and the weakest team. Each
    // accepted swap strictly lowers the sum of squared team sums, so this terminates; the cap
    // bounds the cost for very large matches.
    for _ in 0..(4 * len) {
        let (mut tmax, mut tmin) = (0usize, 0usize);
        for tm in 1..teams {
            if ws.sums[tm] > ws.sums[tmax] {
                tmax = tm;
            }
            if ws.sums[tm] < ws.sums[tmin] {
                tmin = tm;
            }
        }
        let diff = ws.sums[tmax] - ws.sums[tmin];
        if tmax == tmin || diff <= 0.0 {
            break;
        }
        let mut best: Option<(usize, usize, f64)> = None;
        for a in 0..len {
            if ws.sel_team[a] as usize != tmax {
                continue;
            }
            for b in 0..len {
                if ws.sel_team[b] as usize != tmin {
                    continue;
                }
                if party(ws.sel[a]) != party(ws.sel[b]) {
                    continue;
                }
                let d = weight(ws, a) - weight(ws, b);
                let new_diff = (diff - 2.0 * d).abs();
                if d > 0.0 && new_diff < diff && best.is_none_or(|(_, _, bd)| new_diff < bd) {
                    best = Some((a, b, new_diff));
                }
            }
        }
        let Some((a, b, _)) = best else { break };
        let d = weight(ws, a) - weight(ws, b);
        ws.sums[tmax] -= d;
        ws.sums[tmin] += d;
        ws.sel_team[a] = tmin as u32;
        ws.sel_team[b] = tmax as u32;
    }

    imbalance(&ws.sums, rs.team_size, ctx.norm) <= rs.max_team_imbalance
}

/// (max team mean - min team mean) / norm, team mean = party-size-weighted mean effective skill.
pub(crate) fn imbalance(sums: &[f64], team_size: u32, norm: f64) -> f64 {
    range(sums) / f64::from(team_size) / norm
}

#[allow(clippy::too_many_arguments)]
fn emit(
    ctx: &Ctx<'_, '_>,
    ws: &Scratch,
    out: &mut MatchBuffers<'_>,
    m: usize,
    written: usize,
    r: usize,
    rs: &Ruleset<'_>,
    acceptable: u64,
) {
    let pool = ctx.pool;
    let len = ws.sel.len();
    out.match_ruleset[m] = r as u32;
    for (dst, &p) in out.match_tickets[written..written + len].iter_mut().zip(&ws.sel) {
        *dst = ctx.s.rec[p as usize].ticket;
    }
    out.ticket_team[written..written + len].copy_from_slice(&ws.sel_team);
    out.match_offsets[m + 1] = (written + len) as u32;

    // Without `require_host` the scan did not filter on latency, so recompute the mask exactly.
    let seed_ticket = ctx.s.rec[ws.sel[0] as usize].ticket as usize;
    let (_, lat_bound) = rs.bounds_for_wait(ctx.params.now_ms - pool.arrival_ms[seed_ticket]);
    let mut acc = acceptable;
    if !rs.require_host {
        acc = if ctx.h == 0 { 0 } else { u64::MAX >> (64 - ctx.h) };
        for &t in &ws.sel {
            acc &= ctx.host_mask(t as usize, lat_bound);
        }
    }
    let mut preferred = NO_HOST;
    let mut best_cost = u32::MAX;
    let mut bits = acc;
    while bits != 0 {
        let hst = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        let cost = ws
            .sel
            .iter()
            .map(|&p| u32::from(ctx.s.lat[p as usize * ctx.h + hst]))
            .max()
            .unwrap_or(0);
        if cost < best_cost {
            best_cost = cost;
            preferred = hst as u32;
        }
    }
    out.match_preferred_host[m] = preferred;
    out.match_acceptable_hosts[m] = acc;

    let f = ctx.f;
    for k in 0..f {
        let mut inter = u64::MAX;
        for &t in &ws.sel {
            inter &= ctx.s.accs[t as usize * f + k];
        }
        out.match_accepts[m * f + k] = inter;
    }
}
