//! The seed loop on many threads (docs/engine.md, "Threads"). The seeds, oldest first, are cut into
//! chunks that the pool's threads claim in order and try against the pool as they find it, each try noting
//! the outermost skill slots it read (`Span`) and how many matches were committed when it began. The
//! committing thread commits the chunks in order, and tries chunks itself while the next is not ready. A
//! seed whose span holds a ticket matched since its try began is tried again on the committing thread,
//! against the pool as it now is; any other seed's try stands. So does a match that depends on its own
//! tickets only (`SeedTry::own_tickets_only`) while none of them was matched since: what its scan passed
//! over changed nothing it found. A try reads nothing else that a commit changes (compaction stops the
//! tries, and what they found is tried again after it), so each seed finds what the loop on one thread
//! would find, and the output is that loop's, bit for bit, whatever the number of threads.

use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicUsize,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Arc, Mutex, PoisonError};

use super::emit::Staged;
use super::lanes::HostMask;
use super::layout::{prefetch_range, valid_rulesets, Ctx, Sorted};
use super::links::{Links, Span};
use super::scratch::Scratch;
use super::seed::{reborrow, try_and_stage, Commit, SeedTry, TryMemory};
use super::{prefetch_seeds, try_and_commit};
use crate::{RuleDiagnostics, TickParams};

/// Below this many live tickets a tick stays on one thread by default: its tries would be too few to pay
/// for waking the others (on 2 vCPUs a 100k tick gained 1.07x to 1.34x on two threads, a 10k one lost:
/// bench/RESULTS.md, "Twenty-eighth session").
pub(crate) const MIN_LIVE: usize = 100_000;

/// Seeds (entries of `Sorted::by_age`) a chunk: few enough that a try rarely meets a ticket matched since
/// it began (a retry), enough that claiming one costs little beside its tries.
const CHUNK: usize = 64;

/// Chunks in flight a thread (at most `MOST_AHEAD` in all): how far the tries may run ahead of the commits.
/// Room enough that a thread rarely waits for the commits; a try begins a few chunks before its commit
/// all the same while the tries are slower than the commits (bench/RESULTS.md, "Twenty-eighth session").
const AHEAD_A_THREAD: usize = 16;

/// On many threads the commits are the slower side: the tries then run as far ahead as the ring lets them,
/// and the farther, the more of them meet a ticket matched since (a retry, on the committing thread).
const MOST_AHEAD: usize = 64;

/// How many seeds ahead of its commit the stamps a commit reads are asked for.
const STAMPS_AHEAD: usize = 4;

/// Pieces per thread when a pass over the pool is cut into pieces (the layout's first pass and gather, the
/// kept layout's merge and seed order, compaction): a few, so a thread done early takes another rather
/// than wait for the slowest.
pub(super) const PIECES_A_THREAD: usize = 4;

/// A value on cache lines of its own: what one thread writes often does not share a line with what another
/// reads or writes (each such write would take the line from the other core).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The threads a queue's ticks share, and the memory of the chunks in flight.
#[derive(Debug)]
pub(crate) struct Threads {
    pool: Arc<rayon::ThreadPool>,
    /// The fewest live tickets the seed loop spreads over the threads.
    pub(crate) min_live: usize,
    /// The chunks in flight, by turns: chunk c is tried into `ring[c % ring.len()]`.
    ring: Vec<Line<Mutex<Chunk>>>,
    /// A try's memory per thread.
    workers: Vec<Worker>,
    stamps: Stamps,
}

impl Threads {
    pub(crate) fn new(pool: Arc<rayon::ThreadPool>) -> Self {
        let count = pool.current_num_threads();
        Threads {
            min_live: MIN_LIVE,
            ring: (0..(AHEAD_A_THREAD * count).clamp(2, MOST_AHEAD)).map(|_| Line::default()).collect(),
            workers: (0..count).map(|_| Worker::default()).collect(),
            stamps: Stamps::default(),
            pool,
        }
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

    /// Bytes held beside the layout: a stamp per live ticket.
    pub(crate) fn bytes(&self) -> usize {
        self.stamps.0.capacity() * std::mem::size_of::<u32>()
    }

    /// The seed loop of `tick/mod.rs`'s `one_by_one`, the tries spread over the threads (module docs).
    pub(super) fn seed_loop<M: HostMask + Send + Sync>(
        &mut self,
        sorted: &mut Sorted,
        links: &mut Links,
        mut memory: TryMemory<'_>,
        commit: &mut Commit<'_, '_>,
    ) {
        let Threads { pool, ring, workers, stamps, .. } = self;
        let params = commit.params;
        for w in workers.iter_mut() {
            w.scratch.set_filters(params.filters);
            w.local.clear();
            w.local.resize(params.rulesets.len(), RuleDiagnostics::default());
        }
        stamps.clear(sorted.live);
        // The whole loop runs on one of the pool's threads, which commits and, in between, tries too. A pass
        // runs until compaction is due (every live position moves) or the seeds run out.
        pool.install(|| {
            let mut from = 0;
            while from < sorted.by_age.len() {
                let progress = Progress::new(from, sorted.by_age.len(), ring.len(), commit.matches);
                let stopped = {
                    let ctx = commit.ctx(sorted);
                    let valid = valid_rulesets(params);
                    let layout = (commit.f, commit.row);
                    let tries = Tries { ctx: &ctx, params, links, valid, layout, ring, progress: &progress };
                    let (mine, others) = workers.split_first_mut().expect("a pool has a thread");
                    rayon::scope(|scope| {
                        for w in others {
                            let tries = &tries;
                            scope.spawn(move |_| tries.keep_trying::<M>(w));
                        }
                        let stopped = commit_chunks::<M>(&tries, mine, stamps, reborrow(&mut memory), commit);
                        progress.halt.store(true, Relaxed);
                        stopped
                    })
                };
                let Some(next) = stopped else { break };
                commit.compact(sorted, links, true);
                stamps.clear(sorted.live);
                from = next;
            }
        });
    }
}

/// A pass's progress, shared by its threads: which chunks are claimed, tried and committed.
struct Progress {
    /// `Sorted::by_age`'s entries from `from` to `to`, `CHUNK` a chunk.
    from: usize,
    to: usize,
    chunks: usize,
    /// The next chunk to claim.
    claimed: Line<AtomicUsize>,
    /// Chunks committed: chunk c may be claimed once chunk c - ring is.
    committed: Line<AtomicUsize>,
    /// Per place in the ring: its chunk's number + 1 once that chunk is tried.
    tried: Vec<Line<AtomicUsize>>,
    /// The matches committed, their tickets marked used (a try notes it when it begins).
    matches: Line<AtomicU32>,
    /// No more chunks are claimed: compaction is due, or the pass is done.
    halt: AtomicBool,
    /// A thread of the pass panicked: no other waits for it.
    abandoned: AtomicBool,
}

/// Halts the pass if its thread unwinds, so that no other thread waits for it forever (the scope then
/// passes the panic on).
struct Abandon<'a>(&'a Progress);

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandoned.store(true, Relaxed);
            self.0.halt.store(true, Relaxed);
        }
    }
}

/// What `Progress::claim` got.
enum Claim {
    Chunk(usize),
    /// The ring is full: the commits must catch up.
    Wait,
    /// Every chunk is claimed, or the pass halted.
    Done,
}

impl Progress {
    fn new(from: usize, to: usize, ring: usize, matches: usize) -> Self {
        Progress {
            from,
            to,
            chunks: (to - from).div_ceil(CHUNK),
            claimed: Line(AtomicUsize::new(0)),
            committed: Line(AtomicUsize::new(0)),
            tried: (0..ring).map(|_| Line(AtomicUsize::new(0))).collect(),
            matches: Line(AtomicU32::new(matches as u32)),
            halt: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
        }
    }

    /// The entries of chunk c.
    fn seeds(&self, c: usize) -> std::ops::Range<usize> {
        self.from + c * CHUNK..(self.from + (c + 1) * CHUNK).min(self.to)
    }

    /// Claims the next chunk if its place in the ring is free.
    fn claim(&self) -> Claim {
        let mut c = self.claimed.load(Relaxed);
        loop {
            if c >= self.chunks || self.halt.load(Relaxed) {
                return Claim::Done;
            }
            if c >= self.committed.load(Acquire) + self.tried.len() {
                return Claim::Wait;
            }
            match self.claimed.compare_exchange_weak(c, c + 1, Relaxed, Relaxed) {
                Ok(_) => return Claim::Chunk(c),
                Err(now) => c = now,
            }
        }
    }
}

/// What the threads of a pass share to try chunks.
struct Tries<'a, 'p> {
    ctx: &'a Ctx<'a>,
    params: &'a TickParams<'p>,
    links: &'a Links,
    valid: u32,
    /// Filters and words per row of `Sorted::rows` (for `prefetch_seeds`).
    layout: (usize, usize),
    ring: &'a [Line<Mutex<Chunk>>],
    progress: &'a Progress,
}

impl Tries<'_, '_> {
    /// A thread's loop besides the committing one: claims and tries chunks until none is left.
    fn keep_trying<M: HostMask>(&self, w: &mut Worker) {
        let _abandon = Abandon(self.progress);
        let mut idle = 0;
        loop {
            match self.progress.claim() {
                Claim::Chunk(c) => {
                    self.try_chunk::<M>(w, c);
                    idle = 0;
                }
                Claim::Wait => back_off(&mut idle),
                Claim::Done => return,
            }
        }
    }

    /// Tries the seeds of chunk c against the pool as it stands, into its place in the ring.
    fn try_chunk<M: HostMask>(&self, w: &mut Worker, c: usize) {
        let place = c % self.ring.len();
        {
            let mut chunk = self.ring[place].lock().unwrap_or_else(PoisonError::into_inner);
            chunk.try_seeds::<M>(w, self, self.progress.seeds(c));
        }
        self.progress.tried[place].store(c + 1, Release);
    }
}

/// The committing thread's part of a pass: commits the chunks in order (module docs), trying chunks
/// itself while the next is not tried yet. Answers where the next pass starts if compaction is due.
fn commit_chunks<M: HostMask>(
    tries: &Tries<'_, '_>,
    mine: &mut Worker,
    stamps: &mut Stamps,
    mut memory: TryMemory<'_>,
    commit: &mut Commit<'_, '_>,
) -> Option<usize> {
    let Tries { ctx, links, valid, ring, progress, .. } = *tries;
    let _abandon = Abandon(progress);
    let sorted = ctx.s;
    for c in 0..progress.chunks {
        let place = c % ring.len();
        let mut idle = 0;
        while progress.tried[place].load(Acquire) != c + 1 {
            assert!(!progress.abandoned.load(Relaxed), "a thread trying seeds panicked");
            match progress.claim() {
                Claim::Chunk(x) => {
                    tries.try_chunk::<M>(mine, x);
                    idle = 0;
                }
                Claim::Wait | Claim::Done => back_off(&mut idle),
            }
        }
        let chunk = ring[place].lock().unwrap_or_else(PoisonError::into_inner);
        chunk.prefetch();
        for (i, (k, spec)) in progress.seeds(c).zip(&chunk.specs).enumerate() {
            if let Some(ahead) = chunk.specs.get(i + STAMPS_AHEAD) {
                stamps.prefetch(ahead);
            }
            let q = sorted.by_age[k] as u32 as usize;
            if sorted.is_used(q) {
                continue;
            }
            let sel = &chunk.sel[range(spec.sel)];
            let stale = if spec.own_tickets_only {
                stamps.any_of_since(sel, spec.began)
            } else {
                stamps.any_since(spec.lo, spec.hi, spec.began)
            };
            let (formed, compact) = if stale {
                let (formed, compact) = try_and_commit::<M>(sorted, links, q, valid, reborrow(&mut memory), commit);
                if formed {
                    stamps.stamp(&memory.0.sel, commit.matches);
                }
                (formed, compact)
            } else {
                let tried = &chunk.tried[range(spec.tried)];
                let formed = spec.formed.map(|m| (sel, commit.staged(&chunk.staged, m as usize)));
                let compact = commit.seed(sorted, links, q, (spec.rulesets, tried), formed);
                if spec.formed.is_some() {
                    stamps.stamp(sel, commit.matches);
                }
                (spec.formed.is_some(), compact)
            };
            if formed {
                // The match's tickets are marked used: tries that begin from here on see them so.
                progress.matches.store(commit.matches as u32, Release);
            }
            if compact {
                return Some(k + 1);
            }
        }
        drop(chunk);
        progress.committed.store(c + 1, Release);
    }
    None
}

/// Waits a little longer each time nothing is to be done: spins, then yields the core.
fn back_off(idle: &mut u32) {
    if *idle < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
    *idle += 1;
}

fn range((from, to): (u32, u32)) -> std::ops::Range<usize> {
    from as usize..to as usize
}

/// Per live slot (position + 1), the number of matches committed once its ticket was matched (0: not
/// matched this pass). A try that began after m matches is stale if a slot it read has a stamp over m.
#[derive(Debug, Default)]
struct Stamps(Vec<u32>);

impl Stamps {
    /// No slot stamped, for `live` live positions.
    fn clear(&mut self, live: usize) {
        self.0.clear();
        self.0.resize(live + 2, 0);
    }

    /// The tickets at live positions `sel` were matched by the `matches`-th match.
    fn stamp(&mut self, sel: &[u32], matches: usize) {
        for &p in sel {
            self.0[p as usize + 1] = matches as u32;
        }
    }

    /// Whether a slot from `lo` to `hi` (both included) was matched after `began` matches.
    fn any_since(&self, lo: u32, hi: u32, began: u32) -> bool {
        self.0[lo as usize..=hi as usize].iter().any(|&m| m > began)
    }

    /// Asks for the stamps a commit will read for the try `spec` (the seeds' places are far apart).
    fn prefetch(&self, spec: &Spec) {
        // A match of its own tickets only has them within the span too.
        prefetch_range(&self.0, spec.lo as usize, spec.hi as usize);
    }

    /// Whether the ticket at one of the live positions `sel` was matched after `began` matches.
    fn any_of_since(&self, sel: &[u32], began: u32) -> bool {
        sel.iter().any(|&p| self.0[p as usize + 1] > began)
    }
}

/// A thread's memory for its tries: where it grows candidates, and the rule decisions of the current try.
#[derive(Debug, Default)]
struct Worker {
    scratch: Scratch,
    /// Per ruleset (zero between tries).
    local: Vec<RuleDiagnostics>,
}

/// A chunk's tries: what each of its seeds found.
#[derive(Debug, Default)]
struct Chunk {
    /// One per seed of the chunk, in order.
    specs: Vec<Spec>,
    /// Each try's records, one per ruleset tried (`Spec::tried`).
    tried: Vec<RuleDiagnostics>,
    /// The live positions of each match formed (`Spec::sel`), and its output.
    sel: Vec<u32>,
    staged: Staged,
}

/// What one seed's try found.
#[derive(Clone, Copy, Debug, Default)]
struct Spec {
    /// The matches committed when the try began.
    began: u32,
    /// The lowest and highest slot the try read.
    lo: u32,
    hi: u32,
    /// The rulesets tried (a bit each), and their records: `Chunk::tried[tried.0..tried.1]`.
    rulesets: u32,
    tried: (u32, u32),
    /// The match formed (`Chunk::staged`'s index), and its tickets: `Chunk::sel[sel.0..sel.1]`.
    formed: Option<u32>,
    sel: (u32, u32),
    /// `SeedTry::own_tickets_only`: only the matching of one of `sel` since makes the try stale.
    own_tickets_only: bool,
}

impl Chunk {
    /// Asks for every line of the chunk's tries at once (`Staged::prefetch`).
    fn prefetch(&self) {
        prefetch_range(&self.specs, 0, self.specs.len());
        prefetch_range(&self.tried, 0, self.tried.len());
        prefetch_range(&self.sel, 0, self.sel.len());
        self.staged.prefetch();
    }

    /// Tries the seeds `by_age[seeds]` against the pool as it stands. A seed already used gets an empty
    /// spec: it stays used, and its commit skips it.
    fn try_seeds<M: HostMask>(&mut self, w: &mut Worker, tries: &Tries<'_, '_>, seeds: std::ops::Range<usize>) {
        let Tries { ctx, params, links, valid, progress, layout: (f, row), .. } = *tries;
        let s = ctx.s;
        self.specs.clear();
        self.tried.clear();
        self.sel.clear();
        self.staged.clear();
        for k in seeds {
            prefetch_seeds(s, links, f, row, &s.by_age, k);
            let q = s.by_age[k] as u32 as usize;
            if s.is_used(q) {
                self.specs.push(Spec::default());
                continue;
            }
            // Before the try reads the pool: every match counted here is in what it reads.
            let began = progress.matches.load(Acquire);
            let mut span = Span::new(links, s.cur[q] + 1);
            let (tried_at, sel_at) = (self.tried.len() as u32, self.sel.len() as u32);
            let memory = (&mut w.scratch, &mut w.local[..], &mut self.tried, &mut self.staged);
            let SeedTry { formed, rulesets, own_tickets_only } =
                try_and_stage::<M, Span>(ctx, params, &mut span, q, valid, memory);
            if formed.is_some() {
                self.sel.extend_from_slice(&w.scratch.sel);
            }
            self.specs.push(Spec {
                began,
                lo: span.lo,
                hi: span.hi,
                rulesets,
                tried: (tried_at, self.tried.len() as u32),
                formed: formed.map(|m| m as u32),
                sel: (sel_at, self.sel.len() as u32),
                own_tickets_only,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_answer_for_matches_after_a_try_began() {
        let mut stamps = Stamps::default();
        stamps.clear(254);
        stamps.stamp(&[69], 3); // slot 70, by the third match
        assert!(stamps.any_since(70, 70, 2) && stamps.any_since(0, 255, 0));
        assert!(!stamps.any_since(70, 70, 3), "a try that began after the third match saw it");
        assert!(!stamps.any_since(0, 69, 0) && !stamps.any_since(71, 255, 0));
        assert!(stamps.any_of_since(&[1, 69], 2) && !stamps.any_of_since(&[1, 70], 0));
        stamps.clear(254);
        assert!(!stamps.any_since(0, 255, 0));
    }

    #[test]
    fn progress_claims_chunks_in_order_within_the_ring() {
        let progress = Progress::new(10, 10 + 3 * CHUNK + 1, 2, 0);
        assert_eq!(progress.chunks, 4);
        assert!(matches!(progress.claim(), Claim::Chunk(0)));
        assert!(matches!(progress.claim(), Claim::Chunk(1)));
        assert!(matches!(progress.claim(), Claim::Wait), "two chunks in flight fill a ring of two");
        progress.committed.store(1, Release);
        assert!(matches!(progress.claim(), Claim::Chunk(2)));
        assert_eq!(progress.seeds(3), 10 + 3 * CHUNK..11 + 3 * CHUNK);
        progress.committed.store(3, Release);
        progress.halt.store(true, Relaxed);
        assert!(matches!(progress.claim(), Claim::Done));
    }
}
