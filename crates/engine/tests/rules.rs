//! One test (or a few) per documented rule.
mod common;

use common::{check_invariants, params, ruleset, run, try_run, Pool};
use matchmaker_engine::{
    run_tick, Curve, EngineError, Expansion, FilterMode, MatchBuffers, MatchOutput, OutputCapacity, RelaxationStep,
    Ruleset, TickParams, Workspace, NO_HOST,
};

const NOW: f64 = 1_000_000.0;

#[test]
fn one_v_one_pairs_two_solos() {
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW, 1);
    pool.add(1, 0.5, NOW, 1);
    let rs = [ruleset(2, 1)];
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].sorted_tickets(), vec![0, 1]);
    let mut teams = m[0].teams.clone();
    teams.sort_unstable();
    assert_eq!(teams, vec![0, 1]);
    assert_eq!(m[0].preferred_host, NO_HOST);
    assert_eq!(m[0].acceptable_hosts, [0]);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn party_is_never_split_and_teams_are_exact() {
    // 2x3: a party of 3 must be a whole team; two solos + a duo fill the other.
    let mut pool = Pool::new(vec![], 0);
    let trio = pool.add(3, 0.5, NOW - 10.0, 1);
    pool.add(1, 0.5, NOW, 1);
    pool.add(2, 0.5, NOW, 1);
    pool.add(1, 0.5, NOW, 1);
    let rs = [ruleset(2, 3)];
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    let trio_team = m[0].team_of(trio as u32).unwrap();
    // Exactly one ticket on the trio's team.
    assert_eq!(m[0].teams.iter().filter(|&&t| t == trio_team).count(), 1);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn tickets_that_cannot_complete_a_team_are_skipped() {
    // 2x2 with a trio (never fits), two duos and a solo: only the two duos can form a match.
    let mut pool = Pool::new(vec![], 0);
    pool.add(3, 0.5, NOW - 50.0, 1);
    let solo = pool.add(1, 0.5, NOW - 40.0, 1);
    let d1 = pool.add(2, 0.5, NOW, 1);
    let d2 = pool.add(2, 0.5, NOW, 1);
    let rs = [ruleset(2, 2)];
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].sorted_tickets(), vec![d1 as u32, d2 as u32]);
    assert!(m[0].team_of(solo as u32).is_none());
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn bin_packing_mixed_parties() {
    // 2x5 from parties 4,1,3,2 (+ noise): 4+1 and 3+2 is the only packing.
    let mut pool = Pool::new(vec![], 0);
    for (size, mmr) in [(4u8, 0.50), (3, 0.52), (2, 0.49), (1, 0.51)] {
        pool.add(size, mmr, NOW, 1);
    }
    let rs = [ruleset(2, 5)];
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].tickets.len(), 4);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn ruleset_membership_is_respected() {
    // Ruleset 0 is 1v1, ruleset 1 is 2v2. Tickets 0,1 only in ruleset 1; tickets 2,3 only in 0.
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW - 100.0, 0b10);
    pool.add(1, 0.5, NOW - 100.0, 0b10);
    pool.add(1, 0.5, NOW, 0b01);
    pool.add(1, 0.5, NOW, 0b01);
    let rs = [ruleset(2, 1), ruleset(2, 2)];
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    // Ruleset 1 needs 4 players but only 2 tickets compete in it: just the 1v1 forms.
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].ruleset, 0);
    assert_eq!(m[0].sorted_tickets(), vec![2, 3]);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn ruleset_bits_beyond_the_ruleset_count_are_ignored() {
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW, 0b100);
    pool.add(1, 0.5, NOW, 0b100);
    let rs = [ruleset(2, 1)];
    assert!(run(&pool, &params(&pool, &rs, NOW, 1)).is_empty());
}

#[test]
fn ticket_in_at_most_one_match_across_rulesets() {
    let mut pool = Pool::new(vec![], 0);
    for _ in 0..6 {
        pool.add(1, 0.5, NOW, 0b11);
    }
    let rs = [ruleset(2, 1), ruleset(1, 2)];
    let p = params(&pool, &rs, NOW, 3);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 3);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn preferred_host_is_lowest_cost_then_lowest_index() {
    let mut pool = Pool::new(vec![], 4);
    let a = pool.add(1, 0.5, NOW, 1);
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_latency(a, &[90, 40, 40, 500]);
    pool.set_latency(b, &[30, 60, 60, 10]);
    let mut rs = [ruleset(2, 1)];
    rs[0].max_latency_ms = 100;
    rs[0].require_host = true;
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    // Costs: h0 90, h1 60, h2 60, h3 500 (over the bound). h1 and h2 tie: lowest index wins.
    assert_eq!(m[0].acceptable_hosts, [0b0111]);
    assert_eq!(m[0].preferred_host, 1);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn require_host_blocks_matches_without_acceptable_host() {
    let mut pool = Pool::new(vec![], 2);
    let a = pool.add(1, 0.5, NOW, 1);
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_latency(a, &[50, 300]);
    pool.set_latency(b, &[300, 50]);
    let mut rs = [ruleset(2, 1)];
    rs[0].max_latency_ms = 100;
    rs[0].require_host = true;
    assert!(run(&pool, &params(&pool, &rs, NOW, 1)).is_empty());

    // Without require_host the match forms (once the seed may do without a common host: at once here),
    // with no acceptable host; the host with the lowest worst latency is preferred (300 and 300: the
    // lower index).
    rs[0].require_host = false;
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].preferred_host, 0);
    assert_eq!(m[0].acceptable_hosts, [0]);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn tickets_without_any_acceptable_host_do_not_hide_the_others() {
    // 10,000 tickets at the same skill whose only host is out of reach of every bound (relaxation
    // included) sit between two that fit each other. Before they were set aside, each seed's scan
    // spent its cap of examined tickets on them and the two never met.
    let mut pool = Pool::new(vec![], 1);
    let a = pool.add(1, 0.5, NOW - 1.0, 1);
    for _ in 0..10_000 {
        let far = pool.add(1, 0.5, NOW, 1);
        pool.set_latency(far, &[500]);
    }
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_latency(a, &[10]);
    pool.set_latency(b, &[10]);
    let steps = [RelaxationStep { after_wait_ms: 1_000.0, max_skill_spread: f64::INFINITY, max_latency_ms: 200 }];
    let mut rs = [ruleset(2, 1)];
    rs[0].max_latency_ms = 50;
    rs[0].require_host = true;
    rs[0].relaxation = &steps;
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].sorted_tickets(), vec![a as u32, b as u32]);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn require_host_with_no_hosts_forms_nothing() {
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW, 1);
    pool.add(1, 0.5, NOW, 1);
    let mut rs = [ruleset(2, 1)];
    rs[0].require_host = true;
    assert!(run(&pool, &params(&pool, &rs, NOW, 1)).is_empty());
}

#[test]
fn default_latency_applied_by_host_is_just_a_cost() {
    // The host fills unmeasured players with default_latency_ms (150): acceptable at 150, not 149.
    let mut pool = Pool::new(vec![], 1);
    let a = pool.add(1, 0.5, NOW, 1);
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_latency(a, &[matchmaker_engine::DEFAULT_LATENCY_MS]);
    pool.set_latency(b, &[20]);
    let mut rs = [ruleset(2, 1)];
    rs[0].require_host = true;
    rs[0].max_latency_ms = 150;
    let m = run(&pool, &params(&pool, &rs, NOW, 1));
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].preferred_host, 0);
    rs[0].max_latency_ms = 149;
    assert!(run(&pool, &params(&pool, &rs, NOW, 1)).is_empty());
}

#[test]
fn overlap_filter_requires_shared_value() {
    let mut pool = Pool::new(vec![FilterMode::Overlap], 0);
    let a = pool.add(1, 0.5, NOW - 10.0, 1);
    let b = pool.add(1, 0.5, NOW, 1);
    let c = pool.add(1, 0.5, NOW, 1);
    pool.set_attr(a, 0, 0b011, 0b011);
    pool.set_attr(b, 0, 0b100, 0b100); // shares nothing with a
    pool.set_attr(c, 0, 0b010, 0b110); // shares bit 1 with a
    let rs = [ruleset(2, 1)];
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].sorted_tickets(), vec![a as u32, c as u32]);
    assert_eq!(m[0].accepts, vec![0b010]);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn overlap_unspecified_matches_anything_specified() {
    let mut pool = Pool::new(vec![FilterMode::Overlap], 0);
    let a = pool.add(1, 0.5, NOW, 1); // unspecified: values = accepts = MAX
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_attr(b, 0, 0b1000, 0b1000);
    let m = run(&pool, &params(&pool, &[ruleset(2, 1)], NOW, 1));
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].accepts, vec![0b1000]);
    let _ = a;
}

#[test]
fn containment_filter_is_checked_both_ways() {
    let mut pool = Pool::new(vec![FilterMode::Containment], 0);
    let a = pool.add(1, 0.5, NOW - 10.0, 1);
    let b = pool.add(1, 0.5, NOW, 1);
    let c = pool.add(1, 0.5, NOW, 1);
    pool.set_attr(a, 0, 0b01, 0b01); // is X, accepts only X
    pool.set_attr(b, 0, 0b10, 0b11); // is Y, accepts X and Y: a rejects b
    pool.set_attr(c, 0, 0b01, 0b11); // is X, accepts X and Y: compatible with a
    let rs = [ruleset(2, 1)];
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].sorted_tickets(), vec![a as u32, c as u32]);
    assert_eq!(m[0].accepts, vec![0b01]);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn containment_unspecified_is_compatible_with_everyone() {
    let mut pool = Pool::new(vec![FilterMode::Containment], 0);
    pool.add(1, 0.5, NOW, 1); // unspecified: values 0, accepts MAX
    let b = pool.add(1, 0.5, NOW, 1);
    pool.set_attr(b, 0, 0b100, 0b100);
    let m = run(&pool, &params(&pool, &[ruleset(2, 1)], NOW, 1));
    assert_eq!(m.len(), 1);
}

#[test]
fn skill_spread_bound_is_enforced() {
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.50, NOW, 1);
    pool.add(1, 0.65, NOW, 1); // 1.5 normalized units apart
    let mut rs = [ruleset(2, 1)];
    rs[0].max_skill_spread = 1.0;
    assert!(run(&pool, &params(&pool, &rs, NOW, 1)).is_empty());
    rs[0].max_skill_spread = 2.0;
    assert_eq!(run(&pool, &params(&pool, &rs, NOW, 1)).len(), 1);
}

#[test]
fn party_synergy_bonus_shifts_effective_skill() {
    let mut pool = Pool::new(vec![], 0);
    pool.add(2, 0.50, NOW, 1);
    pool.add(2, 0.50, NOW, 1);
    pool.add(1, 0.60, NOW, 1);
    pool.add(1, 0.60, NOW, 1);
    pool.add(1, 0.60, NOW, 1);
    pool.add(1, 0.60, NOW, 1);
    // 2x2 with spread 0.5 (0.05 raw): duos (0.5) and solos (0.6) cannot mix without a bonus.
    let mut rs = [ruleset(2, 2)];
    rs[0].max_skill_spread = 0.5;
    let mut p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 2);
    for mm in &m {
        let sizes: Vec<u8> = mm.tickets.iter().map(|&t| pool.party_size[t as usize]).collect();
        assert!(sizes.iter().all(|&s| s == sizes[0]), "no mixing without bonus: {sizes:?}");
    }
    // A bonus of 0.1 per extra member lifts duos to 0.6 effective: now any mix is fine.
    p.party_synergy_bonus = 0.1;
    let m = run(&pool, &p);
    assert_eq!(m.len(), 2);
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn teams_are_balanced() {
    // 2x2 solos 0.40, 0.45, 0.55, 0.60: best split is {0.40,0.60} vs {0.45,0.55}.
    let mut pool = Pool::new(vec![], 0);
    let t: Vec<usize> = [0.40, 0.45, 0.55, 0.60].iter().map(|&x| pool.add(1, x, NOW, 1)).collect();
    let mut rs = [ruleset(2, 2)];
    rs[0].max_team_imbalance = 0.01;
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].team_of(t[0] as u32), m[0].team_of(t[3] as u32));
    assert_eq!(m[0].team_of(t[1] as u32), m[0].team_of(t[2] as u32));
    check_invariants(&pool, &p, &m).unwrap();
}

#[test]
fn team_imbalance_bound_can_block_a_match() {
    // 2x2 with a duo at 0.8 vs two solos at 0.2: team means 0.8 vs 0.2 = 6 units apart.
    let mut pool = Pool::new(vec![], 0);
    pool.add(2, 0.8, NOW, 1);
    pool.add(1, 0.2, NOW, 1);
    pool.add(1, 0.2, NOW, 1);
    let mut rs = [ruleset(2, 2)];
    rs[0].max_team_imbalance = 5.0;
    assert!(run(&pool, &params(&pool, &rs, NOW, 1)).is_empty());
    rs[0].max_team_imbalance = 6.5;
    assert_eq!(run(&pool, &params(&pool, &rs, NOW, 1)).len(), 1);
}

#[test]
fn relaxation_widens_bounds_by_oldest_wait() {
    let steps = [
        RelaxationStep { after_wait_ms: 30_000.0, max_skill_spread: 2.0, max_latency_ms: 100 },
        RelaxationStep { after_wait_ms: 60_000.0, max_skill_spread: 5.0, max_latency_ms: 200 },
    ];
    let mk = |wait_old: f64| {
        let mut pool = Pool::new(vec![], 1);
        let a = pool.add(1, 0.50, NOW - wait_old, 1);
        let b = pool.add(1, 0.80, NOW - 1_000.0, 1); // 3 units apart
        pool.set_latency(a, &[150]);
        pool.set_latency(b, &[20]);
        pool
    };
    let rs = [Ruleset {
        teams: 2,
        team_size: 1,
        max_skill_spread: 1.0,
        max_team_imbalance: f64::INFINITY,
        max_latency_ms: 50,
        require_host: true,
        relaxation: &steps,
        expansion: Expansion::NONE,
    }];
    {
        let b = rs[0].bounds_for_wait(10_000.0);
        assert_eq!((b.max_skill_spread, b.max_latency_ms), (1.0, 50));
    }
    {
        let b = rs[0].bounds_for_wait(30_000.0);
        assert_eq!((b.max_skill_spread, b.max_latency_ms), (2.0, 100));
    }
    {
        let b = rs[0].bounds_for_wait(61_000.0);
        assert_eq!((b.max_skill_spread, b.max_latency_ms), (5.0, 200));
    }
    for (wait, expect) in [(10_000.0, 0), (45_000.0, 0), (61_000.0, 1)] {
        let pool = mk(wait);
        let p = params(&pool, &rs, NOW, 1);
        let m = run(&pool, &p);
        assert_eq!(m.len(), expect, "oldest wait {wait}");
        check_invariants(&pool, &p, &m).unwrap();
    }
}

#[test]
fn oldest_ticket_is_served_first() {
    // 1v1, three equal tickets, the oldest must be matched (whatever the seed).
    for seed in 0..20 {
        let mut pool = Pool::new(vec![], 0);
        let y1 = pool.add(1, 0.5, NOW, 1);
        let old = pool.add(1, 0.5, NOW - 60_000.0, 1);
        let y2 = pool.add(1, 0.5, NOW, 1);
        let m = run(&pool, &params(&pool, &[ruleset(2, 1)], NOW, seed));
        assert_eq!(m.len(), 1);
        assert!(m[0].tickets.contains(&(old as u32)));
        let _ = (y1, y2);
    }
}

#[test]
fn oldest_first_beats_skill_proximity() {
    // Young pair at exactly equal skill; the old ticket is slightly off but within bounds. The
    // old ticket seeds first and takes the nearest young one.
    let mut pool = Pool::new(vec![], 0);
    let y1 = pool.add(1, 0.50, NOW, 1);
    let y2 = pool.add(1, 0.50, NOW, 1);
    let old = pool.add(1, 0.55, NOW - 5_000.0, 1);
    let m = run(&pool, &params(&pool, &[ruleset(2, 1)], NOW, 1));
    assert_eq!(m.len(), 1);
    assert!(m[0].tickets.contains(&(old as u32)));
    assert!(m[0].tickets.contains(&(y1 as u32)) || m[0].tickets.contains(&(y2 as u32)));
}

#[test]
fn deterministic_for_same_input_and_seed() {
    let mut pool = Pool::new(vec![FilterMode::Overlap, FilterMode::Containment], 3);
    let mut x = 12345u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..300 {
        let t = pool.add((next() % 3 + 1) as u8, (next() % 1000) as f64 / 1000.0, NOW - (next() % 5) as f64, 1);
        pool.set_attr(t, 0, 1 << (next() % 3), u64::MAX);
        pool.set_latency(t, &[(next() % 200) as u16, (next() % 200) as u16, (next() % 200) as u16]);
    }
    let mut rs = [ruleset(2, 3)];
    rs[0].max_skill_spread = 1.0;
    rs[0].max_latency_ms = 150;
    rs[0].require_host = true;
    let p = params(&pool, &rs, NOW, 99);
    let a = run(&pool, &p);
    let b = run(&pool, &p);
    assert!(!a.is_empty());
    assert_eq!(a, b);
    check_invariants(&pool, &p, &a).unwrap();
    // A reused workspace gives the same answer as a fresh one.
    let mut ws = Workspace::new();
    let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(pool.len(), 2, 3));
    for _ in 0..3 {
        let c = run_tick(&pool.columns(), &p, &mut ws, &mut out.buffers()).unwrap();
        assert_eq!(common::decode(&out, c, 2, 3), a);
    }
}

#[test]
fn empty_pool_and_no_rulesets() {
    let pool = Pool::new(vec![], 0);
    assert!(run(&pool, &params(&pool, &[ruleset(2, 1)], NOW, 1)).is_empty());
    let mut pool = Pool::new(vec![], 0);
    pool.add(1, 0.5, NOW, 1);
    assert!(run(&pool, &params(&pool, &[], NOW, 1)).is_empty());
}

#[test]
fn errors_on_bad_input() {
    let mut pool = Pool::new(vec![FilterMode::Overlap], 2);
    pool.add(1, 0.5, NOW, 1);
    pool.add(1, 0.5, NOW, 1);
    let rs = [ruleset(2, 1)];

    let mut bad = pool.clone();
    bad.mmr_mean.pop();
    assert!(matches!(
        try_run(&bad, &params(&bad, &rs, NOW, 1)),
        Err(EngineError::ColumnLength { column: "mmr_mean", .. })
    ));

    let mut bad = pool.clone();
    bad.latency_ms.push(0);
    assert!(matches!(
        try_run(&bad, &params(&bad, &rs, NOW, 1)),
        Err(EngineError::ColumnLength { column: "latency_ms", .. })
    ));

    let mut bad = pool.clone();
    bad.party_size[1] = 0;
    assert!(matches!(try_run(&bad, &params(&bad, &rs, NOW, 1)), Err(EngineError::InvalidTicket { ticket: 1, .. })));

    let mut bad = pool.clone();
    bad.mmr_mean[0] = f64::NAN;
    assert!(matches!(try_run(&bad, &params(&bad, &rs, NOW, 1)), Err(EngineError::InvalidTicket { ticket: 0, .. })));

    let many: Vec<Ruleset> = (0..33).map(|_| ruleset(1, 1)).collect();
    assert_eq!(try_run(&pool, &params(&pool, &many, NOW, 1)), Err(EngineError::TooManyRulesets { count: 33 }));

    let zero = [ruleset(0, 5)];
    assert!(matches!(
        try_run(&pool, &params(&pool, &zero, NOW, 1)),
        Err(EngineError::InvalidRuleset { ruleset: 0, .. })
    ));

    let narrowing = [RelaxationStep { after_wait_ms: 1.0, max_skill_spread: 1.0, max_latency_ms: 5000 }];
    let mut rs2 = [ruleset(2, 1)];
    rs2[0].relaxation = &narrowing; // base spread is 10.0: a step may not narrow it
    assert!(matches!(try_run(&pool, &params(&pool, &rs2, NOW, 1)), Err(EngineError::InvalidRuleset { .. })));

    let mut p = params(&pool, &rs, NOW, 1);
    p.mmr_normalization_ref = 0.0;
    assert!(matches!(try_run(&pool, &p), Err(EngineError::InvalidParam { name: "mmr_normalization_ref", .. })));

    let mut p = params(&pool, &rs, NOW, 1);
    p.filters = &[];
    assert_eq!(try_run(&pool, &p), Err(EngineError::FilterCount { pool: 1, params: 0 }));

    let mut bad = pool.clone();
    bad.host_count = 257;
    bad.latency_ms = vec![0; 2 * 257];
    assert_eq!(try_run(&bad, &params(&bad, &rs, NOW, 1)), Err(EngineError::TooManyHosts { count: 257 }));

    // Output buffers too small.
    let p = params(&pool, &rs, NOW, 1);
    let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(2, 1, 2));
    out.match_tickets.pop();
    let mut ws = Workspace::new();
    let err = run_tick(&pool.columns(), &p, &mut ws, &mut out.buffers()).unwrap_err();
    assert_eq!(err, EngineError::BufferTooSmall { buffer: "match_tickets", required: 2, actual: 1 });
    assert!(err.to_string().contains("match_tickets"));
}

#[test]
fn buffers_can_be_plain_slices() {
    // The napi binding will point MatchBuffers at typed arrays; plain slices must work.
    let mut pool = Pool::new(vec![], 1);
    pool.add(1, 0.5, NOW, 1);
    pool.add(1, 0.5, NOW, 1);
    let rs = [ruleset(2, 1)];
    let p: TickParams = params(&pool, &rs, NOW, 1);
    let (mut a, mut b, mut c, mut d, mut e, mut f) = ([0u32; 2], [0u32; 3], [0u32; 2], [0u32; 2], [0u32; 2], [0u64; 2]);
    let mut g: [u64; 0] = [];
    let mut out = MatchBuffers {
        match_ruleset: &mut a,
        match_offsets: &mut b,
        match_tickets: &mut c,
        ticket_team: &mut d,
        match_preferred_host: &mut e,
        match_acceptable_hosts: &mut f,
        match_accepts: &mut g,
        ticket_refusals: None,
    };
    let n = run_tick(&pool.columns(), &p, &mut Workspace::new(), &mut out).unwrap();
    assert_eq!(n, 1);
    assert_eq!(b[..2], [0, 2]);
    assert_eq!(e[0], 0);
}

/// The starvation guarantee (docs/engine.md "Bounds"): with unbounded limits, a ticket whose partners are
/// far in skill is matched at the first tick its widened bounds cover them, and not before.
#[test]
fn widening_bounds_reach_a_far_ticket_when_they_cover_it() {
    let mut pool = Pool::new(vec![], 0);
    let arrival = NOW - 10_000.0;
    // One ticket at 0.0 and nine at 1.0: the spread needed is 10 normalized units; the teams' means
    // (0.8 and 1.0) differ by 2.
    let far = pool.add(1, 0.0, arrival, 1);
    for _ in 0..9 {
        pool.add(1, 1.0, NOW, 1);
    }
    let expansion = Expansion {
        curve: Curve::Exponential,
        over_ms: 1_000.0,
        max_skill_spread: f64::INFINITY,
        max_team_imbalance: f64::INFINITY,
        max_latency_ms: 1000,
        any_host_after_ms: 0.0,
    };
    let rs = [Ruleset { max_skill_spread: 0.5, max_team_imbalance: 0.5, expansion, ..ruleset(2, 5) }];
    // 0.5 * 2^k * (1 + f) >= 10, with w / 1 s = k + f, once w >= 4.25 s (16 * 1.25 = 20).
    for (wait, matched) in [(0.0, false), (4_240.0, false), (4_250.0, true), (60_000.0, true)] {
        let m = run(&pool, &params(&pool, &rs, arrival + wait, 1));
        assert_eq!(m.len(), usize::from(matched), "wait {wait}");
        if matched {
            assert!(m[0].tickets.contains(&(far as u32)));
            check_invariants(&pool, &params(&pool, &rs, arrival + wait, 1), &m).unwrap();
        }
    }
    // A finite limit below the need keeps the bound there: no match, however long the wait.
    let capped = [Ruleset { expansion: Expansion { max_skill_spread: 9.0, ..expansion }, ..rs[0] }];
    assert!(run(&pool, &params(&pool, &capped, arrival + 600_000.0, 1)).is_empty());
    // Linear: 0.5 * (1 + w / 1 s) >= 10 once w >= 19 s.
    let linear = [Ruleset { expansion: Expansion { curve: Curve::Linear, ..expansion }, ..rs[0] }];
    assert!(run(&pool, &params(&pool, &linear, arrival + 18_900.0, 1)).is_empty());
    assert_eq!(run(&pool, &params(&pool, &linear, arrival + 19_000.0, 1)).len(), 1);
}

#[test]
fn bounds_for_wait_combines_steps_and_the_curve() {
    let steps = [RelaxationStep { after_wait_ms: 5_000.0, max_skill_spread: 8.0, max_latency_ms: 120 }];
    let expansion = Expansion {
        curve: Curve::Exponential,
        over_ms: 2_000.0,
        max_skill_spread: 6.0,
        max_team_imbalance: 1.5,
        max_latency_ms: 400,
        any_host_after_ms: 3_000.0,
    };
    let rs = Ruleset {
        max_skill_spread: 1.0,
        max_team_imbalance: 0.5,
        max_latency_ms: 100,
        relaxation: &steps,
        expansion,
        ..ruleset(2, 5)
    };
    let at = |w: f64| {
        let b = rs.bounds_for_wait(w);
        (b.max_skill_spread, b.max_team_imbalance, b.max_latency_ms, b.any_host)
    };
    assert_eq!(at(0.0), (1.0, 0.5, 100, false));
    // 1 s: 2^0 * 1.5; 3 s: 2^1 * 1.5 (linear between doublings).
    assert_eq!(at(1_000.0), (1.5, 0.75, 150, false));
    assert_eq!(at(3_000.0), (3.0, 1.5, 300, true));
    // 5 s: the step (8.0, 120) is wider in skill, the curve (5.0 * ... capped at 6) in latency (400).
    assert_eq!(at(5_000.0), (8.0, 1.5, 400, true));
    // A negative wait (a clock ahead of now) counts as none.
    assert_eq!(at(-50.0), (1.0, 0.5, 100, false));
    // With require_host, never without a host.
    assert!(!Ruleset { require_host: true, ..rs }.bounds_for_wait(1e9).any_host);
}

#[test]
fn filters_with_more_than_64_values_compare_all_their_columns() {
    // An overlap filter of 192 values (three columns) and a containment filter of 128 (two). Value v is
    // bit v % 64 of column v / 64. Once (compatibility by bitsets over the few distinct rows) and 70
    // times over, far apart in skill, each copy with its own value of a sixth filter (over 64 distinct
    // rows there: running aggregates instead): the same pairs each time.
    let bit = |v: u32| (v / 64, 1u64 << (v % 64));
    for copies in [1usize, 70] {
        let modes = vec![
            FilterMode::Overlap,
            FilterMode::Continued,
            FilterMode::Continued,
            FilterMode::Containment,
            FilterMode::Continued,
            FilterMode::Overlap,
        ];
        let mut pool = Pool::new(modes, 0);
        let mut want = Vec::new();
        for c in 0..copies {
            let base = c as f64 * 2.0;
            let arrival = NOW - 1000.0 * (copies - c) as f64;
            let mut add = |mmr: f64, age: f64, overlap: &[u32], containment: Option<(u32, Option<u32>)>| {
                let t = pool.add(1, base + mmr, arrival - age, 1);
                pool.set_attr(t, 5, c as u64 + 1, u64::MAX);
                if !overlap.is_empty() {
                    for col in 0..3 {
                        pool.set_attr(t, col, 0, u64::MAX);
                    }
                    for &v in overlap {
                        let (col, b) = bit(v);
                        let i = t * 6 + col as usize;
                        pool.attr_values[i] |= b;
                    }
                }
                if let Some((value, accepts)) = containment {
                    let (col, b) = bit(value);
                    for k in 0..2 {
                        let accepted = accepts.map_or(u64::MAX, |a| if bit(a).0 == k { bit(a).1 } else { 0 });
                        pool.set_attr(t, 3 + k as usize, if k == col { b } else { 0 }, accepted);
                    }
                }
                t as u32
            };
            let t0 = add(0.0, 60.0, &[70], None);
            let t3 = add(0.001, 0.0, &[70], None);
            let t1 = add(0.3, 50.0, &[130], None);
            // Nearer to t1 than t2, with 66: bit 2 of the second column, where 130 has bit 2 of the third.
            let _t7 = add(0.3005, 0.0, &[66], Some((64, None)));
            let t2 = add(0.301, 0.0, &[5, 130], None);
            let t4 = add(0.6, 40.0, &[], Some((100, Some(100))));
            let t6 = add(0.601, 0.0, &[], Some((100, None)));
            // Accepts only 3: not t7 (64, in the second column).
            let _t5 = add(0.602, 0.0, &[], Some((3, Some(3))));
            want.extend([vec![t0, t3], vec![t1, t2], vec![t4, t6]]);
        }
        let rs = [ruleset(2, 1)];
        let p = params(&pool, &rs, NOW, 1);
        let m = run(&pool, &p);
        check_invariants(&pool, &p, &m).unwrap();
        let mut got: Vec<Vec<u32>> = m.iter().map(|m| m.sorted_tickets()).collect();
        got.sort();
        let mut want: Vec<Vec<u32>> = want
            .into_iter()
            .map(|mut v| {
                v.sort();
                v
            })
            .collect();
        want.sort();
        assert_eq!(got, want, "{copies} copies");
        // The accepts of t4 and t6: 100 only, in the containment filter's second column.
        let m46 = m.iter().find(|m| m.sorted_tickets() == want[2]).unwrap();
        assert_eq!(m46.accepts[3..5], [0, 1 << 36]);
    }
}

#[test]
fn a_leading_continued_column_is_refused() {
    let mut pool = Pool::new(vec![FilterMode::Continued, FilterMode::Overlap], 0);
    pool.add(1, 0.5, NOW, 1);
    let rs = [ruleset(2, 1)];
    assert!(matches!(
        try_run(&pool, &params(&pool, &rs, NOW, 1)),
        Err(EngineError::InvalidParam { name: "filters", .. })
    ));
}

#[test]
fn a_queue_of_more_than_64_hosts_finds_a_common_host_past_the_first_64() {
    // 200 hosts, every one far (300 ms) but host 150 for a and b and host 199 for c and d: two matches,
    // each on its own host, named in the third and fourth words of the acceptable-host output.
    let h = 200;
    let mut pool = Pool::new(vec![], h);
    let mut rs = [ruleset(2, 1)];
    rs[0].max_latency_ms = 100;
    rs[0].require_host = true;
    let near = |host: usize| (0..h).map(|k| if k == host { 40 } else { 300 }).collect::<Vec<u16>>();
    for (mmr, host) in [(0.50, 150), (0.51, 199), (0.52, 150), (0.53, 199)] {
        let t = pool.add(1, mmr, NOW, 1);
        pool.set_latency(t, &near(host));
    }
    let p = params(&pool, &rs, NOW, 1);
    let m = run(&pool, &p);
    check_invariants(&pool, &p, &m).unwrap();
    let mut got: Vec<(Vec<u32>, u32, Vec<u64>)> =
        m.iter().map(|m| (m.sorted_tickets(), m.preferred_host, m.acceptable_hosts.clone())).collect();
    got.sort();
    assert_eq!(got, [(vec![0, 2], 150, vec![0, 0, 1 << 22, 0]), (vec![1, 3], 199, vec![0, 0, 0, 1 << 7])]);
}
