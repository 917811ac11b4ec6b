//! Backfill: fills open slots with compatible tickets nearest the match's skill, under its host.
use matchmaker_engine::{
    run_backfill, BackfillBuffers, BackfillColumns, BackfillWorkspace, Expansion, FilterMode, PoolColumns, Ruleset,
    TickParams, NO_HOST,
};

const ALL: u64 = u64::MAX;

struct Pool {
    party: Vec<u8>,
    mmr: Vec<f64>,
    arrival: Vec<f64>,
    mask: Vec<u32>,
    values: Vec<u64>,
    accepts: Vec<u64>,
    latency: Vec<u16>,
}

impl Pool {
    /// Tickets as (party size, mmr, attribute value bit, latency to host 0, latency to host 1).
    fn new(tickets: &[(u8, f64, u64, u16, u16)]) -> Self {
        Pool {
            party: tickets.iter().map(|t| t.0).collect(),
            mmr: tickets.iter().map(|t| t.1).collect(),
            arrival: vec![0.0; tickets.len()],
            mask: vec![1; tickets.len()],
            values: tickets.iter().map(|t| t.2).collect(),
            accepts: vec![ALL; tickets.len()],
            latency: tickets.iter().flat_map(|t| [t.3, t.4]).collect(),
        }
    }
    fn columns(&self) -> PoolColumns<'_> {
        PoolColumns {
            party_size: &self.party,
            mmr_mean: &self.mmr,
            arrival_ms: &self.arrival,
            ruleset_mask: &self.mask,
            attr_values: &self.values,
            attr_accepts: &self.accepts,
            latency_ms: &self.latency,
            filter_count: 1,
            host_count: 2,
        }
    }
}

fn ruleset() -> Ruleset<'static> {
    Ruleset {
        teams: 2,
        team_size: 5,
        max_skill_spread: 1.0,
        max_team_imbalance: 1.0,
        max_latency_ms: 80,
        require_host: true,
        relaxation: &[],
        expansion: Expansion::NONE,
    }
}

/// Runs one backfill over `pool` for requests (slots, skill, host, value bit), all posted at t=0.
fn fill(pool: &Pool, requests: &[(u32, f64, u32, u64)]) -> (usize, Vec<Vec<u32>>) {
    let rulesets = [ruleset()];
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: 0.0,
        filters: &[FilterMode::Overlap],
        rulesets: &rulesets,
        now_ms: 1000.0,
        seed: 1,
    };
    let r = requests.len();
    let ruleset_idx = vec![0u32; r];
    let slots: Vec<u32> = requests.iter().map(|q| q.0).collect();
    let skill: Vec<f64> = requests.iter().map(|q| q.1).collect();
    let host: Vec<u32> = requests.iter().map(|q| q.2).collect();
    let arrival: Vec<f64> = (0..r).map(|i| i as f64).collect();
    let values: Vec<u64> = requests.iter().map(|q| q.3).collect();
    let accepts = vec![ALL; r];
    let columns = BackfillColumns {
        ruleset: &ruleset_idx,
        slots: &slots,
        skill: &skill,
        host: &host,
        arrival_ms: &arrival,
        attr_values: &values,
        attr_accepts: &accepts,
    };
    let mut offsets = vec![0u32; r + 1];
    let mut assigned = vec![0u32; pool.party.len()];
    let mut out = BackfillBuffers { offsets: &mut offsets, assigned: &mut assigned };
    let filled =
        run_backfill(&pool.columns(), &columns, &params, &mut BackfillWorkspace::new(), &mut out).expect("valid input");
    let per_request = (0..r).map(|q| assigned[offsets[q] as usize..offsets[q + 1] as usize].to_vec()).collect();
    (filled, per_request)
}

#[test]
fn fills_open_slots_nearest_skill_first() {
    let pool = Pool::new(&[(1, 0.90, 1, 20, 20), (1, 0.52, 1, 20, 20), (1, 0.48, 1, 20, 20), (1, 0.55, 1, 20, 20)]);
    let (filled, got) = fill(&pool, &[(2, 0.5, 0, 1)]);
    assert_eq!(filled, 1);
    // 0.52 and 0.48 are nearest; 0.90 is outside the skill bound anyway.
    let mut rows = got[0].clone();
    rows.sort();
    assert_eq!(rows, vec![1, 2]);
}

#[test]
fn never_splits_a_party_or_overfills() {
    let pool = Pool::new(&[(3, 0.5, 1, 20, 20), (2, 0.5, 1, 20, 20), (1, 0.5, 1, 20, 20)]);
    let (_, got) = fill(&pool, &[(2, 0.5, 0, 1)]);
    let players: u32 = got[0].iter().map(|&i| u32::from(pool.party[i as usize])).sum();
    assert!(players <= 2);
    assert!(!got[0].contains(&0), "a party of 3 does not fit 2 slots");
    assert_eq!(players, 2);
}

#[test]
fn respects_the_host_and_attributes() {
    // Row 0: too far from host 0. Row 1: wrong attribute. Row 2: fits.
    let pool = Pool::new(&[(1, 0.5, 1, 200, 10), (1, 0.5, 2, 20, 20), (1, 0.5, 1, 30, 90)]);
    let (_, got) = fill(&pool, &[(3, 0.5, 0, 1)]);
    assert_eq!(got[0], vec![2]);
    // Without a known host, latency does not bound.
    let (_, got) = fill(&pool, &[(3, 0.5, NO_HOST, 1)]);
    let mut rows = got[0].clone();
    rows.sort();
    assert_eq!(rows, vec![0, 2]);
}

#[test]
fn older_requests_go_first_and_a_ticket_fills_one_request() {
    let pool = Pool::new(&[(1, 0.5, 1, 20, 20)]);
    let (filled, got) = fill(&pool, &[(1, 0.5, 0, 1), (1, 0.5, 0, 1)]);
    assert_eq!(filled, 1);
    assert_eq!(got[0], vec![0]);
    assert!(got[1].is_empty());
}

#[test]
fn an_unknown_skill_target_takes_any_skill() {
    let pool = Pool::new(&[(1, 0.05, 1, 20, 20), (1, 0.95, 1, 20, 20)]);
    let (_, got) = fill(&pool, &[(2, f64::NAN, 0, 1)]);
    assert_eq!(got[0].len(), 2);
}

#[test]
fn rejects_bad_input() {
    let pool = Pool::new(&[(1, 0.5, 1, 20, 20)]);
    let rulesets = [ruleset()];
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: 0.0,
        filters: &[FilterMode::Overlap],
        rulesets: &rulesets,
        now_ms: 0.0,
        seed: 1,
    };
    let columns = BackfillColumns {
        ruleset: &[3],
        slots: &[1],
        skill: &[0.5],
        host: &[0],
        arrival_ms: &[0.0],
        attr_values: &[1],
        attr_accepts: &[ALL],
    };
    let mut offsets = vec![0u32; 2];
    let mut assigned = vec![0u32; 1];
    let mut out = BackfillBuffers { offsets: &mut offsets, assigned: &mut assigned };
    assert!(run_backfill(&pool.columns(), &columns, &params, &mut BackfillWorkspace::new(), &mut out).is_err());
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn ticket() -> impl Strategy<Value = (u8, f64, u64, u16, u16)> {
        (1u8..=5, 0.0f64..1.0, prop_oneof![Just(1u64), Just(2u64), Just(3u64), Just(ALL)], 0u16..200, 0u16..200)
    }

    fn request() -> impl Strategy<Value = (u32, f64, u32, u64)> {
        (
            1u32..=8,
            prop_oneof![Just(f64::NAN), 0.0f64..1.0],
            prop_oneof![Just(0u32), Just(1u32), Just(NO_HOST)],
            prop_oneof![Just(1u64), Just(2u64), Just(ALL)],
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn every_fill_satisfies_every_constraint(
            tickets in prop::collection::vec(ticket(), 0..60),
            requests in prop::collection::vec(request(), 1..6),
        ) {
            let pool = Pool::new(&tickets);
            let (filled, got) = fill(&pool, &requests);
            prop_assert_eq!(filled, got.iter().filter(|g| !g.is_empty()).count());
            let mut seen = std::collections::HashSet::new();
            for (q, rows) in got.iter().enumerate() {
                let (slots, skill, host, value) = requests[q];
                let players: u32 = rows.iter().map(|&i| u32::from(pool.party[i as usize])).sum();
                prop_assert!(players <= slots);
                for &i in rows {
                    let i = i as usize;
                    prop_assert!(seen.insert(i), "ticket {} assigned twice", i);
                    if host != NO_HOST {
                        prop_assert!(pool.latency[i * 2 + host as usize] <= 80);
                    }
                    if !skill.is_nan() {
                        prop_assert!((pool.mmr[i] - skill).abs() / 0.1 <= 1.0 + 1e-9);
                    }
                    prop_assert!(pool.values[i] & value != 0, "overlap with the request");
                    for &j in rows {
                        prop_assert!(pool.values[i] & pool.values[j as usize] != 0, "pairwise overlap");
                    }
                }
            }
        }
    }
}
