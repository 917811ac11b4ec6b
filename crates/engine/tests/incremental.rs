//! Ticks that update the layout they kept (`run_tick_changed`, docs/engine.md "Incremental ticks") write
//! what a tick laying the same pool out afresh (`run_tick`) writes, bit for bit, on pools large enough to
//! compact during the search, through many ticks of churn, on one thread and on several.

mod common;

use common::{generate, Pool, Rng, NOW};
use matchmaker_engine::{
    run_tick, run_tick_changed, Curve, Expansion, FilterMode, MatchOutput, OutputCapacity, PoolChanges, RelaxationStep,
    Ruleset, TickParams, Workspace,
};

const FILTERS: [FilterMode; 3] = [FilterMode::Overlap, FilterMode::Containment, FilterMode::Overlap];
const RELAX: [RelaxationStep; 1] =
    [RelaxationStep { after_wait_ms: 30_000.0, max_skill_spread: 1.0, max_latency_ms: 200 }];

fn rulesets() -> [Ruleset<'static>; 2] {
    [
        Ruleset {
            teams: 2,
            team_size: 5,
            max_skill_spread: 0.5,
            max_team_imbalance: 0.2,
            max_latency_ms: 120,
            require_host: true,
            relaxation: &RELAX,
            expansion: Expansion {
                curve: Curve::Exponential,
                over_ms: 2_000.0,
                max_skill_spread: f64::INFINITY,
                max_team_imbalance: f64::INFINITY,
                max_latency_ms: 120,
                any_host_after_ms: 10_000.0,
            },
        },
        Ruleset {
            teams: 1,
            team_size: 2,
            max_skill_spread: 0.3,
            max_team_imbalance: 0.0,
            max_latency_ms: 90,
            require_host: true,
            relaxation: &[],
            expansion: Expansion::NONE,
        },
    ]
}

/// `ticks` ticks over a pool of `n` generated tickets (skills spread over `scale`, so a larger scale leaves
/// more of them waiting), each followed by churn: the matched tickets leave, about 1% more leave, 0.5% are
/// rewritten, and about 2% arrive (at whole milliseconds, so arrivals tie). Each tick's output, rule
/// diagnostics and refusal record are compared with a fresh tick's on the same pool.
fn churn(n: usize, scale: f64, ticks: usize, mut kept: Workspace) {
    let rs = rulesets();
    let mut pool = generate(n, 11, &FILTERS, 8, 5, &[1, 1, 3, 2]);
    pool.mmr_mean.iter_mut().for_each(|m| *m *= scale);
    let mut arrivals = generate(n, 12, &FILTERS, 8, 5, &[1, 1, 3, 2]);
    arrivals.mmr_mean.iter_mut().for_each(|m| *m *= scale);
    let mut next_arrival = 0;
    let mut rng = Rng(5);
    let (mut changed, mut previous_len) = (Vec::<u32>::new(), 0);
    let mut laid_out_again = 0;
    for t in 0..ticks {
        let now_ms = NOW + 250.0 * t as f64;
        let params = TickParams {
            mmr_normalization_ref: 0.1,
            party_synergy_bonus: 0.01,
            filters: &FILTERS,
            rulesets: &rs,
            now_ms,
            seed: 100 + t as u64,
        };
        let cap = OutputCapacity::for_pool(pool.len(), FILTERS.len(), 8);
        let mut ours = MatchOutput::with_capacity(cap).recording_refusals();
        let mut fresh = MatchOutput::with_capacity(cap).recording_refusals();
        let changes = PoolChanges { previous_len, rows: &changed };
        let count = run_tick_changed(&pool.columns(), &changes, &params, &mut kept, &mut ours.buffers()).unwrap();
        let mut ws = Workspace::new();
        let want = run_tick(&pool.columns(), &params, &mut ws, &mut fresh.buffers()).unwrap();
        assert_eq!(count, want, "tick {t}: matches");
        assert!(ours == fresh, "tick {t}: output");
        assert_eq!(kept.rule_diagnostics(), ws.rule_diagnostics(), "tick {t}: rule diagnostics");
        laid_out_again += usize::from(!kept.updated_layout());

        previous_len = pool.len();
        changed.clear();
        let mut matched: Vec<usize> =
            ours.match_tickets[..ours.match_offsets[count] as usize].iter().map(|&i| i as usize).collect();
        matched.sort_unstable_by(|a, b| b.cmp(a));
        let remove =
            |pool: &mut Pool, i: usize, changed: &mut Vec<u32>| changed.extend(pool.swap_remove(i).map(|r| r as u32));
        for i in matched {
            remove(&mut pool, i, &mut changed);
        }
        for _ in 0..pool.len() / 100 {
            let i = rng.below(pool.len() as u64) as usize;
            remove(&mut pool, i, &mut changed);
        }
        for _ in 0..pool.len() / 200 {
            let i = rng.below(pool.len() as u64) as usize;
            pool.put(i, &arrivals, rng.below(n as u64) as usize);
            changed.push(i as u32);
        }
        for _ in 0..n / 50 {
            let i = pool.len();
            pool.put(i, &arrivals, next_arrival % n);
            next_arrival += 1;
            pool.arrival_ms[i] = (now_ms + rng.below(250) as f64).floor();
            if i < previous_len {
                changed.push(i as u32);
            }
        }
    }
    // The first tick, and the second, after most of the pool matched (past a quarter of the pool changed).
    assert_eq!(laid_out_again, 2, "only the first two ticks lay the pool out whole");
}

/// A tick whose search compacted the live arrays keeps the layout as it laid it out: ticked again with no
/// change (a match the host did not apply, say), the pool gives the same matches as afresh.
#[test]
fn a_layout_kept_through_compaction() {
    let rs = rulesets();
    let pool = generate(4_000, 3, &FILTERS, 8, 5, &[1, 3]);
    let mut kept = Workspace::new();
    for (t, previous_len) in [(0, 0), (1, pool.len()), (2, pool.len())] {
        let params = TickParams {
            mmr_normalization_ref: 0.1,
            party_synergy_bonus: 0.01,
            filters: &FILTERS,
            rulesets: &rs,
            now_ms: NOW + 250.0 * t as f64,
            seed: t,
        };
        let cap = OutputCapacity::for_pool(pool.len(), FILTERS.len(), 8);
        let (mut ours, mut fresh) = (MatchOutput::with_capacity(cap), MatchOutput::with_capacity(cap));
        let changes = PoolChanges { previous_len, rows: &[] };
        let count = run_tick_changed(&pool.columns(), &changes, &params, &mut kept, &mut ours.buffers()).unwrap();
        run_tick(&pool.columns(), &params, &mut Workspace::new(), &mut fresh.buffers()).unwrap();
        assert!(ours == fresh, "tick {t}");
        assert_eq!(kept.updated_layout(), t > 0, "tick {t}");
        // Most of the pool matched: the search compacted.
        assert!(ours.match_offsets[count] as usize > pool.len() / 2, "tick {t}");
    }
}

#[test]
fn a_matching_pool_through_churn() {
    churn(3_000, 1.0, 6, Workspace::new());
}

#[test]
fn a_waiting_pool_through_churn() {
    churn(5_000, 300.0, 12, Workspace::new());
}

#[test]
fn a_waiting_pool_through_churn_on_threads() {
    churn(5_000, 300.0, 8, common::threaded(2));
}

/// A refused tick forgets the kept layout: the next lays the pool out whole, whatever changes it is given.
#[test]
fn a_refused_tick_forgets_the_kept_layout() {
    let rs = rulesets();
    let pool = generate(1_000, 4, &FILTERS, 8, 5, &[1, 3]);
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: 0.01,
        filters: &FILTERS,
        rulesets: &rs,
        now_ms: NOW,
        seed: 1,
    };
    let cap = OutputCapacity::for_pool(pool.len(), FILTERS.len(), 8);
    let mut out = MatchOutput::with_capacity(cap);
    let mut kept = Workspace::new();
    let unchanged = PoolChanges { previous_len: pool.len(), rows: &[] };
    run_tick_changed(
        &pool.columns(),
        &PoolChanges { previous_len: 0, rows: &[] },
        &params,
        &mut kept,
        &mut out.buffers(),
    )
    .unwrap();
    run_tick_changed(&pool.columns(), &unchanged, &params, &mut kept, &mut out.buffers()).unwrap();
    assert!(kept.updated_layout());
    // Rows past both lengths were written and removed since: they change nothing.
    let gone = PoolChanges { previous_len: pool.len(), rows: &[5_000] };
    run_tick_changed(&pool.columns(), &gone, &params, &mut kept, &mut out.buffers()).unwrap();
    assert!(kept.updated_layout());
    let mut short = MatchOutput::with_capacity(OutputCapacity::for_pool(10, FILTERS.len(), 8));
    assert!(run_tick_changed(&pool.columns(), &unchanged, &params, &mut kept, &mut short.buffers()).is_err());
    run_tick_changed(&pool.columns(), &unchanged, &params, &mut kept, &mut out.buffers()).unwrap();
    assert!(!kept.updated_layout());
}
