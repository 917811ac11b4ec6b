//! The seed loop on many threads (docs/engine.md, "Threads"). Seeds are taken in batches, oldest
//! first. The pool's threads try all of a batch's seeds at once against the pool as the batch found
//! it, each try noting the outermost skill slots it read (`Span`); then the seeds commit one by one,
//! oldest first, and a seed whose span holds a ticket matched earlier in the same batch is tried again
//! on the committing thread, against the pool as it now is. A try reads nothing else that a commit
//! changes, so each seed finds what the loop on one thread would find, and the output is that
//! loop's, bit for bit, whatever the number of threads.

use std::sync::Arc;

use rayon::prelude::*;

use super::emit::Staged;
use super::lanes::HostMask;
use super::layout::{valid_rulesets, Ctx, Sorted};
use super::links::{Links, Span};
use super::scratch::Scratch;
use super::seed::{drain, try_seed, Commit};
use super::{prefetch_seeds, reborrow, try_and_commit, TryMemory};
use crate::{RuleDiagnostics, TickParams};

/// Below this many live tickets a tick's seed loop stays on one thread by default: its batches would
/// be too small to pay for waking the others.
pub(crate) const MIN_LIVE: usize = 200_000;

/// Runs of a batch's seeds per thread (`Threads::workers`).
const RUNS_A_THREAD: usize = 4;

/// The threads a queue's ticks share, and each run's memory.
#[derive(Debug)]
pub(crate) struct Threads {
    pool: Arc<rayon::ThreadPool>,
    /// A few a thread, each trying a run of a batch's seeds, so that a thread done early takes another
    /// run (rayon's work stealing) rather than wait for the slowest.
    workers: Vec<Worker>,
    /// The fewest live tickets the seed loop spreads over the threads.
    pub(crate) min_live: usize,
    /// The batch: entries of `Sorted::by_age`.
    batch: Vec<u64>,
    /// A bit per slot: a ticket matched since the batch was tried.
    marks: Vec<u64>,
    /// The words of `marks` that are not zero.
    marked: Vec<usize>,
}

/// One thread's memory: where it grows candidates, and what its tries of a batch found.
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
}

impl Threads {
    pub(crate) fn new(pool: Arc<rayon::ThreadPool>) -> Self {
        let workers = (0..RUNS_A_THREAD * pool.current_num_threads()).map(|_| Worker::default()).collect();
        Threads { pool, workers, min_live: MIN_LIVE, batch: Vec::new(), marks: Vec::new(), marked: Vec::new() }
    }

    pub(crate) fn count(&self) -> usize {
        self.pool.current_num_threads()
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
        // The whole loop runs on one of the pool's threads, so the commits and the tries of the first
        // chunk share its caches.
        let Threads { pool, workers, batch, marks, marked, .. } = self;
        pool.install(|| spread_loop::<M>(workers, batch, marks, marked, sorted, links, memory, commit));
    }
}

/// `Threads::seed_loop` on a thread of the pool.
#[allow(clippy::too_many_arguments)]
fn spread_loop<M: HostMask + Send + Sync>(
    workers: &mut [Worker],
    batch: &mut Vec<u64>,
    marks: &mut Vec<u64>,
    marked: &mut Vec<usize>,
    sorted: &mut Sorted,
    links: &mut Links,
    mut memory: TryMemory<'_>,
    commit: &mut Commit<'_, '_>,
) {
    let params = commit.params;
    let valid = valid_rulesets(params);
    for w in workers.iter_mut() {
        w.scratch.set_filters(params.filters);
        w.local.clear();
        w.local.resize(params.rulesets.len(), RuleDiagnostics::default());
    }
    let runs = workers.len();
    let (f, row) = (commit.f, commit.row);
    let mut specs: Vec<Spec> = Vec::new();
    batch.clear();
    let mut k = 0;
    let seeds = sorted.by_age.len();
    while k < seeds || !batch.is_empty() {
        // The batch: what a compaction left of the last one, then the next unused seeds. Few enough
        // that a seed rarely meets a ticket matched before it in the batch (a retry).
        let size = (sorted.live / 512).clamp(8 * runs, 8_192);
        while k < seeds && batch.len() < size {
            let e = sorted.by_age[k];
            k += 1;
            if !sorted.is_used(e as u32 as usize) {
                batch.push(e);
            }
        }
        if batch.is_empty() {
            break;
        }
        specs.clear();
        specs.resize(batch.len(), Spec::default());
        let chunk = batch.len().div_ceil(runs);
        {
            let ctx = commit.ctx(sorted);
            let links = &*links;
            workers
                .par_iter_mut()
                .zip(batch.par_chunks(chunk).zip(specs.par_chunks_mut(chunk)))
                .for_each(|(w, (seeds, specs))| w.try_seeds::<M>(&ctx, params, links, seeds, specs, valid, (f, row)));
        }

        // Commit, oldest first.
        marks.resize((sorted.live + 2).div_ceil(64), 0);
        let mut done = batch.len();
        for (i, (&e, spec)) in batch.iter().zip(&specs).enumerate() {
            let q = e as u32 as usize;
            if sorted.is_used(q) {
                continue;
            }
            let compacted = if any_marked(marks, spec.lo, spec.hi) {
                let (formed, compacted) = try_and_commit::<M>(sorted, links, q, valid, reborrow(&mut memory), commit);
                if formed {
                    mark(marks, marked, &memory.0.sel);
                }
                compacted
            } else {
                let w = &workers[i / chunk];
                let sel = &w.sel[range(spec.sel)];
                mark(marks, marked, sel);
                let tried = &w.tried[range(spec.tried)];
                let formed = spec.formed.map(|k| (sel, commit.staged(&w.staged, k as usize)));
                commit.seed(sorted, links, q, (spec.rulesets, tried), formed)
            };
            if compacted {
                // Every live position moved: what is left of the batch is tried again.
                done = i + 1;
                break;
            }
        }
        for &word in marked.iter() {
            marks[word] = 0;
        }
        marked.clear();
        batch.drain(..done);
    }
}

fn range((from, to): (u32, u32)) -> std::ops::Range<usize> {
    from as usize..to as usize
}

/// Marks the slots of the live positions `sel`.
fn mark(marks: &mut [u64], marked: &mut Vec<usize>, sel: &[u32]) {
    for &p in sel {
        let slot = p as usize + 1;
        if marks[slot / 64] == 0 {
            marked.push(slot / 64);
        }
        marks[slot / 64] |= 1 << (slot % 64);
    }
}

/// Whether a slot from `lo` to `hi` (both included) is marked.
fn any_marked(marks: &[u64], lo: u32, hi: u32) -> bool {
    let (lo, hi) = (lo as usize, hi as usize);
    let (first, last) = (lo / 64, hi / 64);
    let low = u64::MAX << (lo % 64);
    let high = u64::MAX >> (63 - hi % 64);
    if first == last {
        return marks[first] & low & high != 0;
    }
    marks[first] & low != 0 || marks[first + 1..last].iter().any(|&x| x != 0) || marks[last] & high != 0
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
            let (formed, rulesets) =
                try_seed::<M, Span>(ctx, params, &mut span, &mut self.scratch, q, valid, &mut self.local);
            let tried_at = self.tried.len() as u32;
            drain(&mut self.local, rulesets, &mut self.tried);
            let sel_at = self.sel.len() as u32;
            let formed = formed.map(|fm| {
                self.sel.extend_from_slice(&self.scratch.sel);
                fm.stage(ctx, &self.scratch.sel, &self.scratch.sel_team, &mut self.staged) as u32
            });
            *spec = Spec {
                lo: span.lo,
                hi: span.hi,
                rulesets,
                tried: (tried_at, self.tried.len() as u32),
                formed,
                sel: (sel_at, self.sel.len() as u32),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_marked_looks_at_the_slots_from_lo_to_hi() {
        let mut marks = vec![0u64; 4];
        let mut marked = Vec::new();
        mark(&mut marks, &mut marked, &[69]); // slot 70
        assert_eq!(marked, [1]);
        assert!(any_marked(&marks, 70, 70));
        assert!(any_marked(&marks, 0, 255));
        assert!(any_marked(&marks, 64, 127));
        assert!(!any_marked(&marks, 0, 69));
        assert!(!any_marked(&marks, 71, 255));
        assert!(any_marked(&marks, 3, 70) && any_marked(&marks, 70, 200));
        mark(&mut marks, &mut marked, &[199]); // slot 200, two words on
        assert_eq!(marked, [1, 3]);
        assert!(any_marked(&marks, 71, 200) && !any_marked(&marks, 71, 199));
    }
}
