//! Rule diagnostics (docs/rule-diagnostics.md): a pool built to fail on one rule counts that rule,
//! and nothing else; the counts' layout; what a formed match and a reused workspace leave behind.
//! Rows are compared as `RuleDiagnostics::columns()`: skill_spread, team_imbalance,
//! no_acceptable_host, attributes, party_size, failed, examined. Each pool also checks the per-ticket
//! record (`TicketRefusal`): every waiting ticket names the rule its pool was built to fail on.
mod common;

use common::{params, ruleset, run_diagnosed, run_recorded, Pool};
use matchmaker_engine::{
    run_tick, EngineError, FilterMode, MatchOutput, OutputCapacity, Rejection, RelaxationStep, RuleDiagnostics,
    Ruleset, TicketRefusal, Workspace,
};
use proptest::prelude::*;

const NOW: f64 = 1_000_000.0;

/// A ruleset of `teams` x `team_size` with no skill bound and no balance bound.
fn unbounded(teams: u32, team_size: u32) -> Ruleset<'static> {
    Ruleset { max_skill_spread: f64::INFINITY, ..ruleset(teams, team_size) }
}

/// Match shapes of at least two players (a one-player match forms around any seed).
fn shape() -> impl Strategy<Value = (u32, u32)> {
    (1u32..=3, 1u32..=3).prop_map(|(teams, size)| if teams * size == 1 { (1, 2) } else { (teams, size) })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every pair incompatible on the one filter: each seed examines every other ticket and the
    /// attribute rule turns each one away.
    #[test]
    fn tickets_incompatible_by_attributes_count_attributes(
        tickets in prop::collection::vec((0.0f64..1.0, 0.0f64..100_000.0), 2..40),
        (teams, team_size) in shape(),
        containment in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mode = if containment { FilterMode::Containment } else { FilterMode::Overlap };
        let mut pool = Pool::new(vec![mode], 0);
        for (i, &(mmr, wait)) in tickets.iter().enumerate() {
            let t = pool.add(1, mmr, NOW - wait, 1);
            // Value i, accepting only itself: incompatible with every other ticket in either mode.
            pool.set_attr(t, 0, 1 << i, 1 << i);
        }
        let rs = [unbounded(teams, team_size)];
        let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, seed));
        prop_assert!(matches.is_empty());
        prop_assert!(refusals.iter().all(|&c| c == TicketRefusal::Rejected(Rejection::Attributes).code()), "{:?}", refusals);
        let n = tickets.len() as u64;
        prop_assert_eq!(d[0].columns(), [0, 0, 0, n * (n - 1), 0, n, n * (n - 1)]);
    }

    /// Skills a full normalized unit apart under a narrower spread: no seed finds anyone in its window,
    /// and each neighbour just beyond it counts once per side.
    #[test]
    fn tickets_beyond_each_others_spread_count_skill_spread(
        waits in prop::collection::vec(0.0f64..100_000.0, 2..40),
        spread in 0.0f64..0.9,
        (teams, team_size) in shape(),
        seed in any::<u64>(),
    ) {
        let mut pool = Pool::new(vec![], 0);
        for (i, &wait) in waits.iter().enumerate() {
            pool.add(1, i as f64 * 0.1, NOW - wait, 1);
        }
        let rs = [Ruleset { max_skill_spread: spread, ..ruleset(teams, team_size) }];
        let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, seed));
        prop_assert!(matches.is_empty());
        prop_assert!(refusals.iter().all(|&c| c == TicketRefusal::Rejected(Rejection::SkillSpread).code()), "{:?}", refusals);
        let n = waits.len() as u64;
        prop_assert_eq!(d[0].columns(), [2 * (n - 1), 0, 0, 0, 0, n, 0]);
    }

    /// Parties larger than a team: each seed fails before it looks at anyone.
    #[test]
    fn parties_larger_than_a_team_count_party_size(
        tickets in prop::collection::vec((1u8..=3, 0.0f64..1.0, 0.0f64..100_000.0), 1..40),
        teams in 1u32..=3,
        team_size in 1u32..=4,
        seed in any::<u64>(),
    ) {
        let mut pool = Pool::new(vec![], 0);
        for &(extra, mmr, wait) in &tickets {
            pool.add(team_size as u8 + extra, mmr, NOW - wait, 1);
        }
        let rs = [unbounded(teams, team_size)];
        let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, seed));
        prop_assert!(matches.is_empty());
        prop_assert!(refusals.iter().all(|&c| c == TicketRefusal::Rejected(Rejection::PartySize).code()), "{:?}", refusals);
        let n = tickets.len() as u64;
        prop_assert_eq!(d[0].columns(), [0, 0, 0, 0, n, n, 0]);
    }

    /// `require_host` and every host beyond even the relaxed latency bound (or no host at all): the
    /// tickets are set aside before the search, and each counts once.
    #[test]
    fn tickets_without_an_acceptable_host_count_no_acceptable_host(
        tickets in prop::collection::vec((0.0f64..1.0, 0.0f64..100_000.0), 1..40),
        hosts in 0usize..=4,
        bound in 0u32..300,
        beyond in prop::collection::vec(1u16..1000, 4),
        (teams, team_size) in shape(),
        seed in any::<u64>(),
    ) {
        let relax = [RelaxationStep { after_wait_ms: 50_000.0, max_skill_spread: f64::INFINITY, max_latency_ms: bound + 100 }];
        let widest = (bound + 100) as u16;
        let mut pool = Pool::new(vec![], hosts);
        for &(mmr, wait) in &tickets {
            let t = pool.add(1, mmr, NOW - wait, 1);
            let lat: Vec<u16> = beyond[..hosts].iter().map(|&b| widest + b).collect();
            pool.set_latency(t, &lat);
        }
        let rs = [Ruleset { require_host: true, max_latency_ms: bound, relaxation: &relax, ..unbounded(teams, team_size) }];
        let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, seed));
        prop_assert!(matches.is_empty());
        prop_assert!(refusals.iter().all(|&c| c == TicketRefusal::Rejected(Rejection::NoAcceptableHost).code()), "{:?}", refusals);
        let n = tickets.len() as u64;
        prop_assert_eq!(d[0].columns(), [0, 0, n, 0, 0, n, 0]);
    }

    /// 1v1 between skills a full unit apart, under a tighter balance bound: each seed fills its match
    /// with its nearest neighbour, and the balance rule refuses it.
    #[test]
    fn full_matches_too_unbalanced_count_team_imbalance(
        waits in prop::collection::vec(0.0f64..100_000.0, 2..40),
        imbalance in 0.0f64..0.9,
        seed in any::<u64>(),
    ) {
        let mut pool = Pool::new(vec![], 0);
        for (i, &wait) in waits.iter().enumerate() {
            pool.add(1, i as f64 * 0.1, NOW - wait, 1);
        }
        let rs = [Ruleset { max_team_imbalance: imbalance, ..unbounded(2, 1) }];
        let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, seed));
        prop_assert!(matches.is_empty());
        prop_assert!(refusals.iter().all(|&c| c == TicketRefusal::Rejected(Rejection::TeamImbalance).code()), "{:?}", refusals);
        let n = waits.len() as u64;
        prop_assert_eq!(d[0].columns(), [0, n, 0, 0, 0, n, n]);
    }
}

#[test]
fn a_ticket_inside_the_window_that_widens_the_spread_too_far_counts_skill_spread() {
    // 1x3 within 0.6 normalized units (0.06 raw) of each other: 0.45 and 0.55 are each within reach
    // of 0.50 but not of each other.
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.50, NOW - 30.0, 1);
    pool.add(1, 0.45, NOW - 20.0, 1);
    pool.add(1, 0.55, NOW - 10.0, 1);
    let rs = [Ruleset { max_skill_spread: 0.6, ..ruleset(1, 3) }];
    let (matches, d) = run_diagnosed(&pool, &params(&pool, &rs, NOW, 1));
    assert!(matches.is_empty());
    // Seed 0.50 takes 0.55 (ties go right), then turns 0.45 away (examined 2). Seeds 0.45 and 0.55
    // each take 0.50 and stop at the other, beyond their window (examined 1 each).
    assert_eq!(d[0].columns(), [3, 0, 0, 0, 0, 3, 4]);
}

#[test]
fn a_party_larger_than_the_room_left_counts_party_size() {
    // 1x2: the solo seeds first and cannot take the duo (one slot left); the duo then fills a team alone.
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW - 10.0, 1);
    let duo = pool.add(2, 0.5, NOW, 1);
    let rs = [ruleset(1, 2)];
    let (matches, d) = run_diagnosed(&pool, &params(&pool, &rs, NOW, 1));
    assert_eq!(matches.len(), 1);
    assert_eq!(matches[0].tickets, [duo as u32]);
    assert_eq!(d[0].columns(), [0, 0, 0, 0, 1, 1, 1]);
}

#[test]
fn tickets_with_no_host_in_common_count_no_acceptable_host() {
    let mut pool = Pool::new(vec![], 2);
    let a = pool.add(1, 0.5, NOW - 10.0, 1);
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_latency(a, &[50, 500]);
    pool.set_latency(b, &[500, 50]);
    let rs = [Ruleset { require_host: true, max_latency_ms: 100, ..ruleset(1, 2) }];
    let (matches, d) = run_diagnosed(&pool, &params(&pool, &rs, NOW, 1));
    assert!(matches.is_empty());
    assert_eq!(d[0].columns(), [0, 0, 2, 0, 0, 2, 2]);
}

#[test]
fn a_seed_without_a_host_fails_in_the_ruleset_that_requires_one_and_plays_in_the_next() {
    // Ticket 0 has no host within 100 ms: not set aside (ruleset 1 needs no host), but as a seed it
    // fails in ruleset 0 at once and forms in ruleset 1.
    let mut pool = Pool::new(vec![], 1);
    let far = pool.add(1, 0.5, NOW - 10.0, 0b11);
    pool.set_latency(far, &[500]);
    pool.add(1, 0.5, NOW, 0b11);
    let rs = [Ruleset { require_host: true, max_latency_ms: 100, ..ruleset(1, 2) }, ruleset(1, 2)];
    let (matches, d) = run_diagnosed(&pool, &params(&pool, &rs, NOW, 1));
    assert_eq!(matches.len(), 1);
    assert_eq!(matches[0].ruleset, 1);
    assert_eq!(d[0].columns(), [0, 0, 1, 0, 0, 1, 0]);
    assert_eq!(d[1], RuleDiagnostics::default());
}

#[test]
fn a_ticket_failing_several_rules_counts_under_the_first_checked() {
    // Incompatible attributes and no host in common: attributes are checked before hosts.
    let mut pool = Pool::new(vec![FilterMode::Overlap], 2);
    let a = pool.add(1, 0.5, NOW - 10.0, 1);
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_attr(a, 0, 0b01, u64::MAX);
    pool.set_attr(b, 0, 0b10, u64::MAX);
    pool.set_latency(a, &[50, 500]);
    pool.set_latency(b, &[500, 50]);
    let rs = [Ruleset { require_host: true, max_latency_ms: 100, ..ruleset(1, 2) }];
    let (_, d) = run_diagnosed(&pool, &params(&pool, &rs, NOW, 1));
    assert_eq!(d[0].rejected(Rejection::Attributes), 2);
    assert_eq!(d[0].rejected(Rejection::NoAcceptableHost), 0);
}

#[test]
fn a_formed_match_discards_its_counts_and_a_pool_too_small_has_no_reason() {
    // The seed turns ticket 1 away (attributes) but forms with ticket 2; ticket 1 then finds no one.
    let mut pool = Pool::new(vec![FilterMode::Overlap], 0);
    let seed = pool.add(1, 0.50, NOW - 10.0, 1);
    let odd = pool.add(1, 0.50, NOW, 1);
    let mate = pool.add(1, 0.52, NOW, 1);
    pool.set_attr(seed, 0, 0b01, u64::MAX);
    pool.set_attr(odd, 0, 0b10, u64::MAX);
    pool.set_attr(mate, 0, 0b01, u64::MAX);
    let rs = [ruleset(1, 2)];
    let (matches, d) = run_diagnosed(&pool, &params(&pool, &rs, NOW, 1));
    assert_eq!(matches.len(), 1);
    assert_eq!(d[0].columns(), [0, 0, 0, 0, 0, 1, 0]);
}

#[test]
fn counts_are_zeroed_every_tick_and_kept_on_error() {
    let mut pool = Pool::new(vec![], 0);
    for i in 0..4 {
        pool.add(9, 0.1 * f64::from(i), NOW, 1);
    }
    let rs = [ruleset(2, 5), ruleset(1, 1)];
    let mut ws = Workspace::new();
    assert!(ws.rule_diagnostics().is_empty());
    let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(4, 0, 0));
    let p = params(&pool, &rs, NOW, 1);
    // Ruleset 1 is in no ticket's mask: zeros.
    for _ in 0..2 {
        assert_eq!(run_tick(&pool.columns(), &p, &mut ws, &mut out.buffers()), Ok(0));
        let want = [[0, 0, 0, 0, 4, 4, 0], [0; 7]];
        assert_eq!(ws.rule_diagnostics().iter().map(RuleDiagnostics::columns).collect::<Vec<_>>(), want);
    }
    // Refused input (a NaN skill bound): nothing written, the last tick's counts stay.
    let bad = [Ruleset { max_skill_spread: f64::NAN, ..ruleset(2, 5) }];
    assert!(run_tick(&pool.columns(), &params(&pool, &bad, NOW, 1), &mut ws, &mut out.buffers()).is_err());
    assert_eq!(ws.rule_diagnostics()[0].rejected(Rejection::PartySize), 4);
    // An empty pool: one zeroed record per ruleset.
    let empty = Pool::new(vec![], 0);
    run_tick(&empty.columns(), &params(&empty, &rs[..1], NOW, 1), &mut ws, &mut out.buffers()).unwrap();
    assert_eq!(ws.rule_diagnostics(), [RuleDiagnostics::default()]);
}

/// The name of the refusal recorded for each ticket (`-` for none).
fn names(refusals: &[u8]) -> Vec<&'static str> {
    refusals.iter().map(|&c| TicketRefusal::from_code(c).map_or("-", TicketRefusal::name)).collect()
}

#[test]
fn a_seed_whose_candidates_refused_no_one_records_not_enough_tickets() {
    // 1x3 and two tickets: each seed takes the other and runs out of tickets.
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW - 10.0, 1);
    pool.add(1, 0.6, NOW, 1);
    let rs = [ruleset(1, 3)];
    let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, 1));
    assert!(matches.is_empty());
    assert_eq!(d[0].columns(), [0, 0, 0, 0, 0, 2, 2]);
    assert_eq!(names(&refusals), ["not_enough_tickets", "not_enough_tickets"]);
}

#[test]
fn the_record_names_the_reason_that_counted_most_over_the_seeds_rulesets() {
    // The oldest ticket seeds in ruleset 0 (1x2, 0.5 normalized units: 0.05 raw) and turns away its two
    // neighbours beyond the window (one per side), then in ruleset 1 (1x4, no skill bound) three tickets
    // of another attribute value: attributes (3) counted more than skill_spread (2). The others are in
    // ruleset 1 only, and incompatible with each other or the seed one way or another.
    let mut pool = Pool::new(vec![FilterMode::Overlap], 0);
    let seed = pool.add(1, 0.5, NOW - 100.0, 0b11);
    pool.set_attr(seed, 0, 0b01, u64::MAX);
    for (i, mmr) in [0.3, 0.7].into_iter().enumerate() {
        let t = pool.add(1, mmr, NOW - 10.0 * i as f64, 0b01);
        pool.set_attr(t, 0, 0b01, u64::MAX);
    }
    for i in 0..3 {
        let t = pool.add(1, 0.5, NOW, 0b10);
        pool.set_attr(t, 0, 0b10 << i, u64::MAX);
    }
    let rs = [
        Ruleset { max_skill_spread: 0.5, ..ruleset(1, 2) },
        Ruleset { max_skill_spread: f64::INFINITY, ..ruleset(1, 4) },
    ];
    let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, 1));
    assert!(matches.is_empty());
    let n = names(&refusals);
    assert_eq!(n[seed], "attributes");
    // The two in ruleset 0 alone find no one in their windows. Beyond 0.3's, the nearest ticket is the
    // seed (equal skills go by pool index), which competes in ruleset 0: skill_spread. Beyond 0.7's, a
    // ticket of ruleset 1 only: not counted.
    assert_eq!(n[1..3], ["skill_spread", "not_enough_tickets"]);
    assert_eq!(d[0].rejected(Rejection::SkillSpread), 3);
}

#[test]
fn a_seed_that_failed_and_was_then_matched_records_nothing() {
    // Ruleset 0 is 1x2. The oldest ticket's nearest 70 neighbours (on its left, nearer than its partner
    // on the right) compete only in ruleset 1: its scan examines its cap of 64 of them and stops, short of
    // players. The partner seeds next, finds it first and forms the match. The neighbours are parties of 2
    // in a 1x1 ruleset: each fails at once on party_size.
    let mut pool = Pool::new(vec![], 0);
    let oldest = pool.add(1, 0.5, NOW - 100.0, 0b01);
    let partner = pool.add(1, 0.53, NOW - 50.0, 0b01);
    for i in 0..70 {
        pool.add(2, 0.499 - 0.0001 * f64::from(i), NOW, 0b10);
    }
    let rs = [ruleset(1, 2), ruleset(1, 1)];
    let (matches, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, 1));
    assert_eq!(matches.len(), 1);
    assert_eq!(matches[0].sorted_tickets(), [oldest as u32, partner as u32]);
    // The oldest's candidate failed (no rejection: not enough tickets in reach), then it was matched.
    assert_eq!(d[0].columns(), [0, 0, 0, 0, 0, 1, 64]);
    let n = names(&refusals);
    assert_eq!((n[oldest], n[partner]), ("-", "-"));
    assert!(n[2..].iter().all(|&r| r == "party_size"), "{n:?}");
}

#[test]
fn tickets_set_aside_record_no_acceptable_host_and_tickets_of_no_ruleset_record_nothing() {
    let mut pool = Pool::new(vec![], 1);
    let far = pool.add(1, 0.5, NOW - 10.0, 0b01);
    pool.set_latency(far, &[500]);
    let stray = pool.add(1, 0.5, NOW, 0b100);
    let rs = [Ruleset { require_host: true, max_latency_ms: 100, ..ruleset(1, 2) }];
    let (_, d, refusals) = run_recorded(&pool, &params(&pool, &rs, NOW, 1));
    assert_eq!(d[0].columns(), [0, 0, 1, 0, 0, 1, 0]);
    assert_eq!(names(&refusals), ["no_acceptable_host", "-"]);
    assert_eq!((far, stray), (0, 1));
}

#[test]
fn the_record_is_rewritten_every_tick_and_refused_when_too_short() {
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW - 10.0, 1);
    pool.add(1, 0.5, NOW, 1);
    let rs = [ruleset(1, 3)];
    let p = params(&pool, &rs, NOW, 1);
    let mut ws = Workspace::new();
    let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(2, 0, 0)).recording_refusals();
    run_tick(&pool.columns(), &p, &mut ws, &mut out.buffers()).unwrap();
    assert_eq!(names(out.ticket_refusals.as_deref().unwrap()), ["not_enough_tickets", "not_enough_tickets"]);
    // A 1x2 ruleset now: both matched, both records cleared.
    let pairs = [ruleset(1, 2)];
    assert_eq!(run_tick(&pool.columns(), &params(&pool, &pairs, NOW, 1), &mut ws, &mut out.buffers()), Ok(1));
    assert_eq!(names(out.ticket_refusals.as_deref().unwrap()), ["-", "-"]);
    // One byte short: refused before anything is written.
    out.ticket_refusals = Some(vec![9]);
    let err = run_tick(&pool.columns(), &p, &mut ws, &mut out.buffers()).unwrap_err();
    assert_eq!(err, EngineError::BufferTooSmall { buffer: "ticket_refusals", required: 2, actual: 1 });
    assert_eq!(out.ticket_refusals, Some(vec![9]));
}
