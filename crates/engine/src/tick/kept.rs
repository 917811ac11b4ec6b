//! The layout kept from one tick to the next (docs/engine.md, "Incremental ticks"): a tick told what
//! changed in the pool since the last one (`PoolChanges`) updates the last tick's skill order, live
//! arrays, attribute classes and seed order by those changes, in one merge, instead of laying the whole
//! pool out again. The result is the layout `prepare` would build from the same pool, so the search
//! finds the same matches; only attribute class numbers may differ, and nothing depends on them.

use super::lanes::{lat_words, row_words};
use super::layout::{bytes, max_classes, pack_latencies, HostReach, Hot, Sorted, Spare};
use super::sort::{mix, order_key};
use crate::{PoolChanges, PoolColumns, Rejection, RuleDiagnostics, TickParams};

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
        let valid = HostReach::new(params).valid_rulesets;
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
    /// tickets set aside in `diagnostics`. Answers false, having changed nothing the search reads, when
    /// there is no layout to update (the first tick, other parameters, another pool): the caller then
    /// lays the pool out.
    pub(super) fn update(
        s: &mut Sorted,
        pool: &PoolColumns<'_>,
        params: &TickParams<'_>,
        changes: &PoolChanges<'_>,
        diagnostics: &mut [RuleDiagnostics],
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
            let eff = pool.mmr_mean[i] + params.party_synergy_bonus * f64::from(party - 1);
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
        if !merge(s, pool) {
            s.kept.kept = false;
            return false;
        }
        seed_order(s, params.seed);
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
/// the live ones; notes each old skill position's new one in `kept.remap` (`u32::MAX`: gone). Answers
/// false when a row that left was not where the layout says (the changes did not describe the pool).
fn merge(s: &mut Sorted, pool: &PoolColumns<'_>) -> bool {
    let (f, h) = (pool.filter_count, pool.host_count);
    let rw = row_words(h);
    let f2 = if s.interned { 0 } else { 2 * f };
    let old = s.hot.len() - 2;
    let Sorted { hot, rows, attrs, arrival, kept, spare, .. } = s;
    let (gone, added, remap, added_ages) = (&kept.gone, &kept.added, &mut kept.remap, &mut kept.added_ages);
    added_ages.clear();
    spare.hot.clear();
    spare.hot.push(Hot::sentinel(f64::NEG_INFINITY));
    spare.rows.clear();
    spare.attrs.clear();
    spare.arrival.clear();
    remap.clear();
    let mut next_gone = gone.iter().peekable();
    let mut next_added = added.iter().peekable();
    let mut add = |a: &Added, spare: &mut Spare| {
        let (i, p) = (a.row as usize, spare.arrival.len());
        spare.hot.push(a.hot);
        spare.arrival.push(a.arrival);
        spare.rows.push(u64::from(a.row) | (p as u64) << 32);
        added_ages.push((order_key(a.arrival), u64::from(a.row) << 32 | p as u64));
        let at = spare.rows.len();
        spare.rows.resize(at + lat_words(h), 0);
        pack_latencies(&mut spare.rows[at..], &pool.latency_ms[i * h..(i + 1) * h]);
        if f2 > 0 {
            for (&v, &acc) in pool.attr_values[i * f..(i + 1) * f].iter().zip(&pool.attr_accepts[i * f..(i + 1) * f]) {
                spare.attrs.push(v);
                spare.attrs.push(acc);
            }
        }
    };
    for p in 0..old {
        let x = hot[p + 1];
        let row = rows[p * rw] as u32;
        let key = (order_key(x.eff), row);
        while let Some(a) = next_added.next_if(|a| (a.key, a.row) < key) {
            add(a, spare);
        }
        if next_gone.next_if_eq(&&key).is_some() {
            remap.push(u32::MAX);
            continue;
        }
        let q = spare.arrival.len();
        remap.push(q as u32);
        spare.hot.push(x);
        spare.arrival.push(arrival[p]);
        spare.rows.push(u64::from(row) | (q as u64) << 32);
        spare.rows.extend_from_slice(&rows[p * rw + 1..(p + 1) * rw]);
        spare.attrs.extend_from_slice(&attrs[p * f2..(p + 1) * f2]);
    }
    for a in next_added {
        add(a, spare);
    }
    spare.hot.push(Hot::sentinel(f64::INFINITY));
    if next_gone.next().is_some() {
        return false;
    }
    std::mem::swap(hot, &mut spare.hot);
    std::mem::swap(rows, &mut spare.rows);
    std::mem::swap(attrs, &mut spare.attrs);
    std::mem::swap(arrival, &mut spare.arrival);
    true
}

/// The kept seed order, less the tickets gone, with those added (`kept.added_ages`), at their new skill
/// positions (`kept.remap`); then each run of equal arrivals in this tick's order (the seeded hash of the
/// pool index, then the skill position, as `prepare` orders them), and `Sorted::by_age` from it.
fn seed_order(s: &mut Sorted, seed: u64) {
    let k = &mut s.kept;
    k.added_ages.sort_unstable();
    k.next_ages.clear();
    let mut added = k.added_ages.iter().copied().peekable();
    for &(arrival, e) in &k.ages {
        let p = k.remap[e as u32 as usize];
        if p == u32::MAX {
            continue;
        }
        while let Some(a) = added.next_if(|a| a.0 < arrival) {
            k.next_ages.push(a);
        }
        k.next_ages.push((arrival, (e & !0xFFFF_FFFF) | u64::from(p)));
    }
    k.next_ages.extend(added);
    std::mem::swap(&mut k.ages, &mut k.next_ages);
    let (ages, keyed) = (&mut k.ages, &mut k.keyed);
    let mut start = 0;
    for i in 1..=ages.len() {
        if i == ages.len() || ages[i].0 != ages[start].0 {
            if i - start > 1 {
                // Each entry's hash once, not once per comparison.
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
    s.by_age.clear();
    s.by_age.extend(ages.iter().map(|&(_, e)| e & 0xFFFF_FFFF));
}
