//! The layout's first pass (`prepare` in tick/layout.rs), in pool order: each ticket's `Hot` record
//! (effective skill, rulesets, party, attribute class) and seed-order key, and whether it can be in some
//! match at all (`HostReach`): the candidates, whose skill keys the layout then sorts. On the engine's
//! threads the pool is cut into pieces, each interning its rows' classes in a table of its own; the
//! tables are then merged in piece order and each piece's classes renumbered, so every class gets the
//! number one thread gives it (the order rows first occur in the pool).

use rayon::prelude::*;

use super::classes::Interner;
use super::layout::{max_classes, HostReach, Hot, Pre};
use super::sort::order_key;
use super::speculate::Threads;
use crate::{PoolColumns, Rejection, RuleDiagnostics, TickParams};

/// What the pass found in one piece of the pool.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    /// Its candidates, at the start of its part of the skill keys and of the candidates' indices.
    candidates: usize,
    /// Per ruleset, its tickets set aside (no host within reach of any ruleset they compete in).
    set_aside: [u64; 32],
    /// Whether each of its rows got a class.
    interned: bool,
}

/// The pass's memory for pieces, kept between ticks: each piece's class table and renumbering, and
/// what it found.
#[derive(Debug, Default)]
pub(super) struct Pieces {
    classes: Vec<Interner>,
    renumber: Vec<Vec<u32>>,
    found: Vec<Tally>,
}

/// The first pass over the whole pool: writes `pre` for each ticket, the candidates' skill keys into
/// `keys` and their pool indices into `candidates` (in pool order), and counts the tickets set aside in
/// `diagnostics` (one record per ruleset). Answers whether every row is interned in `classes` (the
/// class bits of `Hot::meta` then name them); if not, the classes mean nothing.
#[allow(clippy::too_many_arguments)]
pub(super) fn first_pass(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    pre: &mut Vec<Pre>,
    (keys, candidates): (&mut Vec<u64>, &mut Vec<u32>),
    classes: &mut Interner,
    pieces: &mut Pieces,
    diagnostics: &mut [RuleDiagnostics],
    threads: Option<&Threads>,
) -> bool {
    let n = pool.len();
    let f = pool.filter_count;
    let reach = HostReach::new(params);
    let max = max_classes(f, n);
    // Every element below a piece's count is written; `resize` only fills growth.
    pre.resize(n, Pre::default());
    keys.resize(n, 0);
    candidates.resize(n, 0);
    classes.clear();
    let parts = threads.filter(|t| t.worth_it(n)).map_or(1, Threads::pieces).min(n.max(1));
    let len = n.div_ceil(parts).max(1);
    let Pieces { classes: tables, renumber, found } = pieces;
    found.clear();
    found.resize(n.div_ceil(len).max(1), Tally::default());
    let interned = match threads.filter(|_| found.len() > 1) {
        None => {
            found[0] = piece(pool, params, &reach, 0, (pre, keys, candidates), classes, max);
            found[0].interned
        }
        Some(threads) => {
            tables.resize_with(found.len(), Interner::default);
            renumber.resize_with(found.len(), Vec::new);
            let tables = &mut tables[..found.len()];
            threads.run(|| {
                let parts = pre.par_chunks_mut(len).zip(keys.par_chunks_mut(len)).zip(candidates.par_chunks_mut(len));
                let parts = parts.zip(tables.par_iter_mut()).zip(found.par_iter_mut()).enumerate();
                parts.for_each(|(k, ((((pre, keys), candidates), table), found))| {
                    table.clear();
                    *found = piece(pool, params, &reach, k * len, (pre, keys, candidates), table, max);
                });
            });
            // The pool's classes, as one thread numbers them: each piece's new rows in the order they
            // occur in it, piece after piece.
            let mut interned = found.iter().all(|x| x.interned);
            for (table, map) in tables.iter().zip(renumber.iter_mut()) {
                interned = interned && classes.merge(table, f, max, map);
            }
            if interned {
                let renumber = &renumber[..found.len()];
                threads.run(|| {
                    pre.par_chunks_mut(len).zip(renumber.par_iter()).for_each(|(pre, map)| {
                        if map.iter().enumerate().any(|(c, &to)| c as u32 != to) {
                            for p in pre {
                                let class = (p.hot.meta >> 8) as usize;
                                p.hot.meta = p.hot.meta & 0xFF | map[class] << 8;
                            }
                        }
                    });
                });
            }
            interned
        }
    };
    // Each piece's candidates after the pieces' before it.
    let mut count = 0;
    for (k, piece) in found.iter().enumerate() {
        let from = k * len;
        if from != count {
            keys.copy_within(from..from + piece.candidates, count);
            candidates.copy_within(from..from + piece.candidates, count);
        }
        count += piece.candidates;
        for (d, &set_aside) in diagnostics.iter_mut().zip(&piece.set_aside) {
            d.fail_many(Rejection::NoAcceptableHost, set_aside);
        }
    }
    keys.truncate(count);
    candidates.truncate(count);
    f > 0 && interned
}

/// The pass over the pool's tickets from `from` on, one per entry of `pre`; the candidates go to the
/// start of `keys` and `candidates`, the classes to `classes` (at most `max`, then no more).
fn piece(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    reach: &HostReach,
    from: usize,
    (pre, keys, candidates): (&mut [Pre], &mut [u64], &mut [u32]),
    classes: &mut Interner,
    max: usize,
) -> Tally {
    let (f, h) = (pool.filter_count, pool.host_count);
    let to = from + pre.len();
    let mut found = Tally { interned: f > 0, ..Tally::default() };
    let columns = pool.party_size[from..to].iter().zip(&pool.mmr_mean[from..to]);
    let columns = columns.zip(pool.arrival_ms[from..to].iter().zip(&pool.ruleset_mask[from..to]));
    for (k, (pre, ((&party, &mmr), (&arrival, &mask)))) in pre.iter_mut().zip(columns).enumerate() {
        let i = from + k;
        let eff = params.effective_skill(mmr, party);
        let mut class = 0;
        if found.interned {
            let (vals, accs) = (&pool.attr_values[i * f..(i + 1) * f], &pool.attr_accepts[i * f..(i + 1) * f]);
            match classes.intern(vals, accs, max) {
                Some(c) => class = c,
                None => found.interned = false,
            }
        }
        *pre = Pre { hot: Hot { eff, mask, meta: u32::from(party) | class << 8 }, age: order_key(arrival) };
        if reach.could_match(mask, &pool.latency_ms[i * h..(i + 1) * h]) {
            keys[found.candidates] = order_key(eff);
            candidates[found.candidates] = i as u32;
            found.candidates += 1;
        } else {
            set_aside(&mut found.set_aside, mask & reach.valid_rulesets);
        }
    }
    found
}

/// Counts a ticket set aside for want of a host in each ruleset of `mask` (it requires one and none is
/// in reach, so as a seed it would fail there at once). Out of line, so the pass that rarely takes it
/// is compiled as without it.
#[cold]
#[inline(never)]
fn set_aside(counts: &mut [u64; 32], mut mask: u32) {
    while mask != 0 {
        counts[mask.trailing_zeros() as usize] += 1;
        mask &= mask - 1;
    }
}
