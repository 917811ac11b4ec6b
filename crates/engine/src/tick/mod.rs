//! The matching algorithm: one tick over one queue's pool. `run_tick` validates every input before
//! anything here runs, so the indexing below cannot go out of bounds.
//!
//! A tick by module: [`layout`] re-lays the pool out in skill order and builds the seed order (with
//! [`sort`]'s radix sort and [`classes`]' attribute classes); this file's seed loop takes the seeds
//! oldest first and asks [`search`] to grow a match around each (latency tests in [`lanes`], teams
//! evened out by [`balance`], the candidate held in [`scratch`]); [`emit`] writes each formed match to
//! the caller's buffers.

mod balance;
mod classes;
mod compact;
mod emit;
mod first_pass;
mod kept;
mod lanes;
mod layout;
mod links;
mod packing;
mod refusals;
mod scratch;
mod search;
mod seed;
mod sort;
mod speculate;
#[cfg(test)]
mod test_pool;

pub(crate) use emit::Staged;
pub(crate) use lanes::host_words;
pub(crate) use layout::Sorted;
pub(crate) use links::Links;
pub(crate) use scratch::Scratch;
pub(crate) use speculate::Threads;

use crate::{MatchBuffers, PoolChanges, PoolColumns, RuleDiagnostics, TickParams, Workspace};
use kept::Kept;
use lanes::{row_words, HostMask, WideHosts};
use layout::{prefetch, prefetch_range, prepare, valid_rulesets};
use refusals::Refusals;
use seed::{reborrow, try_and_stage, Commit, TryMemory};

/// The seed loop: every ticket that could be in a match seeds once, oldest first, and the first of its
/// rulesets (by index) to form a match around it wins. Returns the number of matches written to `out`.
/// With `changes`, the workspace keeps the tick's layout for the next, and updates the last one by
/// them when it can (tick/kept.rs).
pub(crate) fn run(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    changes: Option<&PoolChanges<'_>>,
    ws: &mut Workspace,
    out: &mut MatchBuffers<'_>,
) -> usize {
    let n = pool.len();
    out.match_offsets[0] = 0;
    // Zeroed in place: the records only grow (to at most 32), so this does not allocate.
    ws.diagnostics.clear();
    ws.diagnostics.resize(params.rulesets.len(), RuleDiagnostics::default());
    let mut refusals = Refusals::new(out.ticket_refusals.take(), pool, valid_rulesets(params));
    let matches = if n == 0 || params.rulesets.is_empty() {
        ws.sorted.kept.forget();
        0
    } else if pool.host_count > 64 {
        seed_loop::<WideHosts>(pool, params, changes, ws, out, &mut refusals)
    } else {
        seed_loop::<u64>(pool, params, changes, ws, out, &mut refusals)
    };
    out.ticket_refusals = refusals.into_inner();
    matches
}

/// `M` holds a set of the queue's hosts: u64 up to 64 hosts, so such queues pay nothing for wider ones.
fn seed_loop<'o, M: HostMask + Send + Sync>(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    changes: Option<&PoolChanges<'_>>,
    ws: &mut Workspace,
    out: &mut MatchBuffers<'o>,
    refusals: &mut Refusals<'o>,
) -> usize {
    let updated = changes
        .is_some_and(|c| Kept::update(&mut ws.sorted, pool, params, c, &mut ws.diagnostics, ws.threads.as_ref()));
    if !updated {
        prepare(pool, params, &mut ws.sorted, &mut ws.diagnostics, ws.threads.as_ref());
        if changes.is_some() {
            Kept::record(&mut ws.sorted, pool, params);
        } else {
            ws.sorted.kept.forget();
        }
    }
    let Workspace { sorted, links, scratch, diagnostics, local, tried, staged, threads } = ws;
    scratch.set_filters(params.filters);
    links.reset(sorted.live);
    local.clear();
    local.resize(params.rulesets.len(), RuleDiagnostics::default());
    let (f, h) = (pool.filter_count, pool.host_count);
    let mut commit = Commit::new(params, out, refusals, diagnostics, (f, h, row_words(h)));
    match threads {
        Some(threads) if threads.worth_it(sorted.live) => {
            threads.seed_loop::<M>(sorted, links, (scratch, local, tried, staged), &mut commit);
        }
        _ => one_by_one::<M>(sorted, links, (scratch, local, tried, staged), &mut commit),
    }
    sorted.restore();
    commit.matches
}

/// The seed loop on the calling thread: each seed tries and commits in turn.
fn one_by_one<M: HostMask>(
    sorted: &mut Sorted,
    links: &mut Links,
    mut memory: TryMemory<'_>,
    commit: &mut Commit<'_, '_>,
) {
    let valid = valid_rulesets(commit.params);
    for k in 0..sorted.by_age.len() {
        prefetch_seeds(sorted, links, commit.f, commit.row, &sorted.by_age, k);
        let q = sorted.by_age[k] as u32 as usize;
        if sorted.is_used(q) {
            continue;
        }
        let (_, compact) = try_and_commit::<M>(sorted, links, q, valid, reborrow(&mut memory), commit);
        if compact {
            commit.compact(sorted, links, false);
        }
    }
}

/// Tries the seed at skill position `q` against the pool as it is and commits what it found; answers
/// whether it formed a match (of the selection in the scratch) and whether the live arrays are due for
/// compaction (`Commit::seed`).
fn try_and_commit<M: HostMask>(
    sorted: &Sorted,
    mut links: &Links,
    q: usize,
    valid: u32,
    memory: TryMemory<'_>,
    commit: &mut Commit<'_, '_>,
) -> (bool, bool) {
    let ctx = commit.ctx(sorted);
    let (scratch, local, tried, staged) = memory;
    tried.clear();
    staged.clear();
    let found = try_and_stage::<M, &Links>(&ctx, commit.params, &mut links, q, valid, (scratch, local, tried, staged));
    let formed = found.formed.map(|k| (&scratch.sel[..], commit.staged(staged, k)));
    let was_formed = formed.is_some();
    (was_formed, commit.seed(sorted, links, q, (found.rulesets, tried), formed))
}

/// Seeds jump around in skill order, so their data is cold. Two-stage prefetch ahead of seed `k` of
/// `seeds` (entries of `Sorted::by_age`): the live position of a far seed, then, if it is still unused,
/// its neighbourhood in every stream.
#[inline(always)]
fn prefetch_seeds(sorted: &Sorted, links: &Links, f: usize, row: usize, seeds: &[u64], k: usize) {
    const FAR: usize = 16;
    const NEAR: usize = 6;
    const SPAN: usize = 16;
    if let Some(&e) = seeds.get(k + FAR) {
        if !sorted.is_used(e as u32 as usize) {
            prefetch(&sorted.cur, e as u32 as usize);
            prefetch(&sorted.arrival, e as u32 as usize);
        }
    }
    if let Some(&e) = seeds.get(k + NEAR) {
        if !sorted.is_used(e as u32 as usize) {
            let q = sorted.cur[e as u32 as usize] as usize;
            let (a, b) = (q.saturating_sub(SPAN), q + SPAN);
            prefetch_range(&links.next, a, b + 2);
            prefetch_range(&sorted.hot, a, b + 2);
            if !sorted.interned {
                prefetch_range(&sorted.attrs, a * 2 * f, b * 2 * f);
            }
            prefetch_range(&sorted.rows, a * row, b * row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_pool::TestPool;
    use super::*;
    use crate::{MatchOutput, OutputCapacity, RelaxationStep, Ruleset};

    fn pairs(relaxation: &[RelaxationStep], max_skill_spread: f64) -> Ruleset<'_> {
        Ruleset {
            teams: 1,
            team_size: 2,
            max_skill_spread,
            max_team_imbalance: f64::INFINITY,
            max_latency_ms: 100,
            require_host: false,
            relaxation,
            expansion: crate::Expansion::NONE,
        }
    }

    /// Runs one tick; answers each match's pool indices.
    fn tick(pool: &TestPool, rulesets: &[Ruleset<'_>]) -> Vec<Vec<u32>> {
        let params = TickParams {
            mmr_normalization_ref: 0.1,
            party_synergy_bonus: 0.0,
            filters: &[],
            rulesets,
            now_ms: 100.0,
            seed: 3,
        };
        let columns = pool.columns();
        let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(columns.len(), 0, 0));
        let matches = run(&columns, &params, None, &mut Workspace::new(), &mut out.buffers());
        let o = &out.match_offsets;
        (0..matches).map(|m| out.match_tickets[o[m] as usize..o[m + 1] as usize].to_vec()).collect()
    }

    #[test]
    fn the_oldest_seeds_first_and_takes_its_nearest() {
        let mut pool = TestPool::new(0, 0);
        pool.ticket(1, 0.50, 0.0).ticket(1, 0.52, 10.0).ticket(1, 0.90, 5.0).ticket(1, 0.88, 20.0);
        // Older than all, in no ruleset of the queue: never matched.
        pool.ticket(1, 0.51, -5.0).mask(0b10);
        assert_eq!(tick(&pool, &[pairs(&[], f64::INFINITY)]), [[0, 1], [2, 3]]);

        // Ruleset 0 takes no one (a spread of 0); in ruleset 1 the oldest seeds first.
        let mut both = TestPool::new(0, 0);
        for (mmr, arrival) in [(0.50, 0.0), (0.52, 10.0), (0.90, 5.0), (0.88, 20.0)] {
            both.ticket(1, mmr, arrival).mask(0b11);
        }
        both.ticket(1, 0.505, -5.0).mask(0b10);
        assert_eq!(tick(&both, &[pairs(&[], 0.0), pairs(&[], f64::INFINITY)]), [[4, 0], [2, 3]]);
    }

    #[test]
    fn relaxation_widens_the_bounds_of_seeds_that_waited() {
        let relax = [RelaxationStep { after_wait_ms: 50.0, max_skill_spread: f64::INFINITY, max_latency_ms: 100 }];
        let mut pool = TestPool::new(0, 0);
        // Now is 100: ticket 0 waited 100 ms (relaxed), the others 4 to 10 ms (0.1 normalized = 0.01 raw).
        pool.ticket(1, 0.1, 0.0).ticket(1, 0.5, 90.0).ticket(1, 0.52, 95.0).ticket(1, 0.9, 96.0);
        assert_eq!(tick(&pool, &[pairs(&relax, 0.1)]), [[0, 1]]);
        assert_eq!(tick(&pool, &[pairs(&[], 0.1)]), Vec::<Vec<u32>>::new());
    }

    #[test]
    fn valid_rulesets_has_a_bit_per_ruleset() {
        let rs = pairs(&[], 1.0);
        let rulesets = [rs; 32];
        let mask = |n: usize| {
            valid_rulesets(&TickParams {
                mmr_normalization_ref: 0.1,
                party_synergy_bonus: 0.0,
                filters: &[],
                rulesets: &rulesets[..n],
                now_ms: 0.0,
                seed: 0,
            })
        };
        assert_eq!((mask(0), mask(3), mask(31), mask(32)), (0, 0b111, u32::MAX >> 1, u32::MAX));
    }
}
