//! The matching algorithm. Inputs are validated by `run_tick` before anything here runs, so the
//! indexing below cannot go out of bounds.

use crate::{FilterMode, MatchBuffers, PoolColumns, Ruleset, TickParams, Workspace, NO_HOST};

/// A balancing swap must shrink the team gap by at least this factor. A swap that merely mirrors the two
/// team sums (its new gap equals the old up to rounding) is refused: without this margin such swaps could
/// alternate until the round cap, and the teams would depend on the cap's parity.
const MIN_SWAP_GAIN: f64 = 1.0 - 1e-9;

/// The fields every examined candidate needs, in skill order: one 16-byte load per candidate.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hot {
    eff: f64,
    mask: u32,
    /// Party size in the low 8 bits, attribute class (when interned) above.
    meta: u32,
}

impl Hot {
    #[inline]
    fn party(&self) -> u32 {
        self.meta & 0xFF
    }

    /// Padding record at either end of `Sorted::hot`: its distance from any seed is infinite or
    /// NaN, so the scan never takes it.
    fn sentinel(eff: f64) -> Self {
        Hot { eff, mask: 0, meta: 0 }
    }
}

/// A ticket's `Hot` record and seed-order key, in pool order: the skill-order gather reads both
/// from one place.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Pre {
    hot: Hot,
    age: u64,
}

/// The pool re-laid out in skill order (rebuilt every tick).
#[derive(Debug, Default)]
pub(crate) struct Sorted {
    /// Skill order: key prefix << 32 | pool index (see `sort_by_prefix`).
    by_skill: Vec<u64>,
    /// `Hot` records and age keys in pool order, gathered in skill order.
    pre: Vec<Pre>,
    /// Seed order: key prefix << 32 | skill position (the rank in `by_skill`, which the seed
    /// loop needs, so it never maps pool indices to positions).
    by_age: Vec<u64>,
    /// Pool index of each entry of `by_skill` before sorting: the tickets that can be in some
    /// match, in pool order.
    candidates: Vec<u32>,
    /// Scatter buffer and digit counts of `sort_by_prefix`.
    sort_tmp: Vec<u64>,
    hist: Vec<u32>,
    /// Indexed by slot (live position + 1), with `Hot::sentinel`s at both ends so the scan reads
    /// its frontier without bounds branches.
    hot: Vec<Hot>,
    /// Skill position -> live position (meaningless once used). The live arrays (`hot`,
    /// `rows`, `attrs`) hold the unused tickets in skill order and are compacted as tickets get
    /// used; both positions ascend together, so compaction updates this in order, not at random.
    cur: Vec<u32>,
    /// Bit per skill position: used. Small enough to stay in cache while seeds are checked in
    /// random order (most are used by their turn).
    used: Vec<u64>,
    live: usize,
    /// Distinct attribute rows (values and accepts of filter f at 2f and 2f+1). The scan reads
    /// a ticket's row through the class in `Hot::meta`.
    classes: Interner,
    /// Whether `classes` holds every ticket's row; otherwise `attrs` does.
    interned: bool,
    /// Per-filter compatibility as bitsets, when every filter has at most 64 distinct
    /// (values, accepts) pairs; see `FilterBits`.
    bits: FilterBits,
    /// When not interned: rows by skill position, same layout as `classes`.
    attrs: Vec<u64>,
    /// Per live position, `row_words(H)` words: the pool index (low 32 bits) and skill position
    /// (high 32), then the latencies as four 16-bit lanes per word (padding lanes 0xFFFF), so one
    /// SWAR step tests four hosts. The indices share the row so writing a match's output and
    /// marking it used find them in cache.
    rows: Vec<u64>,
}

impl Sorted {
    /// Whether the ticket at skill position `q` is used.
    #[inline]
    fn is_used(&self, q: usize) -> bool {
        self.used[q / 64] >> (q % 64) & 1 == 1
    }

    /// Removes used tickets from the live arrays. Order is kept, so scans see the same
    /// sequence of unused tickets; only positions change.
    fn compact(&mut self, links: &mut Links, f2: usize, rw: usize) {
        let live = self.live;
        let f2 = if self.interned { 0 } else { f2 };
        // In place: entries only move down. Branch-free over which entries are used (random, so
        // a branch would mispredict): each entry is copied to the next free place, which
        // advances only when the entry is unused; a used one is overwritten by the next copy.
        let mut kept = 0;
        for pos in 0..live {
            let unused = !links.is_used(pos as u32);
            if kept < pos {
                self.hot[kept + 1] = self.hot[pos + 1];
                let (dst, src) = self.rows.split_at_mut(pos * rw);
                copy_words(&mut dst[kept * rw..(kept + 1) * rw], &src[..rw]);
                let (dst, src) = self.attrs.split_at_mut(pos * f2);
                copy_words(&mut dst[kept * f2..(kept + 1) * f2], &src[..f2]);
            }
            // Skill positions ascend with live positions, so these writes go in order. A used
            // entry's value is never read (the seed loop tests `used` first).
            let q = (self.rows[kept * rw] >> 32) as usize;
            self.cur[q] = kept as u32;
            kept += usize::from(unused);
        }
        self.hot.truncate(kept + 1);
        self.hot.push(Hot::sentinel(f64::INFINITY));
        self.rows.truncate(kept * rw);
        self.attrs.truncate(kept * f2);
        self.live = kept;
        links.reset(kept);
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

/// Which live positions are still unused, with O(α) skipping of used runs. Slot `p + 1` is live
/// position p; slots 0 and n + 1 are sentinels. `next[slot][0]` leads left, `[1]` right (both
/// directions in one cache line); an unused slot points to itself.
#[derive(Debug, Default)]
pub(crate) struct Links {
    next: Vec<[u32; 2]>,
}

impl Links {
    pub(crate) fn reserve(&mut self, n: usize) {
        self.next.reserve(n + 2);
    }

    #[inline]
    fn is_used(&self, pos: u32) -> bool {
        self.next[pos as usize + 1][1] != pos + 1
    }

    /// All of `n` positions unused.
    fn reset(&mut self, n: usize) {
        self.next.clear();
        self.next.extend((0..(n as u32 + 2)).map(|x| [x, x]));
    }

    fn mark_used(&mut self, pos: u32) {
        let slot = pos + 1;
        self.next[slot as usize] = [slot - 1, slot + 1];
    }
}

/// Per-candidate scratch; all indices are live positions or indices into `sel`.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Relaxation by seed: per ruleset, (first index into `level_ends`, steps in force now),
    /// and per step the seed-order index from which it no longer applies. See `run`.
    levels: Vec<(usize, usize)>,
    level_ends: Vec<u32>,
    /// (spread bits, `spread_threshold`) for the spread bounds met this tick.
    spread_limits: Vec<(u64, f64)>,
    sel: Vec<u32>,
    sel_team: Vec<u32>,
    /// Per selected ticket: party size and effective skill, copied so `balance` does not chase
    /// positions.
    sel_party: Vec<u32>,
    sel_eff: Vec<f64>,
    /// Room left per team during the scan.
    room: Vec<u32>,
    big: BigBalance,
    /// Per filter: overlap (else containment).
    overlap: Vec<bool>,
    agg: Vec<Agg>,
    /// Distinct (filter, values) of the selected tickets' overlap values other than `u64::MAX`.
    overlap_values: Vec<(usize, u64)>,
}

/// Per filter, over the selected tickets: AND of accepts and OR of values (containment filters;
/// neutral for overlap), and `u64::MAX` for overlap filters (whose values must be non-zero).
/// See `try_form`.
#[derive(Clone, Copy, Debug, Default)]
struct Agg {
    and_accepts: u64,
    or_values: u64,
    nonzero: u64,
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

/// Turns `v` (full sort keys of the tickets `index(0)`, `index(1)`, ..., which ascend) into the
/// skill or seed order: `prefix << 32 | index`, sorted. The prefix is the top 32 of the key bits that
/// differ between tickets, which orders like the full key except within runs of equal prefixes;
/// the caller re-sorts those runs (rare unless keys tie). LSD radix sort, at most 11 bits per
/// pass, on 8-byte elements: O(n) per pass with no data-dependent branches, and stable, so runs
/// come out in index order.
fn sort_by_prefix(v: &mut Vec<u64>, index: impl Fn(usize) -> u32, tmp: &mut Vec<u64>, hist: &mut Vec<u32>) {
    let n = v.len();
    let first = v.first().copied().unwrap_or(0);
    let differ = v.iter().fold(0, |acc, &k| acc | (k ^ first));
    let shift = (u64::BITS - differ.leading_zeros()).saturating_sub(32);
    for (j, k) in v.iter_mut().enumerate() {
        *k = (*k >> shift) << 32 | u64::from(index(j));
    }
    let bits = u64::BITS - (differ >> shift).leading_zeros();
    if bits == 0 {
        return;
    }
    // Narrower digits once the arrays outgrow the caches: a pass scatters into `2^width` places
    // at once, and 2048 of them miss L1 and the TLB on every write (measured at 1M keys: 10 ms
    // with 11 bits, 7.5 ms with 8; at 100k the extra pass costs more than it saves).
    let max_width = if n > 1 << 18 { 8 } else { 11 };
    let passes = bits.div_ceil(max_width) as usize;
    let width = bits.div_ceil(passes as u32);
    let digits = 1usize << width;
    let mask = (digits - 1) as u64;
    hist.clear();
    hist.resize(passes * digits, 0);
    for &k in v.iter() {
        let k = k >> 32;
        for (pass, counts) in hist.chunks_exact_mut(digits).enumerate() {
            counts[((k >> (pass as u32 * width)) & mask) as usize] += 1;
        }
    }
    // Fully overwritten by the first pass.
    tmp.resize(n, 0);
    for (pass, counts) in hist.chunks_exact_mut(digits).enumerate() {
        if counts.contains(&(n as u32)) {
            continue;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let x = *c;
            *c = sum;
            sum += x;
        }
        let shift = 32 + pass as u32 * width;
        for &e in v.iter() {
            let d = ((e >> shift) & mask) as usize;
            tmp[counts[d] as usize] = e;
            counts[d] += 1;
        }
        std::mem::swap(v, tmp);
    }
}

/// Re-sorts each run of equal prefixes in `v` (the output of `sort_by_prefix`) by `key` of the
/// pool index, which must be unique (so an unstable sort is deterministic; it also does not
/// allocate).
fn fix_prefix_runs<K: Ord>(v: &mut [u64], mut key: impl FnMut(usize) -> K) {
    let mut start = 0;
    for k in 1..=v.len() {
        if k == v.len() || v[k] >> 32 != v[start] >> 32 {
            if k - start > 1 {
                v[start..k].sort_unstable_by_key(|&e| key(e as u32 as usize));
            }
            start = k;
        }
    }
}

/// The largest `t` with `t / norm <= spread` (IEEE division, `spread >= 0`, `norm > 0`):
/// division is monotone, so for every x (negative, infinite and NaN included),
/// `x / norm > spread` exactly when `x > t`.
fn spread_threshold(spread: f64, norm: f64) -> f64 {
    if f64::INFINITY / norm <= spread {
        return f64::INFINITY;
    }
    // Bisect over the bit patterns of [0, inf], which order like the values: `lo` passes,
    // `hi` fails.
    let (mut lo, mut hi) = (0u64, f64::INFINITY.to_bits());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if f64::from_bits(mid) / norm <= spread {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    f64::from_bits(lo)
}

/// Prefetches the cache lines of `slice[from..=to]` (clamped to the slice).
#[inline]
fn prefetch_range<T>(slice: &[T], from: usize, to: usize) {
    let step = (64 / std::mem::size_of::<T>()).max(1);
    let to = to.min(slice.len().saturating_sub(1));
    let mut i = from;
    while i <= to {
        prefetch(slice, i);
        i += step;
    }
}

/// `dst.copy_from_slice(src)` without a `memcpy` call for the usual short rows.
#[inline]
fn copy_words(dst: &mut [u64], src: &[u64]) {
    match (dst, src) {
        ([d0, d1], [s0, s1]) => (*d0, *d1) = (*s0, *s1),
        ([d0, d1, d2], [s0, s1, s2]) => (*d0, *d1, *d2) = (*s0, *s1, *s2),
        (dst, src) => dst.copy_from_slice(src),
    }
}

/// Union-find "next unused slot" towards `side` (0 left, 1 right) with path halving.
#[inline]
fn find(next: &mut [[u32; 2]], mut x: u32, side: usize) -> u32 {
    loop {
        let p = next[x as usize][side];
        if p == x {
            return x;
        }
        let gp = next[p as usize][side];
        next[x as usize][side] = gp;
        x = gp;
    }
}

/// Words of latencies per ticket: four 16-bit lanes each.
#[inline]
fn lat_words(h: usize) -> usize {
    h.div_ceil(4)
}

/// Words per `Sorted::rows` entry: the pool index, then the latencies.
#[inline]
fn row_words(h: usize) -> usize {
    1 + lat_words(h)
}

const LANE_HI: u64 = 0x8000_8000_8000_8000;

/// Top bit of 16-bit lane j set when lane j of `x` is below lane j of `t` (unsigned, SWAR).
#[inline]
fn lanes_lt_hi(x: u64, t: u64) -> u64 {
    // Per-lane x - t on the low 15 bits without borrows between lanes: bit 15 of a lane is
    // set when x_lo >= t_lo. With equal top bits that decides; otherwise the top bits do.
    let d = (x | LANE_HI) - (t & !LANE_HI);
    ((!x & t) | (!(x ^ t) & !d)) & LANE_HI
}

/// Bit j (j < 4) set when 16-bit lane j of `x` is below lane j of `t`.
#[inline]
fn lanes_lt(x: u64, t: u64) -> u64 {
    // Gather the four lane flags (bits 0, 16, 32, 48 after the shift) into bits 45..=48.
    ((lanes_lt_hi(x, t) >> 15).wrapping_mul(1 | 1 << 15 | 1 << 30 | 1 << 45) >> 45) & 0xF
}

/// Host test for one latency bound: `host_mask` is then a few word operations.
#[derive(Clone, Copy)]
struct LatBound {
    /// `bound + 1` in every lane, when the bound is below 65535.
    lanes: u64,
    /// Every host passes (bound >= 65535, so no u16 latency exceeds it).
    all: bool,
    all_mask: u64,
}

impl LatBound {
    fn new(bound: u32, h: usize) -> Self {
        let all = bound >= u32::from(u16::MAX);
        let lane = if all { 0 } else { u64::from(bound) + 1 };
        let all_mask = if h >= 64 { u64::MAX } else { (1u64 << h) - 1 };
        LatBound { lanes: lane * 0x0001_0001_0001_0001, all, all_mask }
    }

    /// Hosts whose latency in `row` (one ticket's words) is within the bound.
    #[inline]
    fn host_mask(&self, row: &[u64]) -> u64 {
        if self.all {
            return self.all_mask;
        }
        match *row {
            [a] => lanes_lt(a, self.lanes),
            [a, b] => lanes_lt(a, self.lanes) | lanes_lt(b, self.lanes) << 4,
            _ => row.iter().enumerate().fold(0, |m, (w, &x)| m | lanes_lt(x, self.lanes) << (4 * w)),
        }
    }
}

/// Lane-wise unsigned max of four 16-bit lanes.
#[inline]
fn lanes_max(x: u64, y: u64) -> u64 {
    // Lane flags widened to full-lane masks (no carries: each lane holds 0 or 1).
    let m = (lanes_lt_hi(x, y) >> 15) * 0xFFFF;
    (x & !m) | (y & m)
}

/// Per-tick immutable context, bundled so helpers take few arguments.
struct Ctx<'p> {
    s: &'p Sorted,
    f: usize,
    h: usize,
    norm: f64,
}

impl Ctx<'_> {
    /// Attribute row of the ticket at live position `p` whose `Hot::meta` is `meta`.
    #[inline]
    fn attrs(&self, p: u32, meta: u32) -> &[u64] {
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
    fn lat(&self, p: usize) -> &[u64] {
        let rw = row_words(self.h);
        &self.s.rows[p * rw + 1..(p + 1) * rw]
    }

    /// Pool index of live position `p`.
    #[inline]
    fn ticket(&self, p: usize) -> u32 {
        self.s.rows[p * row_words(self.h)] as u32
    }
}

/// Distinct attribute rows of the pool ("classes"), 2F words each, with an open-addressing
/// index. Pools usually have few distinct rows, so the table stays in cache.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    rows: Vec<u64>,
    /// class + 1, or 0 when empty; the length is a power of two at least twice the classes.
    slots: Vec<u32>,
    count: usize,
    /// Scratch for `grow`.
    split: (Vec<u64>, Vec<u64>),
}

impl Interner {
    #[inline]
    fn hash(vals: &[u64], accs: &[u64]) -> u64 {
        let mut x = 0x243F_6A88_85A3_08D3u64;
        for (&v, &a) in vals.iter().zip(accs) {
            x = (x ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x = (x ^ a ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        }
        x ^ (x >> 32)
    }

    fn clear(&mut self) {
        self.rows.clear();
        self.slots.clear();
        self.count = 0;
    }

    /// Class of the row (`vals`, `accs`), adding it when new. `None` when that would exceed
    /// `max_classes` (the caller then lays the rows out per ticket instead).
    #[inline]
    fn intern(&mut self, vals: &[u64], accs: &[u64], max_classes: usize) -> Option<u32> {
        // Fixed widths for the usual filter counts: the loops unroll.
        match vals.len() {
            1 => self.intern_n::<1>(vals, accs, max_classes),
            2 => self.intern_n::<2>(vals, accs, max_classes),
            3 => self.intern_n::<3>(vals, accs, max_classes),
            4 => self.intern_n::<4>(vals, accs, max_classes),
            _ => self.intern_n::<0>(vals, accs, max_classes),
        }
    }

    /// `intern` for `F` filters (0: any number).
    #[inline(always)]
    fn intern_n<const F: usize>(&mut self, vals: &[u64], accs: &[u64], max_classes: usize) -> Option<u32> {
        let f = if F > 0 { F } else { vals.len() };
        let (vals, accs) = (&vals[..f], &accs[..f]);
        if 2 * (self.count + 1) > self.slots.len() {
            if self.count + 1 > max_classes {
                return None;
            }
            self.grow(f);
        }
        let mask = self.slots.len() - 1;
        let mut k = Self::hash(vals, accs) as usize & mask;
        loop {
            let c = self.slots[k] as usize;
            if c == 0 {
                self.slots[k] = self.count as u32 + 1;
                for (&v, &a) in vals.iter().zip(accs) {
                    self.rows.push(v);
                    self.rows.push(a);
                }
                self.count += 1;
                return Some(self.count as u32 - 1);
            }
            let row = &self.rows[(c - 1) * 2 * f..c * 2 * f];
            let mut same = true;
            for k in 0..f {
                same &= (row[2 * k] == vals[k]) & (row[2 * k + 1] == accs[k]);
            }
            if same {
                return Some(c as u32 - 1);
            }
            k = (k + 1) & mask;
        }
    }

    /// Doubles the index (load factor at most 1/2) and re-inserts every class.
    #[cold]
    fn grow(&mut self, f: usize) {
        let size = (self.slots.len() * 2).max(1024);
        self.slots.clear();
        self.slots.resize(size, 0);
        for c in 0..self.count {
            let row = &self.rows[c * 2 * f..(c + 1) * 2 * f];
            let (vals, accs) = &mut self.split;
            vals.clear();
            accs.clear();
            vals.extend(row.iter().step_by(2));
            accs.extend(row.iter().skip(1).step_by(2));
            let mut k = Self::hash(vals, accs) as usize & (size - 1);
            while self.slots[k] != 0 {
                k = (k + 1) & (size - 1);
            }
            self.slots[k] = c as u32 + 1;
        }
    }
}

/// Attribute compatibility by bitsets. Filter k's distinct (values, accepts) pairs get ids
/// `0..64`; `compat[64k + id]` has bit j set when pair `id` is compatible with pair j under
/// filter k's mode (a symmetric relation). A match keeps, per filter, the AND of its tickets'
/// rows: the pairs compatible with all of them, so testing a candidate is one AND per filter.
#[derive(Debug, Default)]
pub(crate) struct FilterBits {
    enabled: bool,
    /// F words per class: `1 << id` of the class's pair in filter k.
    class_bits: Vec<u64>,
    compat: Vec<u64>,
    /// Distinct pairs of one filter, while building.
    pairs: Vec<(u64, u64)>,
}

impl FilterBits {
    const MAX_FILTERS: usize = 16;

    fn build(&mut self, classes: Option<&Interner>, modes: &[FilterMode]) {
        self.enabled = false;
        let Some(classes) = classes else { return };
        let f = modes.len();
        if f > Self::MAX_FILTERS {
            return;
        }
        self.class_bits.clear();
        self.class_bits.resize(classes.count * f, 0);
        self.compat.clear();
        self.compat.resize(64 * f, 0);
        for (k, &mode) in modes.iter().enumerate() {
            self.pairs.clear();
            for (c, row) in classes.rows.chunks_exact(2 * f).enumerate() {
                let pair = (row[2 * k], row[2 * k + 1]);
                let id = match self.pairs.iter().position(|&q| q == pair) {
                    Some(id) => id,
                    None if self.pairs.len() < 64 => {
                        self.pairs.push(pair);
                        self.pairs.len() - 1
                    }
                    None => return,
                };
                self.class_bits[c * f + k] = 1 << id;
            }
            for (a, &(va, aa)) in self.pairs.iter().enumerate() {
                for (b, &(vb, ab)) in self.pairs.iter().enumerate() {
                    let ok = match mode {
                        FilterMode::Overlap => va & vb != 0,
                        FilterMode::Containment => (va & !ab) | (vb & !aa) == 0,
                    };
                    self.compat[64 * k + a] |= u64::from(ok) << b;
                }
            }
        }
        self.enabled = true;
    }
}

/// Re-lays the pool out in skill order and builds the seed order.
fn prepare(pool: &PoolColumns<'_>, params: &TickParams<'_>, s: &mut Sorted) {
    let n = pool.len();
    let (f, h) = (pool.filter_count, pool.host_count);
    let w = lat_words(h);
    let bonus = params.party_synergy_bonus;

    // Pass 1, pool order: effective skill, each ticket's `Hot` record, and attribute classes (the
    // class table is capped so it stays in L2); then, for the tickets that can be in some match
    // (`could_match`), the skill and seed sort keys. The others are used from the start: they are
    // neither sorted nor laid out, so a crowd of them costs a tick one pass, and no scan meets them.
    s.by_skill.clear();
    s.by_age.clear();
    s.candidates.clear();
    s.pre.resize(n, Pre::default());
    s.classes.clear();
    let max_classes = (32_768 / f.max(1)).min(n / 4);
    let mut interning = f > 0;
    let classes = &mut s.classes;
    let reach = HostReach::new(params);
    let columns = pool.party_size.iter().zip(pool.mmr_mean).zip(pool.arrival_ms.iter().zip(pool.ruleset_mask));
    for (i, (pre, ((&party, &mmr), (&arrival, &mask)))) in s.pre.iter_mut().zip(columns).enumerate() {
        let eff = mmr + bonus * f64::from(party - 1);
        let mut class = 0;
        if interning {
            let (vals, accs) = (&pool.attr_values[i * f..(i + 1) * f], &pool.attr_accepts[i * f..(i + 1) * f]);
            match classes.intern(vals, accs, max_classes) {
                Some(c) => class = c,
                None => interning = false,
            }
        }
        *pre = Pre { hot: Hot { eff, mask, meta: u32::from(party) | class << 8 }, age: order_key(arrival) };
        if reach.could_match(mask, &pool.latency_ms[i * h..(i + 1) * h]) {
            s.by_skill.push(order_key(eff));
            s.candidates.push(i as u32);
        }
    }
    let n = s.candidates.len();
    s.used.clear();
    s.used.resize(n.div_ceil(64), 0);
    s.interned = interning;
    s.bits.build(interning.then_some(&s.classes), params.filters);
    // Skill order: by key, ties by pool index.
    let candidates = &s.candidates;
    sort_by_prefix(&mut s.by_skill, |j| candidates[j], &mut s.sort_tmp, &mut s.hist);
    let pre = &s.pre;
    fix_prefix_runs(&mut s.by_skill, |i| (order_key(pre[i].hot.eff), i));

    // Pass 2, skill order: gather. Every element is overwritten, so `resize` only fills growth.
    s.hot.resize(n + 2, Hot::default());
    s.hot[0] = Hot::sentinel(f64::NEG_INFINITY);
    s.hot[n + 1] = Hot::sentinel(f64::INFINITY);
    s.rows.resize(n * (w + 1), 0);
    s.cur.clear();
    s.cur.extend(0..n as u32);
    s.by_age.resize(n, 0);
    s.live = n;
    s.attrs.resize(if interning { 0 } else { 2 * n * f }, 0);
    let mut attr_rows = s.attrs.chunks_exact_mut((2 * f).max(1));
    const AHEAD: usize = 16;
    let gathered = s.hot[1..=n].iter_mut().zip(s.rows.chunks_exact_mut(w + 1)).zip(&mut s.by_age);
    for (p, ((hot, row), age)) in gathered.enumerate() {
        // Reads are random (pool order), writes sequential: prefetch the rows a few steps ahead.
        if let Some(&j) = s.by_skill.get(p + AHEAD) {
            let j = j as u32 as usize;
            // A 24-byte record may straddle two lines.
            prefetch(&s.pre, j);
            prefetch_at(&s.pre, j, std::mem::size_of::<Pre>() - 1);
            prefetch(pool.latency_ms, j * h);
            if !interning {
                prefetch(pool.attr_values, j * f);
                prefetch(pool.attr_accepts, j * f);
            }
        }
        let i = s.by_skill[p] as u32 as usize;
        let pre = s.pre[i];
        *hot = pre.hot;
        *age = pre.age;
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
        let row = &mut row[1..];
        let mut quads = pool.latency_ms[i * h..(i + 1) * h].chunks_exact(4);
        for (word, q) in row.iter_mut().zip(&mut quads) {
            *word = u64::from(q[0]) | u64::from(q[1]) << 16 | u64::from(q[2]) << 32 | u64::from(q[3]) << 48;
        }
        let rest = quads.remainder();
        if !rest.is_empty() {
            // Padding lanes are 0xFFFF, which is never below a SWAR bound (bound < 65535).
            row[w - 1] = rest.iter().rev().fold(u64::MAX, |x, &l| x << 16 | u64::from(l));
        }
    }
    // Seed order, by skill position: oldest first; equal arrivals by a seeded hash of the pool
    // index, then by skill position.
    sort_by_prefix(&mut s.by_age, |p| p as u32, &mut s.sort_tmp, &mut s.hist);
    let (rows, seed) = (&s.rows, params.seed);
    fix_prefix_runs(&mut s.by_age, |p| {
        let i = rows[p * (w + 1)] as u32 as usize;
        (order_key(pool.arrival_ms[i]), mix(seed ^ mix(i as u64)) >> 32, p)
    });
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
    // Every ticket that could be in a match is a seed, in age order.
    let seeds = sorted.by_age.len();
    scratch.overlap.clear();
    scratch.overlap.extend(params.filters.iter().map(|m| *m == FilterMode::Overlap));
    scratch.spread_limits.clear();
    links.reset(sorted.live);

    let valid_rulesets = valid_rulesets(params);

    // Bounds follow the seed's wait, and seeds come oldest first, so each relaxation step
    // applies to a prefix of the seed order: find where each one ends (bisection on the same
    // `now - arrival` as `Ruleset::bounds_for_wait`) instead of reading every seed's arrival.
    // No compaction yet: live positions are still skill positions.
    let rw = row_words(pool.host_count);
    let wait_at = |k: usize| {
        params.now_ms - pool.arrival_ms[sorted.rows[(sorted.by_age[k] as u32 as usize) * rw] as u32 as usize]
    };
    scratch.levels.clear();
    scratch.level_ends.clear();
    for rs in params.rulesets {
        let first = scratch.level_ends.len();
        for step in rs.relaxation {
            let (mut lo, mut hi) = (0, seeds);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if step.after_wait_ms <= wait_at(mid) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            scratch.level_ends.push(lo as u32);
        }
        // Steps are sorted, so the ones in force are a prefix, and later steps end earlier.
        let in_force = scratch.level_ends[first..].iter().filter(|&&end| end > 0).count();
        scratch.levels.push((first, in_force));
    }
    let mut matches = 0usize;
    let mut written = 0usize;
    let (f, h) = (pool.filter_count, pool.host_count);
    let w = lat_words(h);
    let mut used_since_compact = 0;

    // Seeds jump around in skill order, so their data is cold. Two-stage prefetch: the live
    // position of a far seed, then, if it is still unused, its neighbourhood in every stream.
    const FAR: usize = 16;
    const NEAR: usize = 6;
    const SPAN: usize = 16;
    for k in 0..seeds {
        if let Some(&e) = sorted.by_age.get(k + FAR) {
            if !sorted.is_used(e as u32 as usize) {
                prefetch(&sorted.cur, e as u32 as usize);
            }
        }
        if let Some(&e) = sorted.by_age.get(k + NEAR) {
            if !sorted.is_used(e as u32 as usize) {
                let q = sorted.cur[e as u32 as usize];
                let q = q as usize;
                let (a, b) = (q.saturating_sub(SPAN), q + SPAN);
                prefetch_range(&links.next, a, b + 2);
                prefetch_range(&sorted.hot, a, b + 2);
                if !sorted.interned {
                    prefetch_range(&sorted.attrs, a * 2 * f, b * 2 * f);
                }
                prefetch_range(&sorted.rows, a * (w + 1), b * (w + 1));
            }
        }
        let q = sorted.by_age[k] as u32 as usize;
        if sorted.is_used(q) {
            continue;
        }
        let sp = sorted.cur[q];
        let ctx = Ctx { s: sorted, f, h, norm: params.mmr_normalization_ref };
        let mut mask = sorted.hot[sp as usize + 1].mask & valid_rulesets;
        let mut formed = false;
        while mask != 0 {
            let r = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let rs = &params.rulesets[r];
            // The relaxation steps in force for seed k: drop those that ended at or before k.
            let (first, in_force) = &mut scratch.levels[r];
            while *in_force > 0 && scratch.level_ends[*first + *in_force - 1] as usize <= k {
                *in_force -= 1;
            }
            let bounds = match *in_force {
                0 => (rs.max_skill_spread, rs.max_latency_ms),
                j => (rs.relaxation[j - 1].max_skill_spread, rs.relaxation[j - 1].max_latency_ms),
            };
            if let Some((acceptable, lat)) = try_form(&ctx, links, scratch, sp, bounds, r, rs) {
                emit(&ctx, scratch, out, matches, written, r, rs, acceptable, &lat);
                written += scratch.sel.len();
                matches += 1;
                formed = true;
                break;
            }
        }
        if formed {
            for &p in &scratch.sel {
                links.mark_used(p);
                let q = (sorted.rows[p as usize * (w + 1)] >> 32) as usize;
                sorted.used[q / 64] |= 1 << (q % 64);
            }
            used_since_compact += scratch.sel.len();
            // Once half the live tickets are used, drop them so scans stay dense in memory.
            let live = sorted.live;
            if 2 * used_since_compact >= live && live >= 256 {
                sorted.compact(links, 2 * f, w + 1);
                used_since_compact = 0;
            }
        }
    }
    matches
}

/// One bit per ruleset of the queue: a ticket's ruleset mask is read through it.
fn valid_rulesets(params: &TickParams<'_>) -> u32 {
    if params.rulesets.len() >= 32 {
        u32::MAX
    } else {
        (1u32 << params.rulesets.len()) - 1
    }
}

/// Tells the tickets that can be in no match: for every ruleset they compete in (vacuously so
/// for a ticket in none of the queue's), the ruleset requires a host and none of theirs is within
/// its widest latency bound (relaxation only widens bounds, so no seed's bound is wider).
struct HostReach {
    /// Per ruleset that requires a host, its widest latency bound.
    widest: [Option<u32>; 32],
    valid_rulesets: u32,
}

impl HostReach {
    fn new(params: &TickParams<'_>) -> Self {
        let mut widest = [None; 32];
        for (bound, rs) in widest.iter_mut().zip(params.rulesets) {
            if rs.require_host {
                *bound = Some(
                    rs.relaxation.last().map_or(rs.max_latency_ms, |step| step.max_latency_ms.max(rs.max_latency_ms)),
                );
            }
        }
        HostReach { widest, valid_rulesets: valid_rulesets(params) }
    }

    /// `mask` is the ticket's rulesets, `latency_ms` its row of the latency matrix.
    #[inline]
    fn could_match(&self, mask: u32, latency_ms: &[u16]) -> bool {
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

/// Tries to build a match of ruleset `r` around the seed at live position `sp`, under the
/// seed's (spread, latency) bounds. On success `sc.sel` holds the live positions (seed first)
/// and `sc.sel_team` their teams, and the acceptable-host mask (exact only with
/// `require_host`) and the latency bound are returned.
fn try_form(
    ctx: &Ctx<'_>,
    links: &mut Links,
    sc: &mut Scratch,
    sp: u32,
    (spread, lat_bound): (f64, u32),
    r: usize,
    rs: &Ruleset<'_>,
) -> Option<(u64, LatBound)> {
    let s = ctx.s;
    let w = lat_words(ctx.h);
    let (hot, rows) = (&s.hot[..], &s.rows[..]);
    let seed = hot[sp as usize + 1];
    let team_size = rs.team_size;
    let size_s = seed.party();
    if size_s > team_size {
        return None;
    }
    let require_host = rs.require_host;
    if require_host && ctx.h == 0 {
        return None;
    }
    // The bounds follow the seed's wait. The seed is the oldest ticket processed so far that is
    // still unused; bounds only grow with wait, so they are never wider than those of the
    // candidate's oldest.
    //
    // `span / norm > spread` becomes one comparison (a division per candidate costs more than
    // the rest of its checks). Few distinct bounds occur per tick, so they are cached.
    let max_span = match sc.spread_limits.iter().find(|&&(bits, _)| bits == spread.to_bits()) {
        Some(&(_, t)) => t,
        None => {
            let t = spread_threshold(spread, ctx.norm);
            sc.spread_limits.push((spread.to_bits(), t));
            t
        }
    };
    let lat = LatBound::new(lat_bound, ctx.h);
    let row_of = |p: u32| &rows[p as usize * (w + 1) + 1..(p as usize + 1) * (w + 1)];
    let mut hosts = if require_host { lat.host_mask(row_of(sp)) } else { 0 };
    if require_host && hosts == 0 {
        return None;
    }

    let Scratch { sel, sel_team, sel_party, sel_eff, room, overlap, agg, overlap_values, .. } = sc;
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
    let f = ctx.f;
    let (class_bits, compat) = (&fb.class_bits[..], &fb.compat[..]);
    let mut allowed = [u64::MAX; FilterBits::MAX_FILTERS];
    let allowed = &mut allowed[..if fb.enabled { f } else { 0 }];
    let bits_of = |meta: u32| {
        let c = (meta >> 8) as usize;
        &class_bits[c * f..(c + 1) * f]
    };
    agg.clear();
    overlap_values.clear();
    if fb.enabled {
        for (k, (a, &b)) in allowed.iter_mut().zip(bits_of(seed.meta)).enumerate() {
            *a = compat[64 * k + b.trailing_zeros() as usize];
        }
    } else {
        let seed_attrs = ctx.attrs(sp, seed.meta);
        for (k, (&ov, va)) in overlap.iter().zip(seed_attrs.chunks_exact(2)).enumerate() {
            if ov {
                agg.push(Agg { and_accepts: u64::MAX, or_values: 0, nonzero: u64::MAX });
                if va[0] != u64::MAX {
                    overlap_values.push((k, va[0]));
                }
            } else {
                agg.push(Agg { and_accepts: va[1], or_values: va[0], nonzero: 0 });
            }
        }
    }
    let attrs_ok = |agg: &[Agg], overlap_values: &[(usize, u64)], rc: &[u64]| {
        let mut ok = true;
        for (g, va) in agg.iter().zip(rc.chunks_exact(2)) {
            let (v, a) = (va[0], va[1]);
            ok &= (v & !g.and_accepts) | (g.or_values & !a) == 0;
            ok &= (v | !g.nonzero) != 0;
        }
        for &(k, x) in overlap_values {
            ok &= rc[2 * k] & x != 0;
        }
        ok
    };

    // Scan outwards from the seed in skill order, nearest first (ties to the right), over unused
    // tickets only, until the match is full, both sides leave the window, or `limit` tickets
    // were examined, so a crowded or incompatible neighbourhood cannot make one seed cost O(n).
    let limit = (rs.players_per_match() as usize * 16).clamp(64, 16_384);
    let next = &mut links.next[..];
    // Raw-unit window, widened by a hair so it never prunes a ticket the exact (divided) spread
    // check would accept. Distances are infinite outside it; the sentinel records at both ends
    // of `hot` give infinity or NaN, so the scan stops there without bounds checks.
    let win = spread * norm * (1.0 + 1e-12);
    let within = |d: f64| if d <= win { d } else { f64::INFINITY };
    // The next unused slot on each side (slot = live position + 1) and its distance.
    let mut left = find(next, sp, 0);
    let mut right = find(next, sp + 2, 1);
    let mut dl = within(e_s - hot[left as usize].eff);
    let mut dr = within(hot[right as usize].eff - e_s);
    for _ in 0..limit {
        let from_left = dl < dr;
        let p = if from_left {
            let p = left - 1;
            left = find(next, p, 0);
            dl = within(e_s - hot[left as usize].eff);
            p
        } else {
            if dr == f64::INFINITY {
                break;
            }
            let p = right - 1;
            right = find(next, right + 1, 1);
            dr = within(hot[right as usize].eff - e_s);
            p
        };
        let c = hot[p as usize + 1];

        // Cheapest and most selective checks first; all are pure, so the order does not change
        // which tickets are taken. Skill order: a left candidate is at or below every selected
        // ticket, a right one at or above, so only one end of the skill range moves.
        if c.mask & bit == 0 || c.party() > max_room {
            continue;
        }
        let span = if from_left { hi - c.eff } else { c.eff - lo };
        if span > max_span {
            continue;
        }
        let ok = if fb.enabled {
            allowed.iter().zip(bits_of(c.meta)).fold(true, |ok, (&a, &b)| ok & (a & b != 0))
        } else {
            attrs_ok(agg, overlap_values, ctx.attrs(p, c.meta))
        };
        if !ok {
            continue;
        }
        let m = if require_host {
            let m = lat.host_mask(row_of(p));
            if hosts & m == 0 {
                continue;
            }
            m
        } else {
            0
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
        room[best] -= size;
        remaining -= size;
        hosts &= m;
        if remaining == 0 {
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
                } else {
                    g.and_accepts &= va[1];
                    g.or_values |= va[0];
                }
            }
        }
    }
    if remaining != 0 {
        return None;
    }
    if teams > 1 && !balance(norm, sc, rs) {
        return None;
    }
    Some((hosts, lat))
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

/// Key with the order of `f64::total_cmp`.
#[inline]
fn total_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Rebalances `ws.sel_team` (a valid packing on entry) to shrink the spread of team skill sums,
/// keeping every team at exactly `team_size` players. Returns whether the imbalance bound holds.
fn balance(norm: f64, ws: &mut Scratch, rs: &Ruleset<'_>) -> bool {
    let teams = rs.teams as usize;
    let len = ws.sel.len();
    // Typical matches fit in stack arrays, which avoids resizing vectors per candidate match.
    const SMALL: usize = 16;
    if teams == 2 && len <= SMALL {
        balance2(norm, rs, &ws.sel, &ws.sel_party, &ws.sel_eff, &mut ws.sel_team)
    } else if len <= SMALL && teams <= SMALL {
        let mut order = [0u128; SMALL];
        let (mut weight, mut alt_team, mut members) = ([0.0; SMALL], [0u32; SMALL], [0u32; SMALL]);
        let (mut sums, mut alt_sums, mut room) = ([0.0; SMALL], [0.0; SMALL], [0u32; SMALL]);
        let bufs = BalanceBufs {
            weight: &mut weight[..len],
            order: &mut order[..len],
            alt_team: &mut alt_team[..len],
            members: &mut members[..len],
            sums: &mut sums[..teams],
            alt_sums: &mut alt_sums[..teams],
            room: &mut room[..teams],
        };
        balance_with(norm, rs, &ws.sel, &ws.sel_party, &ws.sel_eff, &mut ws.sel_team, bufs)
    } else {
        let b = &mut ws.big;
        b.weight.resize(len, 0.0);
        b.order.resize(len, 0);
        b.alt_team.resize(len, 0);
        b.members.resize(len, 0);
        b.sums.resize(teams, 0.0);
        b.alt_sums.resize(teams, 0.0);
        b.room.resize(teams, 0);
        let bufs = BalanceBufs {
            weight: &mut b.weight,
            order: &mut b.order,
            alt_team: &mut b.alt_team,
            members: &mut b.members,
            sums: &mut b.sums,
            alt_sums: &mut b.alt_sums,
            room: &mut b.room,
        };
        balance_with(norm, rs, &ws.sel, &ws.sel_party, &ws.sel_eff, &mut ws.sel_team, bufs)
    }
}

/// Greedy order key: biggest parties first (hardest to place), strongest first within a size,
/// ties by skill position; the low bits carry the index into `sel`.
#[inline]
fn greedy_key(party: u32, eff: f64, pos: u32, i: usize) -> u128 {
    (u128::from(255 - party) << 120) | (u128::from(!total_key(eff)) << 56) | (u128::from(pos) << 24) | i as u128
}

/// Sorts distinct keys (at most 16) by counting ranks: no data-dependent branches.
#[inline]
fn rank_sort(keys: &mut [u128]) {
    let mut copy = [0u128; 16];
    let copy = &mut copy[..keys.len()];
    copy.copy_from_slice(keys);
    for &k in copy.iter() {
        let rank: usize = copy.iter().map(|&o| usize::from(o < k)).sum();
        keys[rank] = k;
    }
}

/// `balance_with` for two teams and at most 16 tickets (the common case), with teams as
/// bitmasks. Same steps, same arithmetic in the same order, so the same result (the property
/// and golden tests run both).
fn balance2(norm: f64, rs: &Ruleset<'_>, sel: &[u32], party: &[u32], eff: &[f64], team: &mut [u32]) -> bool {
    let len = sel.len();
    let (mut weight, mut order) = ([0.0; 16], [0u128; 16]);
    let mut sums = [0.0; 2];
    for i in 0..len {
        weight[i] = eff[i] * f64::from(party[i]);
        order[i] = greedy_key(party[i], eff[i], sel[i], i);
        sums[team[i] as usize] += weight[i];
    }
    let weight = &weight[..len];
    let order = &mut order[..len];
    rank_sort(order);

    // Greedy: each party, in that order, to the weaker team with room (team 0 on ties).
    let (mut room, mut alt_sums, mut alt_ones) = ([rs.team_size; 2], [0.0; 2], 0u32);
    let mut packed = true;
    for &key in order.iter() {
        let i = (key & 0xFF_FFFF) as usize;
        let size = party[i];
        let best = match (room[0] >= size, room[1] >= size) {
            (true, fits1) => usize::from(fits1 && alt_sums[1] < alt_sums[0]),
            (false, true) => 1,
            (false, false) => {
                packed = false;
                break;
            }
        };
        room[best] -= size;
        alt_sums[best] += weight[i];
        alt_ones |= (best as u32) << i;
    }
    let mut ones = team.iter().enumerate().fold(0u32, |m, (i, &t)| m | t << i);
    if packed && range(&alt_sums) < range(&sums) {
        ones = alt_ones;
        sums = alt_sums;
    }

    // Improving swaps of equal-size parties, as in `balance_with`; pairs in (a, b) order.
    let all = if len == 32 { u32::MAX } else { (1u32 << len) - 1 };
    for _ in 0..(4 * len) {
        let tmax = usize::from(sums[1] > sums[0]);
        let tmin = usize::from(sums[1] < sums[0]);
        let diff = sums[tmax] - sums[tmin];
        if tmax == tmin || diff <= 0.0 {
            break;
        }
        let (strong, weak) = if tmax == 1 { (ones, all & !ones) } else { (all & !ones, ones) };
        let (mut found, mut best_a, mut best_b, mut best_diff) = (false, 0, 0, 0.0);
        let mut a_bits = strong;
        while a_bits != 0 {
            let a = a_bits.trailing_zeros() as usize;
            a_bits &= a_bits - 1;
            let mut b_bits = weak;
            while b_bits != 0 {
                let b = b_bits.trailing_zeros() as usize;
                b_bits &= b_bits - 1;
                let d = weight[a] - weight[b];
                let new_diff = (diff - 2.0 * d).abs();
                let better = (party[a] == party[b])
                    & (d > 0.0)
                    & (new_diff < diff * MIN_SWAP_GAIN)
                    & (!found | (new_diff < best_diff));
                found |= better;
                best_a = if better { a } else { best_a };
                best_b = if better { b } else { best_b };
                best_diff = if better { new_diff } else { best_diff };
            }
        }
        if !found {
            break;
        }
        let d = weight[best_a] - weight[best_b];
        sums[tmax] -= d;
        sums[tmin] += d;
        ones ^= (1 << best_a) | (1 << best_b);
    }
    for (i, t) in team.iter_mut().enumerate() {
        *t = ones >> i & 1;
    }
    imbalance(&sums, rs.team_size, norm) <= rs.max_team_imbalance
}

/// Work space of `balance_with`: `len` entries per selected ticket, `teams` per team. Contents
/// on entry do not matter.
struct BalanceBufs<'a> {
    weight: &'a mut [f64],
    order: &'a mut [u128],
    alt_team: &'a mut [u32],
    members: &'a mut [u32],
    sums: &'a mut [f64],
    alt_sums: &'a mut [f64],
    room: &'a mut [u32],
}

/// Storage for matches too large for `balance`'s stack arrays.
#[derive(Debug, Default)]
pub(crate) struct BigBalance {
    weight: Vec<f64>,
    order: Vec<u128>,
    alt_team: Vec<u32>,
    members: Vec<u32>,
    sums: Vec<f64>,
    alt_sums: Vec<f64>,
    room: Vec<u32>,
}

fn balance_with(
    norm: f64,
    rs: &Ruleset<'_>,
    sel: &[u32],
    party: &[u32],
    eff: &[f64],
    team: &mut [u32],
    b: BalanceBufs<'_>,
) -> bool {
    let BalanceBufs { weight, order, alt_team, members, sums, alt_sums, room } = b;
    let teams = sums.len();
    let (sums, alt_sums, room) = (&mut sums[..teams], &mut alt_sums[..teams], &mut room[..teams]);
    let len = sel.len();
    for (((w, &e), &p), ((o, &pos), i)) in weight.iter_mut().zip(eff).zip(party).zip(order.iter_mut().zip(sel).zip(0..))
    {
        *w = e * f64::from(p);
        *o = greedy_key(p, e, pos, i);
    }
    let weight = &*weight;

    sums.fill(0.0);
    for (&t, &w) in team.iter().zip(weight) {
        sums[t as usize] += w;
    }

    // Greedy: each party, in that order, to the weakest team with room. May fail to pack; then
    // the scan's packing is kept. Small matches sort by counting ranks (keys are distinct),
    // which has no data-dependent branches.
    if len <= 16 {
        rank_sort(order);
    } else {
        order.sort_unstable();
    }
    alt_sums.fill(0.0);
    room.fill(rs.team_size);
    let mut packed = true;
    for &key in order.iter() {
        let i = (key & 0xFF_FFFF) as usize;
        let size = party[i];
        let mut best = usize::MAX;
        for tm in 0..teams {
            if room[tm] >= size && (best == usize::MAX || alt_sums[tm] < alt_sums[best]) {
                best = tm;
            }
        }
        if best == usize::MAX {
            packed = false;
            break;
        }
        room[best] -= size;
        alt_team[i] = best as u32;
        alt_sums[best] += weight[i];
    }
    if packed && range(alt_sums) < range(sums) {
        team.copy_from_slice(alt_team);
        sums.copy_from_slice(alt_sums);
    }

    // Improving swaps of equal-size parties between the strongest and the weakest team. Each
    // accepted swap strictly lowers the sum of squared team sums, so this terminates; the cap
    // bounds the cost for very large matches.
    for _ in 0..(4 * len) {
        let (mut tmax, mut tmin) = (0usize, 0usize);
        for tm in 1..teams {
            if sums[tm] > sums[tmax] {
                tmax = tm;
            }
            if sums[tm] < sums[tmin] {
                tmin = tm;
            }
        }
        let diff = sums[tmax] - sums[tmin];
        if tmax == tmin || diff <= 0.0 {
            break;
        }
        // Members of the weakest team, in `sel` order, so pairs are tried in (a, b) order; the
        // first strictly best pair wins. Selects rather than branches: outcomes are random.
        let mut count = 0;
        for (b, &t) in team.iter().enumerate() {
            members[count] = b as u32;
            count += usize::from(t as usize == tmin);
        }
        let (mut found, mut best_a, mut best_b, mut best_diff) = (false, 0, 0, 0.0);
        for a in 0..len {
            if team[a] as usize != tmax {
                continue;
            }
            for &b in &members[..count] {
                let b = b as usize;
                let d = weight[a] - weight[b];
                let new_diff = (diff - 2.0 * d).abs();
                let better = (party[a] == party[b])
                    & (d > 0.0)
                    & (new_diff < diff * MIN_SWAP_GAIN)
                    & (!found | (new_diff < best_diff));
                found |= better;
                best_a = if better { a } else { best_a };
                best_b = if better { b } else { best_b };
                best_diff = if better { new_diff } else { best_diff };
            }
        }
        if !found {
            break;
        }
        let (a, b) = (best_a, best_b);
        let d = weight[a] - weight[b];
        sums[tmax] -= d;
        sums[tmin] += d;
        team[a] = tmin as u32;
        team[b] = tmax as u32;
    }

    imbalance(sums, rs.team_size, norm) <= rs.max_team_imbalance
}

/// (max team mean - min team mean) / norm, team mean = party-size-weighted mean effective skill.
pub(crate) fn imbalance(sums: &[f64], team_size: u32, norm: f64) -> f64 {
    range(sums) / f64::from(team_size) / norm
}

#[allow(clippy::too_many_arguments)]
fn emit(
    ctx: &Ctx<'_>,
    ws: &Scratch,
    out: &mut MatchBuffers<'_>,
    m: usize,
    written: usize,
    r: usize,
    rs: &Ruleset<'_>,
    acceptable: u64,
    lat: &LatBound,
) {
    let s = ctx.s;
    let len = ws.sel.len();
    out.match_ruleset[m] = r as u32;
    let dst = out.match_tickets[written..written + len].iter_mut().zip(&mut out.ticket_team[written..written + len]);
    for ((ticket, team), (&p, &t)) in dst.zip(ws.sel.iter().zip(&ws.sel_team)) {
        *ticket = ctx.ticket(p as usize);
        *team = t;
    }
    out.match_offsets[m + 1] = (written + len) as u32;

    // Without `require_host` the scan did not filter on latency, so compute the mask here.
    let mut acc = acceptable;
    if !rs.require_host {
        acc = if ctx.h == 0 { 0 } else { u64::MAX >> (64 - ctx.h) };
        for &t in &ws.sel {
            acc &= lat.host_mask(ctx.lat(t as usize));
        }
    }
    let mut preferred = NO_HOST;
    if acc != 0 {
        // Cost of host h = max latency over the match: lane-wise max of the latency rows
        // (H <= 64, so at most 16 words).
        let w = lat_words(ctx.h);
        let mut cost = [0u64; 16];
        let cost = &mut cost[..w];
        for &p in &ws.sel {
            for (c, &x) in cost.iter_mut().zip(ctx.lat(p as usize)) {
                *c = lanes_max(*c, x);
            }
        }
        let mut best_cost = u32::MAX;
        let mut bits = acc;
        while bits != 0 {
            let hst = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let c = u32::from((cost[hst / 4] >> (16 * (hst % 4))) as u16);
            if c < best_cost {
                best_cost = c;
                preferred = hst as u32;
            }
        }
    }
    out.match_preferred_host[m] = preferred;
    out.match_acceptable_hosts[m] = acc;

    let f = ctx.f;
    let inter = &mut out.match_accepts[m * f..(m + 1) * f];
    let attrs_of = |t: u32| ctx.attrs(t, s.hot[t as usize + 1].meta).chunks_exact(2);
    for (dst, va) in inter.iter_mut().zip(attrs_of(ws.sel[0])) {
        *dst = va[1];
    }
    for &t in &ws.sel[1..] {
        for (dst, va) in inter.iter_mut().zip(attrs_of(t)) {
            *dst &= va[1];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_lt_matches_scalar() {
        let mut z = 1u64;
        let mut next = || {
            z = mix(z);
            z
        };
        let edge = [0u16, 1, 2, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF];
        for round in 0..20_000 {
            let pick = |r: u64| if r & 1 == 0 { edge[(r >> 1) as usize % edge.len()] } else { (r >> 8) as u16 };
            let x: [u16; 4] = [pick(next()), pick(next()), pick(next()), pick(next())];
            let t = if round % 3 == 0 { edge[round % edge.len()] } else { next() as u16 };
            let xw = x.iter().enumerate().fold(0u64, |w, (k, &l)| w | u64::from(l) << (16 * k));
            let got = lanes_lt(xw, u64::from(t) * 0x0001_0001_0001_0001);
            let want = x.iter().enumerate().fold(0u64, |m, (k, &l)| m | u64::from(l < t) << k);
            assert_eq!(got, want, "x={x:?} t={t}");
        }
    }

    #[test]
    fn lanes_max_matches_scalar() {
        let mut z = 7u64;
        for _ in 0..20_000 {
            z = mix(z);
            let (x, y) = (z, mix(z ^ 1));
            let want = (0..4).fold(0u64, |m, k| {
                let (a, b) = ((x >> (16 * k)) as u16, (y >> (16 * k)) as u16);
                m | u64::from(a.max(b)) << (16 * k)
            });
            assert_eq!(lanes_max(x, y), want);
        }
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

    #[test]
    fn sort_by_prefix_orders_by_key_then_index() {
        let mut z = 3u64;
        // 300k keys: above the size where digits narrow.
        for (n, bits) in [(1000usize, 64u32), (1000, 20), (5000, 40), (300, 0), (300_000, 64)] {
            let keys: Vec<u64> = (0..n)
                .map(|_| {
                    z = mix(z);
                    if bits == 0 {
                        5
                    } else {
                        (z >> (64 - bits)) | 0xF000_0000_0000_0000
                    }
                })
                .collect();
            let (mut v, mut tmp, mut hist) = (keys.clone(), Vec::new(), Vec::new());
            let index: Vec<u32> = (0..n as u32).collect();
            sort_by_prefix(&mut v, |j| index[j], &mut tmp, &mut hist);
            fix_prefix_runs(&mut v, |i| (keys[i], i));
            let mut want: Vec<usize> = (0..n).collect();
            want.sort_by_key(|&i| (keys[i], i));
            let got: Vec<usize> = v.iter().map(|&e| e as u32 as usize).collect();
            assert_eq!(got, want);
        }
    }
}
