//! The layout kept from one tick to the next (docs/engine.md, "Incremental ticks"): a tick told what
//! changed in the pool since the last one (`PoolChanges`) updates the last tick's skill order, live
//! arrays, attribute classes and seed order by those changes, in one merge, instead of laying the whole
//! pool out again. The result is the layout `prepare` would build from the same pool, so the search
//! finds the same matches; only attribute class numbers may differ, and nothing depends on them.

use super::lanes::row_words;
use super::layout::{bytes, max_classes, pack_latencies, valid_rulesets, HostReach, Hot, Sorted};
use super::sort::{mix, order_key};
use super::speculate::Threads;
use crate::{PoolChanges, PoolColumns, Rejection, RuleDiagnostics, TickParams};
use rayon::prelude::*;

/// What the last tick laid out, for the next to update.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// Whether `Sorted`'s layout is that of the pool as the last tick read it, for `shape`.
    kept: bool,
    /// Whether the last tick updated a kept layout (else it laid the pool out whole).
    pub(crate) updated: bool,
    shape: Shape,
    /// The pool's length at the last tick.
    len: usize,
    /// Per pool row, as the last tick read it: its skill key, or that it was set aside.
    laid: Vec<Laid>,
    /// The seed order: (arrival key, pool index << 32 | skill position), ascending; ties in arrival are
    /// put in the tick's order (its seeded hash, then skill position) by each tick.
    ages: Vec<(u64, u64)>,
    /// Per ruleset, the tickets set aside for want of a host (`prepare`'s `set_aside`).
    aside: Vec<u64>,
    // Scratch of `update`, kept for its capacity.
    changed: Vec<u32>,
    gone: Vec<(u64, u32)>,
    added: Vec<Added>,
    remap: Vec<u32>,
    /// The added tickets' entries of the seed order, as the merge places them.
    added_ages: Vec<(u64, u64)>,
    next_ages: Vec<(u64, u64)>,
    /// A run of equal arrivals keyed for its sort: (hash << 32 | skill position, entry).
    keyed: Vec<(u64, u64)>,
}

/// What a layout depends on besides the pool: a change of any of it lays the pool out again.
#[derive(Clone, Debug, Default, PartialEq)]
struct Shape {
    bonus_bits: u64,
    reach: HostReach,
    f: usize,
    h: usize,
}

impl Shape {
    fn of(pool: &PoolColumns<'_>, params: &TickParams<'_>) -> Self {
        Shape {
            bonus_bits: params.party_synergy_bonus.to_bits(),
            reach: HostReach::new(params),
            f: pool.filter_count,
            h: pool.host_count,
        }
    }
}

/// A pool row as the last tick read it.
#[derive(Clone, Copy, Debug, Default)]
struct Laid {
    /// `order_key` of its effective skill, when laid out.
    key: u64,
    /// The rulesets whose diagnostics count it as set aside (`mask & valid`), when set aside.
    aside: u32,
    laid_out: bool,
}

/// A row to lay out: its skill key and pool index (the skill order), its `Hot` record and arrival.
#[derive(Clone, Copy, Debug)]
struct Added {
    key: u64,
    row: u32,
    hot: Hot,
    arrival: f64,
}

impl Kept {
    pub(super) fn is_kept(&self) -> bool {
        self.kept
    }

    /// Bytes held by the arrays that grow with the pool.
    pub(super) fn bytes(&self) -> usize {
        bytes(&self.laid)
            + bytes(&self.ages)
            + bytes(&self.next_ages)
            + bytes(&self.added_ages)
            + bytes(&self.remap)
            + bytes(&self.changed)
            + bytes(&self.gone)
            + bytes(&self.added)
            + bytes(&self.keyed)
    }

    /// The next tick lays the pool out again.
    pub(super) fn forget(&mut self) {
        self.kept = false;
        self.updated = false;
    }

    /// Keeps what `prepare` just laid out of `pool` in `s`, for the next tick to update.
    pub(super) fn record(s: &mut Sorted, pool: &PoolColumns<'_>, params: &TickParams<'_>) {
        let mut kept = std::mem::take(&mut s.kept);
        kept.record_layout(pool, params, s);
        s.kept = kept;
    }

    fn record_layout(&mut self, pool: &PoolColumns<'_>, params: &TickParams<'_>, s: &Sorted) {
        let n = pool.len();
        let valid = valid_rulesets(params);
        self.laid.clear();
        self.laid.resize(n, Laid::default());
        self.aside.clear();
        self.aside.resize(params.rulesets.len(), 0);
        let mut candidates = s.candidates.iter().peekable();
        for (i, (laid, pre)) in self.laid.iter_mut().zip(&s.pre).enumerate() {
            if candidates.next_if(|&&c| c as usize == i).is_some() {
                *laid = Laid { key: order_key(pre.hot.eff), aside: 0, laid_out: true };
            } else {
                let aside = pool.ruleset_mask[i] & valid;
                count_aside(&mut self.aside, aside, 1);
                *laid = Laid { key: 0, aside, laid_out: false };
            }
        }
        let rw = row_words(pool.host_count);
        self.ages.clear();
        self.ages.extend(s.by_age.iter().map(|&e| {
            let p = e as u32 as usize;
            (order_key(s.arrival[p]), (s.rows[p * rw] as u32 as u64) << 32 | p as u64)
        }));
        self.shape = Shape::of(pool, params);
        self.len = n;
        self.kept = true;
        self.updated = false;
    }

    /// Updates the kept layout in `s` to `pool`, changed since the last tick by `changes`, and counts the
    /// tickets set aside in `diagnostics`. Answers false when there is no layout to update (the first tick,
    /// other parameters, another pool, too many changes or classes): the caller then lays the pool out
    /// whole, which rebuilds whatever this had changed (the per-row record, the classes).
    pub(super) fn update(
        s: &mut Sorted,
        pool: &PoolColumns<'_>,
        params: &TickParams<'_>,
        changes: &PoolChanges<'_>,
        diagnostics: &mut [RuleDiagnostics],
        threads: Option<&Threads>,
    ) -> bool {
        let k = &mut s.kept;
        let n = pool.len();
        if !k.kept || k.len != changes.previous_len || k.shape != Shape::of(pool, params) {
            return false;
        }
        // Past a quarter of the pool, laying it out again costs about what a merge does.
        let (low, high) = (n.min(k.len), n.max(k.len));
        if changes.rows.len() + (high - low) > n / 4 + 64 {
            k.kept = false;
            return false;
        }
        k.changed.clear();
        k.changed.extend(changes.rows.iter().copied().filter(|&r| (r as usize) < low));
        k.changed.extend(low as u32..high as u32);
        k.changed.sort_unstable();
        k.changed.dedup();

        // What leaves the layout: the changed rows' old contents.
        k.gone.clear();
        for &r in &k.changed {
            let r = r as usize;
            if r >= k.len {
                break;
            }
            let laid = k.laid[r];
            if laid.laid_out {
                k.gone.push((laid.key, r as u32));
            } else {
                count_aside(&mut k.aside, laid.aside, -1);
            }
        }
        // What enters it: the changed rows' new contents.
        k.laid.resize(n, Laid::default());
        k.added.clear();
        let f = pool.filter_count;
        let reach = &k.shape.reach;
        let limit = max_classes(f, n);
        for &r in &k.changed {
            let i = r as usize;
            if i >= n {
                break;
            }
            let (party, mask) = (pool.party_size[i], pool.ruleset_mask[i]);
            if !reach.could_match(mask, &pool.latency_ms[i * k.shape.h..(i + 1) * k.shape.h]) {
                let aside = mask & reach.valid_rulesets;
                count_aside(&mut k.aside, aside, 1);
                k.laid[i] = Laid { key: 0, aside, laid_out: false };
                continue;
            }
            let eff = params.effective_skill(pool.mmr_mean[i], party);
            let mut class = 0;
            if s.interned {
                let (vals, accs) = (&pool.attr_values[i * f..(i + 1) * f], &pool.attr_accepts[i * f..(i + 1) * f]);
                match s.classes.intern(vals, accs, limit) {
                    Some(c) => class = c,
                    None => {
                        // Too many classes (those of tickets gone are kept too): lay out again.
                        k.kept = false;
                        return false;
                    }
                }
            }
            let hot = Hot { eff, mask, meta: u32::from(party) | class << 8 };
            k.laid[i] = Laid { key: order_key(eff), aside: 0, laid_out: true };
            k.added.push(Added { key: order_key(eff), row: r, hot, arrival: pool.arrival_ms[i] });
        }
        k.gone.sort_unstable();
        k.added.sort_unstable_by_key(|a| (a.key, a.row));
        if !merge(s, pool, threads) {
            s.kept.kept = false;
            return false;
        }
        seed_order(s, params.seed, threads);
        let k = &mut s.kept;
        k.len = n;
        k.updated = true;
        for (d, &count) in diagnostics.iter_mut().zip(&k.aside) {
            d.fail_many(Rejection::NoAcceptableHost, count);
        }
        let laid = s.hot.len() - 2;
        s.start_search(laid);
        s.bits.build(s.interned.then_some(&s.classes), params.filters);
        true
    }
}

/// Adds `by` to the count of each ruleset in `aside`.
fn count_aside(counts: &mut [u64], mut aside: u32, by: i64) {
    while aside != 0 {
        let r = aside.trailing_zeros() as usize;
        aside &= aside - 1;
        counts[r] = counts[r].wrapping_add_signed(by);
    }
}

/// Merges the kept skill order, less `kept.gone`, with `kept.added` into the spare arrays, and makes them
/// the live ones; notes each old skill position's new one in `kept.remap` (`u32::MAX`: gone), and the added
/// tickets' seed order entries in `kept.added_ages`. With `threads` (and a pool worth them) the old positions
/// are cut into pieces merged at once, each writing its own part of the outputs. Answers false when a row
/// that left was not where the layout says (the changes did not describe the pool).
fn merge(s: &mut Sorted, pool: &PoolColumns<'_>, threads: Option<&Threads>) -> bool {
    let rw = row_words(pool.host_count);
    let f2 = if s.interned { 0 } else { 2 * pool.filter_count };
    let old = s.hot.len() - 2;
    let Sorted { hot, rows, attrs, arrival, kept, spare, .. } = s;
    let (gone, added) = (&kept.gone, &kept.added);
    let n = (old + added.len()).saturating_sub(gone.len());
    spare.hot.resize(n + 2, Hot::default());
    spare.hot[0] = Hot::sentinel(f64::NEG_INFINITY);
    spare.hot[n + 1] = Hot::sentinel(f64::INFINITY);
    spare.rows.resize(n * rw, 0);
    spare.attrs.resize(n * f2, 0);
    spare.arrival.resize(n, 0.0);
    kept.remap.resize(old, 0);
    kept.added_ages.resize(added.len(), (0, 0));
    let was = KeptArrays { hot: &hot[1..=old], rows, attrs, arrival };
    // Piece j merges the old positions from bounds[j] on, and the gone and added entries from the key
    // there on (those before the first key go with the first piece).
    let pieces = threads.filter(|t| t.worth_it(old)).map_or(1, Threads::pieces).min(old.max(1));
    let bounds: Vec<usize> = (0..=pieces).map(|j| old * j / pieces).collect();
    let starts: Vec<(usize, usize, usize)> = (0..=pieces)
        .map(|j| match j {
            0 => (0, 0, 0),
            j if j == pieces => (old, gone.len(), added.len()),
            j => {
                let key = (order_key(was.hot[bounds[j]].eff), was.rows[bounds[j] * rw] as u32);
                (bounds[j], gone.partition_point(|&g| g < key), added.partition_point(|a| (a.key, a.row) < key))
            }
        })
        .collect();
    // Each piece's part of the outputs.
    let mut parts = Vec::with_capacity(pieces);
    let mut rest = Merged {
        hot: &mut spare.hot[1..=n],
        rows: &mut spare.rows,
        attrs: &mut spare.attrs,
        arrival: &mut spare.arrival,
        remap: &mut kept.remap,
        added_ages: &mut kept.added_ages,
        from: 0,
    };
    for j in 0..pieces {
        let ((p0, g0, a0), (p1, g1, a1)) = (starts[j], starts[j + 1]);
        let Some(len) = (p1 - p0 + a1 - a0).checked_sub(g1 - g0) else { return false };
        if rest.hot.len() < len {
            return false;
        }
        let (part, more) = rest.split(len, (p1 - p0, a1 - a0), rw, f2);
        parts.push((part, [(p0, p1), (g0, g1), (a0, a1)]));
        rest = more;
    }
    if !rest.hot.is_empty() {
        return false;
    }
    let piece = |(out, [olds, gones, adds]): Piece<'_>| {
        merge_piece(&was, olds, &gone[gones.0..gones.1], &added[adds.0..adds.1], out, pool)
    };
    let all_found = match threads.filter(|_| pieces > 1) {
        Some(t) => t.run(|| parts.into_par_iter().all(piece)),
        None => parts.into_iter().all(piece),
    };
    if !all_found {
        return false;
    }
    std::mem::swap(hot, &mut spare.hot);
    std::mem::swap(rows, &mut spare.rows);
    std::mem::swap(attrs, &mut spare.attrs);
    std::mem::swap(arrival, &mut spare.arrival);
    true
}

/// A piece of a merge: where it writes, and its ranges of old positions, of `gone` and of `added`.
type Piece<'a> = (Merged<'a>, [(usize, usize); 3]);

/// The kept layout a merge reads: live arrays without their sentinels.
struct KeptArrays<'a> {
    hot: &'a [Hot],
    rows: &'a [u64],
    attrs: &'a [u64],
    arrival: &'a [f64],
}

/// Where one piece of a merge writes: its new positions from `from` on, the remap of its old positions,
/// and the seed order entries of its added tickets.
struct Merged<'a> {
    hot: &'a mut [Hot],
    rows: &'a mut [u64],
    attrs: &'a mut [u64],
    arrival: &'a mut [f64],
    remap: &'a mut [u32],
    added_ages: &'a mut [(u64, u64)],
    from: usize,
}

impl Merged<'_> {
    /// The first `len` new positions (of `olds` old positions and `adds` added tickets), and the rest.
    fn split(self, len: usize, (olds, adds): (usize, usize), rw: usize, f2: usize) -> (Self, Self) {
        let (hot, hot_rest) = self.hot.split_at_mut(len);
        let (rows, rows_rest) = self.rows.split_at_mut(len * rw);
        let (attrs, attrs_rest) = self.attrs.split_at_mut(len * f2);
        let (arrival, arrival_rest) = self.arrival.split_at_mut(len);
        let (remap, remap_rest) = self.remap.split_at_mut(olds);
        let (added_ages, ages_rest) = self.added_ages.split_at_mut(adds);
        let first = Merged { hot, rows, attrs, arrival, remap, added_ages, from: self.from };
        let rest = Merged {
            hot: hot_rest,
            rows: rows_rest,
            attrs: attrs_rest,
            arrival: arrival_rest,
            remap: remap_rest,
            added_ages: ages_rest,
            from: self.from + len,
        };
        (first, rest)
    }

    /// Writes the added ticket `a` at this part's position `q`, its seed order entry at `k`.
    fn put_added(&mut self, q: usize, k: usize, a: &Added, pool: &PoolColumns<'_>, (rw, f2): (usize, usize)) {
        let (f, h) = (pool.filter_count, pool.host_count);
        let (i, p) = (a.row as usize, self.from + q);
        self.hot[q] = a.hot;
        self.arrival[q] = a.arrival;
        let row = &mut self.rows[q * rw..(q + 1) * rw];
        row[0] = u64::from(a.row) | (p as u64) << 32;
        pack_latencies(&mut row[1..], &pool.latency_ms[i * h..(i + 1) * h]);
        if f2 > 0 {
            let columns = pool.attr_values[i * f..(i + 1) * f].iter().zip(&pool.attr_accepts[i * f..(i + 1) * f]);
            for (pair, (&v, &acc)) in self.attrs[q * f2..(q + 1) * f2].chunks_exact_mut(2).zip(columns) {
                (pair[0], pair[1]) = (v, acc);
            }
        }
        self.added_ages[k] = (order_key(a.arrival), u64::from(a.row) << 32 | p as u64);
    }

    /// Writes the kept ticket at old position `p` of `was` at this part's position `q`.
    fn put_kept(&mut self, q: usize, was: &KeptArrays<'_>, p: usize, (rw, f2): (usize, usize)) {
        self.hot[q] = was.hot[p];
        self.arrival[q] = was.arrival[p];
        self.rows[q * rw] = u64::from(was.rows[p * rw] as u32) | ((self.from + q) as u64) << 32;
        self.rows[q * rw + 1..(q + 1) * rw].copy_from_slice(&was.rows[p * rw + 1..(p + 1) * rw]);
        self.attrs[q * f2..(q + 1) * f2].copy_from_slice(&was.attrs[p * f2..(p + 1) * f2]);
    }
}

/// Merges the old positions `p0..p1` of `was`, less `gone`, with `added`, into `out`. Answers whether the
/// part came out exactly full, every entry of `gone` found.
fn merge_piece(
    was: &KeptArrays<'_>,
    (p0, p1): (usize, usize),
    gone: &[(u64, u32)],
    added: &[Added],
    mut out: Merged<'_>,
    pool: &PoolColumns<'_>,
) -> bool {
    let rw = row_words(pool.host_count);
    let widths = (rw, out.attrs.len() / out.hot.len().max(1));
    let mut next_gone = gone.iter().peekable();
    let mut next_added = added.iter().enumerate().peekable();
    let len = out.hot.len();
    let mut q = 0;
    for p in p0..p1 {
        let key = (order_key(was.hot[p].eff), was.rows[p * rw] as u32);
        while let Some((k, a)) = next_added.next_if(|(_, a)| (a.key, a.row) < key) {
            if q == len {
                return false;
            }
            out.put_added(q, k, a, pool, widths);
            q += 1;
        }
        if next_gone.next_if_eq(&&key).is_some() {
            out.remap[p - p0] = u32::MAX;
            continue;
        }
        if q == len {
            return false;
        }
        out.remap[p - p0] = (out.from + q) as u32;
        out.put_kept(q, was, p, widths);
        q += 1;
    }
    for (k, a) in next_added {
        if q == len {
            return false;
        }
        out.put_added(q, k, a, pool, widths);
        q += 1;
    }
    next_gone.next().is_none() && q == len
}

/// The kept seed order, less the tickets gone, with those added (`kept.added_ages`), at their new skill
/// positions (`kept.remap`); then each run of equal arrivals in this tick's order (the seeded hash of the
/// pool index, then the skill position, as `prepare` orders them), and `Sorted::by_age` from it. With
/// `threads`, the positions are looked up and the runs ordered in pieces at once.
fn seed_order(s: &mut Sorted, seed: u64, threads: Option<&Threads>) {
    let k = &mut s.kept;
    let threads = threads.filter(|t| t.worth_it(k.ages.len()));
    // The new positions (random reads of `remap`); a ticket gone is marked with u32::MAX.
    let remap = &k.remap;
    let translate = |entry: &mut (u64, u64)| {
        let p = remap[entry.1 as u32 as usize];
        entry.1 = (entry.1 & !0xFFFF_FFFF) | u64::from(p);
    };
    match threads {
        Some(t) => t.run(|| k.ages.par_iter_mut().for_each(translate)),
        None => k.ages.iter_mut().for_each(translate),
    }
    k.added_ages.sort_unstable();
    k.next_ages.clear();
    let mut added = k.added_ages.iter().copied().peekable();
    for &(arrival, e) in &k.ages {
        if e as u32 == u32::MAX {
            continue;
        }
        while let Some(a) = added.next_if(|a| a.0 < arrival) {
            k.next_ages.push(a);
        }
        k.next_ages.push((arrival, e));
    }
    k.next_ages.extend(added);
    std::mem::swap(&mut k.ages, &mut k.next_ages);
    match threads {
        Some(t) => {
            // Pieces that start at runs' starts, a few a thread.
            let (ages, pieces) = (&mut k.ages[..], t.pieces());
            let mut parts = Vec::with_capacity(pieces);
            let mut rest = ages;
            for j in (1..pieces).rev() {
                let mut cut = rest.len() / (j + 1);
                while cut > 0 && cut < rest.len() && rest[cut].0 == rest[cut - 1].0 {
                    cut += 1;
                }
                let (part, more) = rest.split_at_mut(cut);
                parts.push(part);
                rest = more;
            }
            parts.push(rest);
            t.run(|| parts.into_par_iter().for_each(|part| order_ties(part, seed, &mut Vec::new())));
        }
        None => order_ties(&mut k.ages, seed, &mut k.keyed),
    }
    s.by_age.clear();
    s.by_age.extend(k.ages.iter().map(|&(_, e)| e & 0xFFFF_FFFF));
}

/// Puts each run of equal arrivals of `ages` (whole runs) in the order of `seed`'s hash of the pool index,
/// then the skill position, keying each entry once (not once per comparison) in `keyed`.
fn order_ties(ages: &mut [(u64, u64)], seed: u64, keyed: &mut Vec<(u64, u64)>) {
    let mut start = 0;
    for i in 1..=ages.len() {
        if i == ages.len() || ages[i].0 != ages[start].0 {
            if i - start > 1 {
                keyed.clear();
                keyed.extend(
                    ages[start..i].iter().map(|&(_, e)| (mix(seed ^ mix(e >> 32)) >> 32 << 32 | (e & 0xFFFF_FFFF), e)),
                );
                keyed.sort_unstable();
                for (entry, &(_, e)) in ages[start..i].iter_mut().zip(keyed.iter()) {
                    entry.1 = e;
                }
            }
            start = i;
        }
    }
}
