//! Shared test helpers (also used by `benches/tick.rs`): an owned pool, a seeded generator, a decoded
//! match, and an independent invariant checker.
#![allow(dead_code)]

use matchmaker_engine::{
    run_tick, run_tick_changed, EngineError, Expansion, FilterMode, MatchOutput, OutputCapacity, PoolChanges,
    PoolColumns, RuleDiagnostics, Ruleset, TickParams, Workspace, NO_HOST,
};

/// The time the generated pools are read at (epoch ms).
pub const NOW: f64 = 1_700_000_000_000.0;

/// Pool generator. `max_party` bounds party sizes, `masks` are the ruleset masks drawn from.
/// Arrivals are whole milliseconds so equal arrivals (seed tie-breaks) occur.
pub fn generate(n: usize, seed: u64, filters: &[FilterMode], hosts: usize, max_party: u64, masks: &[u32]) -> Pool {
    let mut rng = Rng(seed);
    let mut p = Pool::new(filters.to_vec(), hosts);
    for _ in 0..n {
        p.party_size.push(1 + rng.below(max_party) as u8);
        p.mmr_mean.push((rng.unit() + rng.unit() + rng.unit()) / 3.0);
        p.arrival_ms.push(NOW - rng.below(120_000) as f64);
        p.ruleset_mask.push(masks[rng.below(masks.len() as u64) as usize]);
        for (k, mode) in filters.iter().enumerate() {
            let specified = rng.below(10) < 4;
            let (v, a) = match (mode, specified) {
                (FilterMode::Overlap, false) => (u64::MAX, u64::MAX),
                (FilterMode::Containment, false) => (0, u64::MAX),
                (FilterMode::Overlap, true) => ((1 << rng.below(4 + k as u64)) | (1 << rng.below(4)), u64::MAX),
                (FilterMode::Containment, true) => {
                    let v = 1u64 << rng.below(3);
                    (v, v | (1 << rng.below(3)) | (1 << rng.below(5)))
                }
                (FilterMode::Continued, _) => unreachable!("the golden pools' filters have one column each"),
            };
            p.attr_values.push(v);
            p.attr_accepts.push(a);
        }
        let home = if hosts > 0 { rng.below(hosts as u64) as usize } else { 0 };
        for h in 0..hosts {
            let l = if h == home { 20 + rng.below(60) } else { 80 + rng.below(220) };
            p.latency_ms.push(l as u16);
        }
    }
    p
}

/// SplitMix64: small and seeded, for generated pools.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Owned ticket columns; `add` appends one ticket with "unspecified" attributes and latency 0.
#[derive(Clone, Debug, Default)]
pub struct Pool {
    pub filters: Vec<FilterMode>,
    pub host_count: usize,
    pub party_size: Vec<u8>,
    pub mmr_mean: Vec<f64>,
    pub arrival_ms: Vec<f64>,
    pub ruleset_mask: Vec<u32>,
    pub attr_values: Vec<u64>,
    pub attr_accepts: Vec<u64>,
    pub latency_ms: Vec<u16>,
}

impl Pool {
    pub fn new(filters: Vec<FilterMode>, host_count: usize) -> Self {
        Pool { filters, host_count, ..Default::default() }
    }

    pub fn len(&self) -> usize {
        self.party_size.len()
    }

    pub fn is_empty(&self) -> bool {
        self.party_size.is_empty()
    }

    /// Adds a ticket; returns its pool index.
    pub fn add(&mut self, party: u8, mmr: f64, arrival_ms: f64, mask: u32) -> usize {
        self.party_size.push(party);
        self.mmr_mean.push(mmr);
        self.arrival_ms.push(arrival_ms);
        self.ruleset_mask.push(mask);
        for k in 0..self.filters.len() {
            match self.mode_of(k) {
                FilterMode::Overlap => self.attr_values.push(u64::MAX),
                _ => self.attr_values.push(0),
            }
            self.attr_accepts.push(u64::MAX);
        }
        self.latency_ms.extend(std::iter::repeat_n(0, self.host_count));
        self.len() - 1
    }

    /// The mode of column `k`'s filter: its own, or for a `Continued` column that of the filter's first.
    pub fn mode_of(&self, k: usize) -> FilterMode {
        self.filters[..=k].iter().rev().copied().find(|&m| m != FilterMode::Continued).unwrap_or(FilterMode::Continued)
    }

    /// The filters as (first column, columns, mode).
    pub fn filter_groups(&self) -> Vec<(usize, usize, FilterMode)> {
        let mut groups: Vec<(usize, usize, FilterMode)> = Vec::new();
        for (k, &mode) in self.filters.iter().enumerate() {
            match (mode, groups.last_mut()) {
                (FilterMode::Continued, Some(last)) => last.1 += 1,
                _ => groups.push((k, 1, mode)),
            }
        }
        groups
    }

    pub fn set_attr(&mut self, t: usize, f: usize, values: u64, accepts: u64) {
        let nf = self.filters.len();
        self.attr_values[t * nf + f] = values;
        self.attr_accepts[t * nf + f] = accepts;
    }

    /// Removes ticket `t`: the last ticket moves into its row (as the service's pool does). Answers the
    /// row written, if any.
    pub fn swap_remove(&mut self, t: usize) -> Option<usize> {
        let (last, f, h) = (self.len() - 1, self.filters.len(), self.host_count);
        self.party_size.swap_remove(t);
        self.mmr_mean.swap_remove(t);
        self.arrival_ms.swap_remove(t);
        self.ruleset_mask.swap_remove(t);
        for (column, width) in [(&mut self.attr_values, f), (&mut self.attr_accepts, f)] {
            column.copy_within(last * width..(last + 1) * width, t * width);
            column.truncate(last * width);
        }
        self.latency_ms.copy_within(last * h..(last + 1) * h, t * h);
        self.latency_ms.truncate(last * h);
        (t < last).then_some(t)
    }

    /// Writes ticket `j` of `from` (a pool of the same shape) into row `t`, or appends it when `t` is
    /// the pool's length.
    pub fn put(&mut self, t: usize, from: &Pool, j: usize) {
        let (f, h) = (self.filters.len(), self.host_count);
        if t == self.len() {
            self.add(1, 0.0, 0.0, 0);
        }
        self.party_size[t] = from.party_size[j];
        self.mmr_mean[t] = from.mmr_mean[j];
        self.arrival_ms[t] = from.arrival_ms[j];
        self.ruleset_mask[t] = from.ruleset_mask[j];
        self.attr_values[t * f..(t + 1) * f].copy_from_slice(&from.attr_values[j * f..(j + 1) * f]);
        self.attr_accepts[t * f..(t + 1) * f].copy_from_slice(&from.attr_accepts[j * f..(j + 1) * f]);
        self.latency_ms[t * h..(t + 1) * h].copy_from_slice(&from.latency_ms[j * h..(j + 1) * h]);
    }

    pub fn set_latency(&mut self, t: usize, lat: &[u16]) {
        let h = self.host_count;
        self.latency_ms[t * h..(t + 1) * h].copy_from_slice(lat);
    }

    pub fn columns(&self) -> PoolColumns<'_> {
        PoolColumns {
            party_size: &self.party_size,
            mmr_mean: &self.mmr_mean,
            arrival_ms: &self.arrival_ms,
            ruleset_mask: &self.ruleset_mask,
            attr_values: &self.attr_values,
            attr_accepts: &self.attr_accepts,
            latency_ms: &self.latency_ms,
            filter_count: self.filters.len(),
            host_count: self.host_count,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub ruleset: u32,
    pub tickets: Vec<u32>,
    pub teams: Vec<u32>,
    pub preferred_host: u32,
    /// One word per 64 hosts (at least one).
    pub acceptable_hosts: Vec<u64>,
    pub accepts: Vec<u64>,
}

impl Match {
    /// Whether host `h` is acceptable to the whole match.
    pub fn acceptable(&self, h: usize) -> bool {
        self.acceptable_hosts.get(h / 64).is_some_and(|w| w >> (h % 64) & 1 == 1)
    }

    /// Tickets sorted, for order-independent comparisons.
    pub fn sorted_tickets(&self) -> Vec<u32> {
        let mut t = self.tickets.clone();
        t.sort_unstable();
        t
    }

    pub fn team_of(&self, ticket: u32) -> Option<u32> {
        self.tickets.iter().position(|&t| t == ticket).map(|i| self.teams[i])
    }
}

pub fn params<'a>(pool: &'a Pool, rulesets: &'a [Ruleset<'a>], now_ms: f64, seed: u64) -> TickParams<'a> {
    TickParams { mmr_normalization_ref: 0.1, party_synergy_bonus: 0.0, filters: &pool.filters, rulesets, now_ms, seed }
}

pub fn ruleset(teams: u32, team_size: u32) -> Ruleset<'static> {
    Ruleset {
        teams,
        team_size,
        max_skill_spread: 10.0,
        max_team_imbalance: f64::INFINITY,
        max_latency_ms: 1000,
        require_host: false,
        relaxation: &[],
        expansion: Expansion::NONE,
    }
}

pub fn try_run(pool: &Pool, params: &TickParams<'_>) -> Result<Vec<Match>, EngineError> {
    let mut ws = Workspace::new();
    let cap = OutputCapacity::for_pool(pool.len(), pool.filters.len(), pool.host_count);
    let mut out = MatchOutput::with_capacity(cap);
    let count = run_tick(&pool.columns(), params, &mut ws, &mut out.buffers())?;
    Ok(decode(&out, count, pool.filters.len(), pool.host_count))
}

pub fn run(pool: &Pool, params: &TickParams<'_>) -> Vec<Match> {
    try_run(pool, params).expect("valid input")
}

/// One tick's matches and its rule diagnostics (one record per ruleset).
pub fn run_diagnosed(pool: &Pool, params: &TickParams<'_>) -> (Vec<Match>, Vec<RuleDiagnostics>) {
    let mut ws = Workspace::new();
    let cap = OutputCapacity::for_pool(pool.len(), pool.filters.len(), pool.host_count);
    let mut out = MatchOutput::with_capacity(cap);
    let count = run_tick(&pool.columns(), params, &mut ws, &mut out.buffers()).expect("valid input");
    (decode(&out, count, pool.filters.len(), pool.host_count), ws.rule_diagnostics().to_vec())
}

/// One tick's matches, rule diagnostics and per-ticket refusal record (`TicketRefusal` codes).
pub fn run_recorded(pool: &Pool, params: &TickParams<'_>) -> (Vec<Match>, Vec<RuleDiagnostics>, Vec<u8>) {
    run_recorded_in(pool, params, Workspace::new())
}

/// `run_recorded` in the workspace `ws` (one made by `threaded`, say).
pub fn run_recorded_in(
    pool: &Pool,
    params: &TickParams<'_>,
    mut ws: Workspace,
) -> (Vec<Match>, Vec<RuleDiagnostics>, Vec<u8>) {
    let cap = OutputCapacity::for_pool(pool.len(), pool.filters.len(), pool.host_count);
    // Filled with a code the tick never writes, so a ticket it left alone shows.
    let mut out = MatchOutput::with_capacity(cap).recording_refusals();
    out.ticket_refusals.as_mut().unwrap().fill(0xEE);
    let count = run_tick(&pool.columns(), params, &mut ws, &mut out.buffers()).expect("valid input");
    let refusals = out.ticket_refusals.clone().unwrap();
    (decode(&out, count, pool.filters.len(), pool.host_count), ws.rule_diagnostics().to_vec(), refusals)
}

/// `run_recorded_in` through `run_tick_changed`, in a workspace kept from tick to tick.
pub fn run_changed_recorded(
    pool: &Pool,
    changes: &PoolChanges<'_>,
    params: &TickParams<'_>,
    ws: &mut Workspace,
) -> (Vec<Match>, Vec<RuleDiagnostics>, Vec<u8>) {
    let cap = OutputCapacity::for_pool(pool.len(), pool.filters.len(), pool.host_count);
    let mut out = MatchOutput::with_capacity(cap).recording_refusals();
    out.ticket_refusals.as_mut().unwrap().fill(0xEE);
    let count = run_tick_changed(&pool.columns(), changes, params, ws, &mut out.buffers()).expect("valid input");
    let refusals = out.ticket_refusals.clone().unwrap();
    (decode(&out, count, pool.filters.len(), pool.host_count), ws.rule_diagnostics().to_vec(), refusals)
}

/// The first `count` matches of `out`, for `f` filter columns and `h` hosts.
pub fn decode(out: &MatchOutput, count: usize, f: usize, h: usize) -> Vec<Match> {
    let hw = h.div_ceil(64).max(1);
    (0..count)
        .map(|m| {
            let (a, b) = (out.match_offsets[m] as usize, out.match_offsets[m + 1] as usize);
            Match {
                ruleset: out.match_ruleset[m],
                tickets: out.match_tickets[a..b].to_vec(),
                teams: out.ticket_team[a..b].to_vec(),
                preferred_host: out.match_preferred_host[m],
                acceptable_hosts: out.match_acceptable_hosts[m * hw..(m + 1) * hw].to_vec(),
                accepts: out.match_accepts[m * f..(m + 1) * f].to_vec(),
            }
        })
        .collect()
}

/// Floating-point slack for bound checks (the engine compares in f64 too).
const EPS: f64 = 1e-9;

/// Checks every documented constraint of every match, recomputing from the pool. Returns the
/// first violation as text.
pub fn check_invariants(pool: &Pool, p: &TickParams<'_>, matches: &[Match]) -> Result<(), String> {
    let n = pool.len();
    let (f, h) = (pool.filters.len(), pool.host_count);
    let mut seen = vec![false; n];
    for (mi, m) in matches.iter().enumerate() {
        let ctx = |msg: String| format!("match {mi} {m:?}: {msg}");
        let r = m.ruleset as usize;
        let rs = p.rulesets.get(r).ok_or_else(|| ctx("ruleset out of range".into()))?;
        if m.tickets.is_empty() || m.tickets.len() != m.teams.len() {
            return Err(ctx("ticket/team arrays malformed".into()));
        }
        // No ticket twice, ruleset bit set.
        for &t in &m.tickets {
            let t = t as usize;
            if t >= n {
                return Err(ctx(format!("ticket {t} out of range")));
            }
            if std::mem::replace(&mut seen[t], true) {
                return Err(ctx(format!("ticket {t} used twice")));
            }
            if pool.ruleset_mask[t] & (1 << r) == 0 {
                return Err(ctx(format!("ticket {t} does not compete in ruleset {r}")));
            }
        }
        // Exact team sizes (a ticket has one team entry, so parties are never split).
        let mut fill = vec![0u32; rs.teams as usize];
        let mut sums = vec![0.0f64; rs.teams as usize];
        let eff = |t: usize| pool.mmr_mean[t] + p.party_synergy_bonus * f64::from(pool.party_size[t] - 1);
        for (&t, &tm) in m.tickets.iter().zip(&m.teams) {
            let slot = fill.get_mut(tm as usize).ok_or_else(|| ctx(format!("team {tm} out of range")))?;
            *slot += u32::from(pool.party_size[t as usize]);
            sums[tm as usize] += eff(t as usize) * f64::from(pool.party_size[t as usize]);
        }
        if fill.iter().any(|&x| x != rs.team_size) {
            return Err(ctx(format!("team fills {fill:?} != {}", rs.team_size)));
        }
        // Relaxed bounds from the oldest ticket's wait.
        let oldest_wait =
            m.tickets.iter().map(|&t| p.now_ms - pool.arrival_ms[t as usize]).fold(f64::NEG_INFINITY, f64::max);
        let bounds = rs.bounds_for_wait(oldest_wait);
        let (spread, lat_bound) = (bounds.max_skill_spread, bounds.max_latency_ms);
        let effs: Vec<f64> = m.tickets.iter().map(|&t| eff(t as usize)).collect();
        let lo = effs.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = effs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        if (hi - lo) / p.mmr_normalization_ref > spread + EPS {
            return Err(ctx(format!("skill spread {} > {spread}", (hi - lo) / p.mmr_normalization_ref)));
        }
        let tlo = sums.iter().cloned().fold(f64::INFINITY, f64::min);
        let thi = sums.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let imb = (thi - tlo) / f64::from(rs.team_size) / p.mmr_normalization_ref;
        if imb > bounds.max_team_imbalance + EPS {
            return Err(ctx(format!("team imbalance {imb} > {}", bounds.max_team_imbalance)));
        }
        // Attributes pairwise compatible; accept intersections exact.
        for a in 0..m.tickets.len() {
            for b in (a + 1)..m.tickets.len() {
                let (ta, tb) = (m.tickets[a] as usize, m.tickets[b] as usize);
                for (k, w, mode) in pool.filter_groups() {
                    let columns =
                        |t: usize| (k..k + w).map(move |c| (pool.attr_values[t * f + c], pool.attr_accepts[t * f + c]));
                    let pairs = || columns(ta).zip(columns(tb));
                    // A filter of several columns is one set of values: overlap anywhere, containment everywhere.
                    let ok = match mode {
                        FilterMode::Overlap => pairs().any(|((va, _), (vb, _))| va & vb != 0),
                        _ => pairs().all(|((va, aa), (vb, ab))| va & !ab == 0 && vb & !aa == 0),
                    };
                    if !ok {
                        return Err(ctx(format!("tickets {ta} and {tb} incompatible on filter {k}")));
                    }
                }
            }
        }
        for k in 0..f {
            let want = m.tickets.iter().fold(u64::MAX, |acc, &t| acc & pool.attr_accepts[t as usize * f + k]);
            if m.accepts[k] != want {
                return Err(ctx(format!("accepts[{k}] = {:#x}, want {want:#x}", m.accepts[k])));
            }
        }
        // Hosts: every acceptable host within the relaxed bound, preferred is the cheapest.
        let cost = |hst: usize| m.tickets.iter().map(|&t| pool.latency_ms[t as usize * h + hst]).max().unwrap_or(0);
        if (h..64 * m.acceptable_hosts.len()).any(|hst| m.acceptable(hst)) {
            return Err(ctx("acceptable host bit beyond host_count".into()));
        }
        for hst in 0..h {
            if m.acceptable(hst) && u32::from(cost(hst)) > lat_bound {
                return Err(ctx(format!("host {hst} marked acceptable with cost {}", cost(hst))));
            }
        }
        if m.acceptable_hosts.iter().all(|&w| w == 0) {
            // None acceptable: the host with the lowest worst latency is preferred (none without hosts).
            if h == 0 && m.preferred_host != NO_HOST {
                return Err(ctx("preferred host without hosts".into()));
            }
            if h > 0 {
                let ph = m.preferred_host as usize;
                if ph >= h || (0..h).any(|hst| (cost(hst), hst) < (cost(ph), ph)) {
                    return Err(ctx(format!("preferred host {ph} is not the cheapest")));
                }
            }
            if rs.require_host {
                return Err(ctx("require_host but no acceptable host".into()));
            }
        } else {
            let ph = m.preferred_host as usize;
            if ph >= h || !m.acceptable(ph) {
                return Err(ctx("preferred host not acceptable".into()));
            }
            for hst in 0..h {
                if m.acceptable(hst) && (cost(hst), hst) < (cost(ph), ph) {
                    return Err(ctx(format!("host {hst} is cheaper than preferred {ph}")));
                }
            }
        }
    }
    Ok(())
}

/// A workspace whose seed loop runs on `threads` threads, whatever the pool's size.
pub fn threaded(threads: usize) -> Workspace {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
    Workspace::new().with_threads(std::sync::Arc::new(pool)).spread_from(0)
}
