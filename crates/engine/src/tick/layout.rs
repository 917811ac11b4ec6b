//! The pool re-laid out for the search: the tickets that can be in some match, in skill order, as
//! the few fields the scan reads (`Hot`), their latency rows and attribute rows or classes; the
//! seed order; which of them are used (the used bits; `Links` in tick/links.rs) and compaction of the
//! used ones.
//! Also the prefetch hints (an `unsafe` intrinsic) that hide the random accesses' latency.

use super::classes::{FilterBits, Interner};
use super::first_pass::{first_pass, Pieces};
use super::kept::Kept;
use super::lanes::{lat_words, row_words};
use super::sort::{fix_prefix_runs, from_order_key, mix, order_key, sort_by_prefix};
use super::speculate::Threads;
use crate::{PoolColumns, RuleDiagnostics, TickParams};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The fields every examined candidate needs, in skill order: one 16-byte load per candidate.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Hot {
    pub(super) eff: f64,
    pub(super) mask: u32,
    /// Party size in the low 8 bits, attribute class (when interned) above.
    pub(super) meta: u32,
}

impl Hot {
    #[inline]
    pub(super) fn party(&self) -> u32 {
        self.meta & 0xFF
    }

    /// Padding record at either end of `Sorted::hot`: its distance from any seed is infinite or
    /// NaN, so the scan never takes it.
    pub(super) fn sentinel(eff: f64) -> Self {
        Hot { eff, mask: 0, meta: 0 }
    }
}

/// A ticket's `Hot` record and seed-order key, in pool order: the skill-order gather reads both
/// from one place.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pre {
    pub(super) hot: Hot,
    pub(super) age: u64,
}

/// The pool laid out in skill order: rebuilt every tick, or kept from the last tick and updated by the
/// pool's changes (`Kept`, tick/kept.rs).
#[derive(Debug, Default)]
pub(crate) struct Sorted {
    /// Skill order: key prefix << 32 | pool index (see `sort_by_prefix`).
    by_skill: Vec<u64>,
    /// `Hot` records and age keys in pool order, gathered in skill order.
    pub(super) pre: Vec<Pre>,
    /// Seed order: key prefix << 32 | skill position (the rank in `by_skill`, which the seed
    /// loop needs, so it never maps pool indices to positions).
    pub(super) by_age: Vec<u64>,
    /// Pool index of each entry of `by_skill` before sorting: the tickets that can be in some
    /// match, in pool order.
    pub(super) candidates: Vec<u32>,
    /// Scatter buffer and digit counts of `sort_by_prefix`.
    sort_tmp: Vec<u64>,
    hist: Vec<u32>,
    /// Indexed by slot (live position + 1), with `Hot::sentinel`s at both ends so the scan reads
    /// its frontier without bounds branches.
    pub(super) hot: Vec<Hot>,
    /// Per skill position (before compaction): the ticket's arrival, which the seed loop reads
    /// for the seed's wait.
    pub(super) arrival: Vec<f64>,
    /// Skill position -> live position (meaningless once used). The live arrays (`hot`,
    /// `rows`, `attrs`) hold the unused tickets in skill order and are compacted as tickets get
    /// used; both positions ascend together, so compaction updates this in order, not at random.
    pub(super) cur: Vec<u32>,
    /// Bit per skill position: used. Small enough to stay in cache while seeds are checked in
    /// random order (most are used by their turn).
    pub(super) used: Vec<AtomicU64>,
    pub(super) live: usize,
    /// Distinct attribute rows (values and accepts of filter f at 2f and 2f+1). The scan reads
    /// a ticket's row through the class in `Hot::meta`.
    pub(super) classes: Interner,
    /// Whether `classes` holds every ticket's row; otherwise `attrs` does.
    pub(super) interned: bool,
    /// Per-filter compatibility as bitsets, when every filter has at most 64 distinct
    /// (values, accepts) pairs; see `FilterBits`.
    pub(super) bits: FilterBits,
    /// When not interned: rows by skill position, same layout as `classes`.
    pub(super) attrs: Vec<u64>,
    /// Per live position, `row_words(H)` words: the pool index (low 32 bits) and skill position
    /// (high 32), then the latencies as four 16-bit lanes per word (padding lanes 0xFFFF), so one
    /// SWAR step tests four hosts. The indices share the row so writing a match's output and
    /// marking it used find them in cache.
    pub(super) rows: Vec<u64>,
    /// The first pass's memory for pieces on threads (tick/first_pass.rs).
    first_pass: Pieces,
    /// What the next tick needs to update this layout instead of laying the pool out again.
    pub(super) kept: Kept,
    /// Spare live arrays: the merge's output (tick/kept.rs), then, during the search, the kept layout
    /// while the live arrays are compacted (`displaced`).
    pub(super) spare: Spare,
    pub(super) displaced: bool,
}

/// A second set of the live arrays and the arrivals (`Sorted`'s fields of the same names).
#[derive(Debug, Default)]
pub(super) struct Spare {
    pub(super) hot: Vec<Hot>,
    pub(super) rows: Vec<u64>,
    pub(super) attrs: Vec<u64>,
    pub(super) arrival: Vec<f64>,
    /// Unused tickets per run of live positions while compacting on threads (tick/compact.rs).
    pub(super) counts: Vec<usize>,
}

impl Sorted {
    /// Whether the ticket at skill position `q` is used.
    #[inline]
    pub(super) fn is_used(&self, q: usize) -> bool {
        self.used[q / 64].load(Relaxed) >> (q % 64) & 1 == 1
    }

    /// Marks skill position `q` used. Atomic (relaxed: one thread writes) so that threads trying seeds
    /// may read the bits while the committing thread writes them (tick/speculate.rs).
    #[inline]
    pub(super) fn mark_used(&self, q: usize) {
        let word = &self.used[q / 64];
        word.store(word.load(Relaxed) | 1 << (q % 64), Relaxed);
    }

    /// After the search: puts a kept layout back in the live arrays if compaction displaced it.
    pub(super) fn restore(&mut self) {
        if self.displaced {
            self.swap_spare();
            self.displaced = false;
            self.live = self.hot.len() - 2;
        }
    }

    /// The next tick lays the pool out whole.
    pub(crate) fn forget(&mut self) {
        self.kept.forget();
    }

    /// Whether the last tick updated a kept layout rather than laying the pool out whole.
    pub(crate) fn updated(&self) -> bool {
        self.kept.updated
    }

    /// Bytes held by the arrays that grow with the pool (their capacity), the kept layout's included.
    pub(crate) fn bytes(&self) -> usize {
        let spare = &self.spare;
        bytes(&self.by_skill)
            + bytes(&self.pre)
            + bytes(&self.by_age)
            + bytes(&self.candidates)
            + bytes(&self.sort_tmp)
            + bytes(&self.hot)
            + bytes(&self.arrival)
            + bytes(&self.cur)
            + bytes(&self.used)
            + bytes(&self.attrs)
            + bytes(&self.rows)
            + bytes(&spare.hot)
            + bytes(&spare.rows)
            + bytes(&spare.attrs)
            + bytes(&spare.arrival)
            + self.kept.bytes()
    }

    /// Starts the search over the `n` laid-out tickets: none used, live positions = skill positions.
    pub(super) fn start_search(&mut self, n: usize) {
        self.used.clear();
        self.used.resize_with(n.div_ceil(64), AtomicU64::default);
        self.cur.clear();
        self.cur.extend(0..n as u32);
        self.live = n;
    }

    pub(crate) fn reserve(&mut self, n: usize, f: usize, h: usize) {
        self.by_skill.reserve(n);
        self.by_age.reserve(n);
        self.candidates.reserve(n);
        self.sort_tmp.reserve(n);
        self.hot.reserve(n + 2);
        self.pre.reserve(n);
        self.cur.reserve(n);
        self.used.reserve(n.div_ceil(64));
        self.attrs.reserve(2 * n * f);
        self.rows.reserve(n * row_words(h));
    }
}

/// The bytes `v` holds (its capacity).
pub(super) fn bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

/// Cache-prefetch hint for `slice[idx]` (no-op when out of range or off x86_64). The pool's hot
/// accesses are random (seeds come in age order, not skill order), so hiding memory latency is
/// what makes 1M-ticket ticks fast.
#[inline(always)]
pub(super) fn prefetch<T>(slice: &[T], idx: usize) {
    prefetch_at(slice, idx, 0);
}

/// `prefetch` of the line holding byte `offset` (< `size_of::<T>()`) of `slice[idx]`.
#[inline(always)]
fn prefetch_at<T>(slice: &[T], idx: usize, offset: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = slice.get(idx) {
        let p = (x as *const T).cast::<i8>().wrapping_add(offset.min(std::mem::size_of::<T>().saturating_sub(1)));
        // SAFETY: `_mm_prefetch` is only a hint: it has no architectural effect and cannot fault,
        // and the pointer points into a live reference anyway. SSE is baseline on x86_64.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (slice, idx, offset);
}

/// Prefetches the cache lines of `slice[from..=to]` (clamped to the slice).
#[inline]
pub(super) fn prefetch_range<T>(slice: &[T], from: usize, to: usize) {
    let step = (64 / std::mem::size_of::<T>()).max(1);
    let to = to.min(slice.len().saturating_sub(1));
    let mut i = from;
    while i <= to {
        prefetch(slice, i);
        i += step;
    }
}

/// Per-tick immutable context, bundled so helpers take few arguments.
pub(super) struct Ctx<'p> {
    pub(super) s: &'p Sorted,
    pub(super) f: usize,
    pub(super) h: usize,
    pub(super) norm: f64,
}

impl Ctx<'_> {
    /// Attribute row of the ticket at live position `p` whose `Hot::meta` is `meta`.
    #[inline]
    pub(super) fn attrs(&self, p: u32, meta: u32) -> &[u64] {
        let f2 = 2 * self.f;
        if self.s.interned {
            let c = (meta >> 8) as usize;
            &self.s.classes.rows[c * f2..(c + 1) * f2]
        } else {
            &self.s.attrs[p as usize * f2..(p as usize + 1) * f2]
        }
    }

    /// Latency words of live position `p`.
    #[inline]
    pub(super) fn lat(&self, p: usize) -> &[u64] {
        let rw = row_words(self.h);
        &self.s.rows[p * rw + 1..(p + 1) * rw]
    }

    /// Pool index of live position `p`.
    #[cfg(test)]
    pub(super) fn ticket(&self, p: usize) -> u32 {
        self.s.rows[p * row_words(self.h)] as u32
    }
}

/// Re-lays the pool out in skill order and builds the seed order. The tickets set aside for want of
/// a host count in `diagnostics` (one record per ruleset).
pub(super) fn prepare(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    s: &mut Sorted,
    diagnostics: &mut [RuleDiagnostics],
    threads: Option<&Threads>,
) {
    let (f, h) = (pool.filter_count, pool.host_count);
    let w = lat_words(h);

    // Pass 1, pool order: each ticket's `Hot` record and attribute class (the class table is capped so
    // it stays in L2); for the tickets that can be in some match (`HostReach::could_match`), the skill
    // sort keys. The others are used from the start: they are neither sorted nor laid out, so a crowd of
    // them costs a tick one pass, and no scan meets them.
    let interning = first_pass(
        pool,
        params,
        &mut s.pre,
        (&mut s.by_skill, &mut s.candidates),
        &mut s.classes,
        &mut s.first_pass,
        diagnostics,
        threads,
    );
    let n = s.candidates.len();
    s.start_search(n);
    s.interned = interning;
    s.bits.build(interning.then_some(&s.classes), params.filters);
    // Skill order: by key, ties by pool index.
    let candidates = &s.candidates;
    sort_by_prefix(&mut s.by_skill, |j| candidates[j], &mut s.sort_tmp, &mut s.hist, threads);
    let pre = &s.pre;
    fix_prefix_runs(&mut s.by_skill, |i| (order_key(pre[i].hot.eff), i));

    // Pass 2, skill order: gather. Every element is overwritten, so `resize` only fills growth.
    s.hot.resize(n + 2, Hot::default());
    s.hot[0] = Hot::sentinel(f64::NEG_INFINITY);
    s.hot[n + 1] = Hot::sentinel(f64::INFINITY);
    s.rows.resize(n * (w + 1), 0);
    s.by_age.resize(n, 0);
    s.arrival.resize(n, 0.0);
    s.attrs.resize(if interning { 0 } else { 2 * n * f }, 0);
    let f2 = if interning { 0 } else { 2 * f };
    let out = Gathered {
        from: 0,
        hot: &mut s.hot[1..=n],
        rows: &mut s.rows,
        by_age: &mut s.by_age,
        arrival: &mut s.arrival,
        attrs: &mut s.attrs,
    };
    let (by_skill, pre) = (&s.by_skill, &s.pre);
    match threads.filter(|t| t.worth_it(n)) {
        Some(threads) => {
            // Pieces of equal length, a few a thread, so a slow thread does not hold the others up.
            let pieces = threads.pieces();
            let mut rest = out;
            let mut all = Vec::with_capacity(pieces);
            for k in (1..pieces).rev() {
                let len = rest.hot.len() / (k + 1);
                let (piece, more) = rest.split(len, w + 1, f2);
                all.push(piece);
                rest = more;
            }
            all.push(rest);
            threads.run(|| all.into_par_iter().for_each(|piece| gather(pool, by_skill, pre, piece, interning)));
        }
        None => gather(pool, by_skill, pre, out, interning),
    }
    // Seed order, by skill position: oldest first; equal arrivals by a seeded hash of the pool
    // index, then by skill position.
    sort_by_prefix(&mut s.by_age, |p| p as u32, &mut s.sort_tmp, &mut s.hist, threads);
    let (rows, seed) = (&s.rows, params.seed);
    fix_prefix_runs(&mut s.by_age, |p| {
        let i = rows[p * (w + 1)] as u32 as usize;
        (order_key(pool.arrival_ms[i]), mix(seed ^ mix(i as u64)) >> 32, p)
    });
}

/// Where pass 2 writes a run of skill positions, from `from` on.
struct Gathered<'a> {
    from: usize,
    hot: &'a mut [Hot],
    rows: &'a mut [u64],
    by_age: &'a mut [u64],
    arrival: &'a mut [f64],
    /// Empty when the attribute rows are interned.
    attrs: &'a mut [u64],
}

impl<'a> Gathered<'a> {
    /// The first `len` positions, and the rest; `rw` words a row and `f2` an attribute row.
    fn split(self, len: usize, rw: usize, f2: usize) -> (Self, Self) {
        let (hot, hot_rest) = self.hot.split_at_mut(len);
        let (rows, rows_rest) = self.rows.split_at_mut(len * rw);
        let (by_age, by_age_rest) = self.by_age.split_at_mut(len);
        let (arrival, arrival_rest) = self.arrival.split_at_mut(len);
        let (attrs, attrs_rest) = self.attrs.split_at_mut((len * f2).min(self.attrs.len()));
        let first = Gathered { from: self.from, hot, rows, by_age, arrival, attrs };
        let rest = Gathered {
            from: self.from + len,
            hot: hot_rest,
            rows: rows_rest,
            by_age: by_age_rest,
            arrival: arrival_rest,
            attrs: attrs_rest,
        };
        (first, rest)
    }
}

/// Pass 2 of `prepare` over the skill positions of `out`: each ticket's `Hot`, age, arrival, row and
/// attribute row, read from the pool in skill order.
fn gather(pool: &PoolColumns<'_>, by_skill: &[u64], pre: &[Pre], out: Gathered<'_>, interning: bool) {
    let (f, h) = (pool.filter_count, pool.host_count);
    let w = lat_words(h);
    let mut attr_rows = out.attrs.chunks_exact_mut((2 * f).max(1));
    const AHEAD: usize = 16;
    let gathered =
        out.hot.iter_mut().zip(out.rows.chunks_exact_mut(w + 1)).zip(out.by_age.iter_mut().zip(out.arrival.iter_mut()));
    for (k, ((hot, row), (age, arrival))) in gathered.enumerate() {
        let p = out.from + k;
        // Reads are random (pool order), writes sequential: prefetch the rows a few steps ahead.
        if let Some(&j) = by_skill.get(p + AHEAD) {
            let j = j as u32 as usize;
            // A 24-byte record may straddle two lines.
            prefetch(pre, j);
            prefetch_at(pre, j, std::mem::size_of::<Pre>() - 1);
            prefetch(pool.latency_ms, j * h);
            if !interning {
                prefetch(pool.attr_values, j * f);
                prefetch(pool.attr_accepts, j * f);
            }
        }
        let i = by_skill[p] as u32 as usize;
        let pre = pre[i];
        *hot = pre.hot;
        *age = pre.age;
        *arrival = from_order_key(pre.age);
        row[0] = i as u64 | (p as u64) << 32;
        if !interning {
            if let Some(row) = attr_rows.next() {
                let (vals, accs) = (&pool.attr_values[i * f..(i + 1) * f], &pool.attr_accepts[i * f..(i + 1) * f]);
                for ((pair, &v), &a) in row.chunks_exact_mut(2).zip(vals).zip(accs) {
                    pair[0] = v;
                    pair[1] = a;
                }
            }
        }
        pack_latencies(&mut row[1..], &pool.latency_ms[i * h..(i + 1) * h]);
    }
}

/// At most this many attribute classes for a pool of `n` tickets with `f` filter columns: the table
/// stays in L2, and interning pays only when classes are few against the tickets.
pub(super) fn max_classes(f: usize, n: usize) -> usize {
    (32_768 / f.max(1)).min(n / 4)
}

/// A ticket's latencies as four 16-bit lanes a word (`Sorted::rows` after the first word).
#[inline]
pub(super) fn pack_latencies(row: &mut [u64], latency_ms: &[u16]) {
    let mut quads = latency_ms.chunks_exact(4);
    for (word, q) in row.iter_mut().zip(&mut quads) {
        *word = u64::from(q[0]) | u64::from(q[1]) << 16 | u64::from(q[2]) << 32 | u64::from(q[3]) << 48;
    }
    let rest = quads.remainder();
    if !rest.is_empty() {
        // Padding lanes are 0xFFFF, which is never below a SWAR bound (bound < 65535).
        row[row.len() - 1] = rest.iter().rev().fold(u64::MAX, |x, &l| x << 16 | u64::from(l));
    }
}

/// One bit per ruleset of the queue: a ticket's ruleset mask is read through it. Here rather than in
/// `mod.rs`, which uses it too, so that the seed loop imports layout and not the other way round.
pub(super) fn valid_rulesets(params: &TickParams<'_>) -> u32 {
    if params.rulesets.len() >= 32 {
        u32::MAX
    } else {
        (1u32 << params.rulesets.len()) - 1
    }
}

/// Tells the tickets that can be in no match: for every ruleset they compete in (vacuously so
/// for a ticket in none of the queue's), the ruleset requires a host and none of theirs is within
/// its widest latency bound (relaxation only widens bounds, so no seed's bound is wider).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct HostReach {
    /// Per ruleset that requires a host, its widest latency bound.
    widest: [Option<u32>; 32],
    pub(super) valid_rulesets: u32,
}

impl HostReach {
    pub(super) fn new(params: &TickParams<'_>) -> Self {
        let mut widest = [None; 32];
        for (bound, rs) in widest.iter_mut().zip(params.rulesets) {
            if rs.require_host {
                *bound = Some(rs.widest_latency_ms());
            }
        }
        HostReach { widest, valid_rulesets: valid_rulesets(params) }
    }

    /// `mask` is the ticket's rulesets, `latency_ms` its row of the latency matrix.
    #[inline]
    pub(super) fn could_match(&self, mask: u32, latency_ms: &[u16]) -> bool {
        let mut mask = mask & self.valid_rulesets;
        while mask != 0 {
            let r = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            match self.widest[r] {
                None => return true,
                Some(bound) if latency_ms.iter().any(|&l| u32::from(l) <= bound) => return true,
                Some(_) => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::links::Links;
    use super::super::test_pool::TestPool;
    use super::*;
    use crate::{FilterMode, RelaxationStep, Ruleset};

    fn ruleset(require_host: bool, max_latency_ms: u32, relaxation: &[RelaxationStep]) -> Ruleset<'_> {
        Ruleset {
            teams: 1,
            team_size: 2,
            max_skill_spread: f64::INFINITY,
            max_team_imbalance: f64::INFINITY,
            max_latency_ms,
            require_host,
            relaxation,
            expansion: crate::Expansion::NONE,
        }
    }

    /// The pool laid out for one filter (overlap) and `rulesets`, on one thread.
    fn prepared(pool: &TestPool, rulesets: &[Ruleset<'_>]) -> Sorted {
        let mut s = Sorted::default();
        prepare(
            &pool.columns(),
            &params(&[FilterMode::Overlap], rulesets),
            &mut s,
            &mut [RuleDiagnostics::default()],
            None,
        );
        s
    }

    fn params<'a>(filters: &'a [FilterMode], rulesets: &'a [Ruleset<'a>]) -> TickParams<'a> {
        TickParams { mmr_normalization_ref: 0.1, party_synergy_bonus: 0.05, filters, rulesets, now_ms: 100.0, seed: 1 }
    }

    #[test]
    fn prepare_lays_candidates_out_in_skill_order_and_seeds_oldest_first() {
        let mut pool = TestPool::new(1, 2);
        pool.ticket(1, 0.3, 50.0).ticket(1, 0.1, 10.0).ticket(1, 0.3, 10.0);
        // A duo: effective skill 0.2 + 0.05.
        pool.ticket(2, 0.2, 40.0);
        // In no ruleset of the queue: set aside, though the oldest.
        pool.ticket(1, 0.9, 0.0).mask(0b10);
        let rulesets = [ruleset(false, 100, &[])];
        let s = prepared(&pool, &rulesets);

        let ctx = Ctx { s: &s, f: 1, h: 2, norm: 0.1 };
        assert_eq!(s.live, 4);
        // Equal skill (0 and 2): pool order.
        assert_eq!((0..4).map(|p| ctx.ticket(p)).collect::<Vec<_>>(), [1, 3, 0, 2]);
        let eff: Vec<f64> = s.hot.iter().map(|h| h.eff).collect();
        assert_eq!(eff, [f64::NEG_INFINITY, 0.1, 0.2 + 0.05, 0.3, 0.3, f64::INFINITY]);
        assert_eq!(s.hot[2].party(), 2);
        // Seed order holds skill positions: tickets 1 and 2 arrived together (their order is the
        // seeded hash's), then 3, then 0.
        let seeds: Vec<u32> = s.by_age.iter().map(|&e| e as u32).collect();
        assert!(seeds[..2] == [0, 3] || seeds[..2] == [3, 0], "{seeds:?}");
        assert_eq!(seeds[2..], [1, 2]);
        assert!((0..4).all(|q| !s.is_used(q)));
        assert_eq!(ctx.lat(0), [50 | 50 << 16 | 0xFFFF_FFFF << 32]);
    }

    #[test]
    fn compact_drops_used_tickets_and_keeps_the_order() {
        // In place, and into the spare arrays on threads (tick/compact.rs).
        let threads = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("a thread pool");
        for spread in [false, true] {
            compacted_keeps_the_order(spread, &threads);
        }
    }

    fn compacted_keeps_the_order(spread: bool, threads: &rayon::ThreadPool) {
        // More distinct attribute rows than the class table takes (it refuses to grow past n / 4).
        let n = 1200;
        let mut pool = TestPool::new(1, 5);
        for i in 0..n {
            let mmr = ((i * 37) % n) as f64 / n as f64;
            pool.ticket(1, mmr, i as f64).attr(0, i as u64 | 1 << 40, u64::MAX).latency(&[i as u16, 1, 2, 3, 4]);
        }
        let rulesets = [ruleset(false, 100, &[])];
        let mut s = prepared(&pool, &rulesets);
        assert!(!s.interned);
        let rw = row_words(5);
        let mut links = Links::default();
        links.reset(s.live);
        let before: Vec<u32> = (0..n).map(|p| Ctx { s: &s, f: 1, h: 5, norm: 0.1 }.ticket(p)).collect();
        let used = |q: usize| q.is_multiple_of(3) || q > 1000;
        for q in (0..n).filter(|&q| used(q)) {
            links.mark_used(q as u32);
            s.mark_used(q);
        }
        threads.install(|| s.compact(&mut links, 2, rw, spread));
        assert_eq!(s.hot[0].eff, f64::NEG_INFINITY);

        let kept: Vec<(usize, u32)> = (0..n).filter(|&q| !used(q)).map(|q| (q, before[q])).collect();
        assert_eq!(s.live, kept.len());
        assert_eq!(s.hot.len(), kept.len() + 2);
        assert_eq!(s.hot[kept.len() + 1].eff, f64::INFINITY);
        let ctx = Ctx { s: &s, f: 1, h: 5, norm: 0.1 };
        for (p, &(q, ticket)) in kept.iter().enumerate() {
            assert_eq!(ctx.ticket(p), ticket);
            assert_eq!(s.cur[q] as usize, p);
            assert_eq!(ctx.attrs(p as u32, s.hot[p + 1].meta), [u64::from(ticket) | 1 << 40, u64::MAX]);
            assert_eq!(ctx.lat(p)[0] & 0xFFFF, u64::from(ticket));
            assert_eq!(s.hot[p + 1].eff, pool.columns().mmr_mean[ticket as usize]);
        }
        // Links start over on the live positions: none used.
        assert!((0..kept.len() as u32).all(|p| !links.is_used(p)));
    }

    #[test]
    fn host_reach_sets_aside_tickets_no_host_can_serve() {
        let relax = [RelaxationStep { after_wait_ms: 10.0, max_skill_spread: 1.0, max_latency_ms: 150 }];
        let rulesets = [ruleset(true, 100, &relax), ruleset(false, 100, &[])];
        let reach = HostReach::new(&params(&[], &rulesets));
        // Within the widest (relaxed) bound of ruleset 0.
        assert!(reach.could_match(0b01, &[200, 150]));
        assert!(!reach.could_match(0b01, &[200, 151]));
        assert!(!reach.could_match(0b01, &[]));
        // Ruleset 1 needs no host.
        assert!(reach.could_match(0b11, &[200, 151]));
        // Ruleset 2 is not the queue's.
        assert!(!reach.could_match(0b100, &[0, 0]));
    }
}
