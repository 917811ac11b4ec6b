//! Golden output hashes: seeded generated pools must produce bit-identical output across
//! optimisations. The constants were recorded from the implementation before the performance
//! work; a change here means the engine's observable output changed.
//!
//! To print the current hashes: `cargo test -p matchmaker-engine --test golden -- --nocapture`.

mod common;

use common::{generate, Pool, NOW};
use matchmaker_engine::{
    run_tick, Curve, Expansion, FilterMode, MatchOutput, OutputCapacity, RelaxationStep, Ruleset, TickParams, Workspace,
};

/// FNV-1a 64 over the count and every output buffer up to the match count.
fn run_hash(pool: &Pool, params: &TickParams<'_>) -> (usize, u64) {
    let f = pool.filters.len();
    let mut ws = Workspace::new();
    let mut out = MatchOutput::with_capacity(OutputCapacity::for_pool(pool.len(), f, pool.host_count));
    let count = run_tick(&pool.columns(), params, &mut ws, &mut out.buffers()).expect("valid input");
    // A reused workspace must give the same result.
    let again = run_tick(&pool.columns(), params, &mut ws, &mut out.buffers()).expect("valid input");
    assert_eq!(count, again);
    // So must the seed loop on several threads (tick/speculate.rs), in batches of every size: on 2, each
    // batch tried after the one before commits; on 4, while it commits.
    for threads in [2, 4] {
        let mut spread = common::threaded(threads);
        let mut other = MatchOutput::with_capacity(OutputCapacity::for_pool(pool.len(), f, pool.host_count));
        assert_eq!(run_tick(&pool.columns(), params, &mut spread, &mut other.buffers()), Ok(count));
        assert_eq!(other, out, "{threads} threads");
        assert_eq!(spread.rule_diagnostics(), ws.rule_diagnostics(), "{threads} threads");
    }

    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    let tickets = out.match_offsets[count] as usize;
    eat(&(count as u64).to_le_bytes());
    for x in &out.match_ruleset[..count] {
        eat(&x.to_le_bytes());
    }
    for x in &out.match_offsets[..=count] {
        eat(&x.to_le_bytes());
    }
    for x in &out.match_tickets[..tickets] {
        eat(&x.to_le_bytes());
    }
    for x in &out.ticket_team[..tickets] {
        eat(&x.to_le_bytes());
    }
    for x in &out.match_preferred_host[..count] {
        eat(&x.to_le_bytes());
    }
    for x in &out.match_acceptable_hosts[..count] {
        eat(&x.to_le_bytes());
    }
    for x in &out.match_accepts[..count * f] {
        eat(&x.to_le_bytes());
    }
    (count, h)
}

const RELAX: [RelaxationStep; 2] = [
    RelaxationStep { after_wait_ms: 30_000.0, max_skill_spread: 1.0, max_latency_ms: 200 },
    RelaxationStep { after_wait_ms: 90_000.0, max_skill_spread: 3.0, max_latency_ms: 300 },
];
const RELAX_1V1: [RelaxationStep; 1] =
    [RelaxationStep { after_wait_ms: 60_000.0, max_skill_spread: 0.8, max_latency_ms: 250 }];

/// 2x5 (parties 1..5, require_host) plus 1x1 (solos, no require_host), 3 filters, 8 hosts.
fn mixed_2x5_1x1(n: usize, seed: u64) -> (usize, u64) {
    let filters = [FilterMode::Overlap, FilterMode::Containment, FilterMode::Overlap];
    let pool = generate(n, seed, &filters, 8, 5, &[1, 1, 2, 3, 3]);
    let rulesets = [
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
                over_ms: 20_000.0,
                max_skill_spread: f64::INFINITY,
                max_team_imbalance: 1.0,
                max_latency_ms: 300,
                any_host_after_ms: 0.0,
            },
        },
        Ruleset {
            teams: 1,
            team_size: 1,
            max_skill_spread: 0.3,
            max_team_imbalance: 0.0,
            max_latency_ms: 100,
            require_host: false,
            relaxation: &RELAX_1V1,
            expansion: Expansion::NONE,
        },
    ];
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: 0.01,
        filters: &filters,
        rulesets: &rulesets,
        now_ms: NOW,
        seed: 42,
    };
    run_hash(&pool, &params)
}

/// 4x3 (parties 1..3) and 1v1 (2x1), 2 filters, 4 hosts, no require_host.
fn four_by_three(n: usize, seed: u64) -> (usize, u64) {
    let filters = [FilterMode::Containment, FilterMode::Overlap];
    let pool = generate(n, seed, &filters, 4, 3, &[1, 1, 1, 3, 2]);
    let rulesets = [
        Ruleset {
            teams: 4,
            team_size: 3,
            max_skill_spread: 0.8,
            max_team_imbalance: 0.3,
            max_latency_ms: 150,
            require_host: false,
            relaxation: &RELAX,
            expansion: Expansion::NONE,
        },
        Ruleset {
            teams: 2,
            team_size: 1,
            max_skill_spread: 0.2,
            max_team_imbalance: 0.2,
            max_latency_ms: 90,
            require_host: true,
            relaxation: &[],
            expansion: Expansion::NONE,
        },
    ];
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: 0.0,
        filters: &filters,
        rulesets: &rulesets,
        now_ms: NOW,
        seed: 7,
    };
    run_hash(&pool, &params)
}

/// No hosts, no filters, unbounded spread: the scan is limited only by the examined cap.
fn unbounded_no_hosts(n: usize, seed: u64) -> (usize, u64) {
    let pool = generate(n, seed, &[], 0, 4, &[1]);
    let rulesets = [Ruleset {
        teams: 3,
        team_size: 4,
        max_skill_spread: f64::INFINITY,
        max_team_imbalance: 0.1,
        max_latency_ms: 0,
        require_host: false,
        relaxation: &[],
        expansion: Expansion::NONE,
    }];
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: -0.02,
        filters: &[],
        rulesets: &rulesets,
        now_ms: NOW,
        seed: 3,
    };
    run_hash(&pool, &params)
}

/// 1x1 solos that all arrived in the same millisecond: every ticket is its own match, so the
/// output lists the seed order itself. With this seed, tickets 1373 and 1741 have equal seeded
/// tie hashes, so the skill-position tie-break is exercised too.
fn seed_order_ties() -> (usize, u64) {
    let mut pool = generate(2_000, 8, &[FilterMode::Overlap], 2, 1, &[1]);
    pool.arrival_ms.iter_mut().for_each(|a| *a = NOW - 1_000.0);
    let rulesets = [Ruleset {
        teams: 1,
        team_size: 1,
        max_skill_spread: 0.0,
        max_team_imbalance: 0.0,
        max_latency_ms: 100,
        require_host: false,
        relaxation: &[],
        expansion: Expansion::NONE,
    }];
    let filters = [FilterMode::Overlap];
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: 0.0,
        filters: &filters,
        rulesets: &rulesets,
        now_ms: NOW,
        seed: 639,
    };
    run_hash(&pool, &params)
}

fn check(name: &str, got: (usize, u64), want: (usize, u64)) {
    println!("{name}: ({}, {:#018x})", got.0, got.1);
    assert_eq!(got, want, "{name}: golden output changed");
}

#[test]
fn golden_mixed_2x5_1x1_200() {
    check("mixed_2x5_1x1_200", mixed_2x5_1x1(200, 1), (41, 0xacb6_a7b5_bf96_6568));
}

#[test]
fn golden_mixed_2x5_1x1_2000() {
    check("mixed_2x5_1x1_2000", mixed_2x5_1x1(2_000, 2), (436, 0x41d3_e8a7_9534_092d));
}

#[test]
fn golden_mixed_2x5_1x1_20000() {
    check("mixed_2x5_1x1_20000", mixed_2x5_1x1(20_000, 3), (4362, 0xe6a2_093a_226a_28d8));
}

#[test]
fn golden_four_by_three_2000() {
    check("four_by_three_2000", four_by_three(2_000, 4), (275, 0x5ae0_fdc4_86ea_2781));
}

#[test]
fn golden_four_by_three_20000() {
    check("four_by_three_20000", four_by_three(20_000, 5), (2781, 0x7bca_38ec_f3f2_9303));
}

#[test]
fn golden_unbounded_no_hosts_5000() {
    check("unbounded_no_hosts_5000", unbounded_no_hosts(5_000, 6), (777, 0x18b9_18d6_103b_40fb));
}

#[test]
fn golden_seed_order_ties_2000() {
    check("seed_order_ties_2000", seed_order_ties(), (2000, 0x508c_0f45_dbb6_832b));
}
