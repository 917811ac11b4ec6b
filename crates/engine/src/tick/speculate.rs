//! The seed loop on many threads (docs/engine.md, "Threads"). Seeds are taken in batches, oldest
//! first. The pool's threads try all of a batch's seeds at once, each try noting the outermost skill
//! slots it read (`Span`), while the committing thread commits the batch before, oldest first. Then
//! this batch commits: a seed whose span holds a ticket matched since its try began (by the batch
//! before, or earlier in its own) is tried again on the committing thread, against the pool as it now
//! is; any other seed's try stands. So does a match that depends on its own tickets only
//! (`SeedTry::own_tickets_only`) while none of them was matched since: what its scan passed over
//! changed nothing it found. A try reads nothing else that a commit changes (compaction waits
//! for the tries in flight and has what is left of them tried again), so each seed finds what the loop
//! on one thread would find, and the output is that loop's, bit for bit, whatever the number of threads.

use std::sync::Arc;

use rayon::prelude::*;

use super::emit::Staged;
use super::lanes::HostMask;
use super::layout::{valid_rulesets, Ctx, Sorted};
use super::links::{Links, Span};
use super::scratch::Scratch;
use super::seed::{reborrow, try_and_stage, Commit, SeedTry, TryMemory};
use super::{prefetch_seeds, try_and_commit};
use crate::{RuleDiagnostics, TickParams};

/// Below this many live tickets a tick's seed loop stays on one thread by default: its batches would
/// be too small to pay for waking the others.
pub(crate) const MIN_LIVE: usize = 200_000;

/// From this many threads, a batch is tried while the one before it commits.
const OVERLAP_FROM_THREADS: usize = 4;

/// Runs of a batch's seeds per thread (`Slot::workers`).
const RUNS_A_THREAD: usize = 4;

/// Pieces per thread when a pass over the pool is cut into pieces (the layout's first pass and gather, the
/// kept layout's merge and seed order, compaction): a few, so a thread done early takes another rather
/// than wait for the slowest.
pub(super) const PIECES_A_THREAD: usize = 4;

/// The threads a queue's ticks share, and the memory of the two batches in flight.
#[derive(Debug)]
pub(crate) struct Threads {
    pool: Arc<rayon::ThreadPool>,
    /// The fewest live tickets the seed loop spreads over the threads.
    pub(crate) min_live: usize,
    /// The batch committing and the batch trying, by turns, and the tickets matched while each commits.
    slots: [Slot; 2],
    marks: [Marks; 2],
}

/// One batch in flight: its seeds, its runs' memory and what each try found.
#[derive(Debug, Default)]
struct Slot {
    /// Entries of `Sorted::by_age`.
    batch: Vec<u64>,
    /// A few a thread, each trying a run of the batch's seeds, so that a thread done early takes another
    /// run (rayon's work stealing) rather than wait for the slowest.
    workers: Vec<Worker>,
    /// Seeds a run; `specs[i]` is in `workers[i / run]`.
    run: usize,
    specs: Vec<Spec>,
}

/// A bit per slot (live position + 1): a ticket matched while a batch commits.
#[derive(Debug, Default)]
struct Marks {
    bits: Vec<u64>,
    /// The words of `bits` that are not zero.
    marked: Vec<usize>,
}

impl Marks {
    /// None marked, for `live` live positions.
    fn clear(&mut self, live: usize) {
        for &word in &self.marked {
            self.bits[word] = 0;
        }
        self.marked.clear();
        self.bits.resize((live + 2).div_ceil(64), 0);
    }

    /// Marks the slots of the live positions `sel`.
    fn mark(&mut self, sel: &[u32]) {
        for &p in sel {
            let slot = p as usize + 1;
            if self.bits[slot / 64] == 0 {
                self.marked.push(slot / 64);
            }
            self.bits[slot / 64] |= 1 << (slot % 64);
        }
    }

    /// Whether the slot of one of the live positions `sel` is marked.
    fn any_of(&self, sel: &[u32]) -> bool {
        sel.iter().any(|&p| {
            let slot = p as usize + 1;
            self.bits[slot / 64] >> (slot % 64) & 1 == 1
        })
    }

    /// Whether a slot from `lo` to `hi` (both included) is marked.
    fn any(&self, lo: u32, hi: u32) -> bool {
        let (lo, hi) = (lo as usize, hi as usize);
        let (first, last) = (lo / 64, hi / 64);
        let low = u64::MAX << (lo % 64);
        let high = u64::MAX >> (63 - hi % 64);
        let bits = &self.bits;
        if first == last {
            return bits[first] & low & high != 0;
        }
        bits[first] & low != 0 || bits[first + 1..last].iter().any(|&x| x != 0) || bits[last] & high != 0
    }
}

impl Slot {
    /// Tries every seed of the batch against the pool as it stands, a run a worker, on the pool's threads.
    fn try_all<M: HostMask>(
        &mut self,
        ctx: &Ctx<'_>,
        params: &TickParams<'_>,
        links: &Links,
        valid: u32,
        (f, row): (usize, usize),
    ) {
        let Slot { batch, workers, run, specs, .. } = self;
        specs.clear();
        specs.resize(batch.len(), Spec::default());
        *run = batch.len().div_ceil(workers.len()).max(1);
        workers
            .par_iter_mut()
            .zip(batch.par_chunks(*run).zip(specs.par_chunks_mut(*run)))
            .for_each(|(w, (seeds, specs))| w.try_seeds::<M>(ctx, params, links, seeds, specs, valid, (f, row)));
    }
}

impl Threads {
    pub(crate) fn new(pool: Arc<rayon::ThreadPool>) -> Self {
        let slot = || Slot {
            workers: (0..RUNS_A_THREAD * pool.current_num_threads()).map(|_| Worker::default()).collect(),
            ..Slot::default()
        };
        Threads { min_live: MIN_LIVE, slots: [slot(), slot()], marks: Default::default(), pool }
    }

    pub(crate) fn count(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// How many pieces a pass over the pool is cut into on these threads (`PIECES_A_THREAD`).
    pub(super) fn pieces(&self) -> usize {
        self.count() * PIECES_A_THREAD
    }

    /// Runs `work` on one of the threads (it may spread further over them).
    pub(super) fn run<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.pool.install(work)
    }

    pub(super) fn worth_it(&self, live: usize) -> bool {
        self.count() > 1 && live >= self.min_live
    }

    /// The seed loop of `tick/mod.rs`'s `one_by_one`, the tries spread over the threads (module docs).
    pub(super) fn seed_loop<M: HostMask + Send + Sync>(
        &mut self,
        sorted: &mut Sorted,
        links: &mut Links,
        memory: TryMemory<'_>,
        commit: &mut Commit<'_, '_>,
    ) {
        // The whole loop runs on one of the pool's threads, which commits and, in between, tries too.
        let Threads { pool, slots, marks, .. } = self;
        pool.install(|| spread_loop::<M>(slots, marks, sorted, links, memory, commit));
    }
}

/// Appends to `batch` the unused seeds from `by_age[k]` on, up to `size` in all; answers where it stopped.
fn fill(batch: &mut Vec<u64>, sorted: &Sorted, mut k: usize, size: usize) -> usize {
    while k < sorted.by_age.len() && batch.len() < size {
        let e = sorted.by_age[k];
        k += 1;
        if !sorted.is_used(e as u32 as usize) {
            batch.push(e);
        }
    }
    k
}

/// `Threads::seed_loop` on a thread of the pool.
fn spread_loop<M: HostMask + Send + Sync>(
    slots: &mut [Slot; 2],
    marks: &mut [Marks; 2],
    sorted: &mut Sorted,
    links: &mut Links,
    mut memory: TryMemory<'_>,
    commit: &mut Commit<'_, '_>,
) {
    let params = commit.params;
    let valid = valid_rulesets(params);
    for w in slots.iter_mut().flat_map(|slot| slot.workers.iter_mut()) {
        w.scratch.set_filters(params.filters);
        w.local.clear();
        w.local.resize(params.rulesets.len(), RuleDiagnostics::default());
    }
    let runs = slots[0].workers.len();
    // On few threads the committing thread is better spent trying than committing beside the tries: the
    // next batch is tried after this one commits (bench/RESULTS.md, "Threads for the tick").
    let overlap = rayon::current_num_threads() >= OVERLAP_FROM_THREADS;
    let layout = (commit.f, commit.row);
    // Few enough seeds that one rarely meets a ticket matched since its try began (a retry).
    let size = |live: usize| (live / 512).clamp(8 * runs, 8_192);
    for slot in slots.iter_mut() {
        slot.batch.clear();
    }
    for m in marks.iter_mut() {
        m.clear(sorted.live);
    }
    // `slots[0]` commits while `slots[1]` tries, and the two change places after each batch (so do the
    // marks); the first batch, and the first after a compaction, are tried alone.
    let mut k = fill(&mut slots[0].batch, sorted, 0, size(sorted.live));
    slots[0].try_all::<M>(&commit.ctx(sorted), params, links, valid, layout);
    // Whether `slots[0]`'s tries ran while the batch before it committed (its marks then count too).
    let mut overlapped = false;
    while !slots[0].batch.is_empty() {
        let [current, next] = &mut *slots;
        let [marking, before] = &mut *marks;
        next.batch.clear();
        k = fill(&mut next.batch, sorted, k, size(sorted.live));
        // The marks here are two batches old: no try in flight began before them.
        marking.clear(sorted.live);
        let mut compact_after = None;
        {
            let (sorted, links) = (&*sorted, &*links);
            let ctx = commit.ctx(sorted);
            rayon::scope(|scope| {
                if overlap && !next.batch.is_empty() {
                    scope.spawn(|_| next.try_all::<M>(&ctx, params, links, valid, layout));
                }
                let before = if overlapped { Some(&*before) } else { None };
                for (i, (&e, spec)) in current.batch.iter().zip(&current.specs).enumerate() {
                    let q = e as u32 as usize;
                    if sorted.is_used(q) {
                        continue;
                    }
                    let w = &current.workers[i / current.run];
                    let sel = &w.sel[range(spec.sel)];
                    let touched = |m: &Marks| {
                        if spec.own_tickets_only {
                            m.any_of(sel)
                        } else {
                            m.any(spec.lo, spec.hi)
                        }
                    };
                    let stale = touched(marking) || before.is_some_and(touched);
                    let compact = if stale {
                        let (formed, compact) =
                            try_and_commit::<M>(sorted, links, q, valid, reborrow(&mut memory), commit);
                        if formed {
                            marking.mark(&memory.0.sel);
                        }
                        compact
                    } else {
                        marking.mark(sel);
                        let tried = &w.tried[range(spec.tried)];
                        let formed = spec.formed.map(|k| (sel, commit.staged(&w.staged, k as usize)));
                        commit.seed(sorted, links, q, (spec.rulesets, tried), formed)
                    };
                    if compact {
                        compact_after = Some(i);
                        break;
                    }
                }
            });
        }
        let Some(i) = compact_after else {
            if !overlap {
                next.try_all::<M>(&commit.ctx(sorted), params, links, valid, layout);
            }
            slots.swap(0, 1);
            marks.swap(0, 1);
            overlapped = overlap;
            continue;
        };
        // Every live position moves: what is left of this batch and the whole next one are tried again,
        // alone.
        commit.compact(sorted, links, true);
        current.batch.drain(..=i);
        current.batch.append(&mut next.batch);
        marking.clear(sorted.live);
        before.clear(sorted.live);
        current.try_all::<M>(&commit.ctx(sorted), params, links, valid, layout);
        overlapped = false;
    }
}

fn range((from, to): (u32, u32)) -> std::ops::Range<usize> {
    from as usize..to as usize
}

/// One run's memory: where it grows candidates, and what its tries of a batch found.
#[derive(Debug, Default)]
struct Worker {
    scratch: Scratch,
    /// Rule decisions of the current try, per ruleset (zero between tries).
    local: Vec<RuleDiagnostics>,
    /// Each try's records, one per ruleset tried (`Spec::tried`).
    tried: Vec<RuleDiagnostics>,
    /// The live positions of each match formed (`Spec::sel`), and its output.
    sel: Vec<u32>,
    staged: Staged,
}

/// What one seed's try found, against the batch's starting pool.
#[derive(Clone, Copy, Debug, Default)]
struct Spec {
    /// The lowest and highest slot the try read.
    lo: u32,
    hi: u32,
    /// The rulesets tried (a bit each), and their records: `Worker::tried[tried.0..tried.1]`.
    rulesets: u32,
    tried: (u32, u32),
    /// The match formed (`Worker::staged`'s index), and its tickets: `Worker::sel[sel.0..sel.1]`.
    formed: Option<u32>,
    sel: (u32, u32),
    /// `SeedTry::own_tickets_only`: only the matching of one of `sel` since makes the try stale.
    own_tickets_only: bool,
}

impl Worker {
    /// Tries the batch's `seeds` (entries of `Sorted::by_age`) against the pool as it stands, and
    /// writes what each found into `specs`.
    #[allow(clippy::too_many_arguments)]
    fn try_seeds<M: HostMask>(
        &mut self,
        ctx: &Ctx<'_>,
        params: &TickParams<'_>,
        links: &Links,
        seeds: &[u64],
        specs: &mut [Spec],
        valid: u32,
        (f, row): (usize, usize),
    ) {
        self.tried.clear();
        self.sel.clear();
        self.staged.clear();
        for (k, (&e, spec)) in seeds.iter().zip(specs).enumerate() {
            prefetch_seeds(ctx.s, links, f, row, seeds, k);
            let q = e as u32 as usize;
            let mut span = Span::new(links, ctx.s.cur[q] + 1);
            let (tried_at, sel_at) = (self.tried.len() as u32, self.sel.len() as u32);
            let memory = (&mut self.scratch, &mut self.local[..], &mut self.tried, &mut self.staged);
            let SeedTry { formed, rulesets, own_tickets_only } =
                try_and_stage::<M, Span>(ctx, params, &mut span, q, valid, memory);
            if formed.is_some() {
                self.sel.extend_from_slice(&self.scratch.sel);
            }
            *spec = Spec {
                lo: span.lo,
                hi: span.hi,
                rulesets,
                tried: (tried_at, self.tried.len() as u32),
                formed: formed.map(|k| k as u32),
                sel: (sel_at, self.sel.len() as u32),
                own_tickets_only,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_answer_for_the_slots_from_lo_to_hi() {
        let mut marks = Marks::default();
        marks.clear(254);
        marks.mark(&[69]); // slot 70
        assert_eq!(marks.marked, [1]);
        assert!(marks.any(70, 70));
        assert!(marks.any(0, 255));
        assert!(marks.any(64, 127));
        assert!(!marks.any(0, 69));
        assert!(!marks.any(71, 255));
        assert!(marks.any(3, 70) && marks.any(70, 200));
        marks.mark(&[199]); // slot 200, two words on
        assert_eq!(marks.marked, [1, 3]);
        assert!(marks.any(71, 200) && !marks.any(71, 199));
        marks.clear(254);
        assert!(!marks.any(0, 255) && marks.marked.is_empty());
    }
}
