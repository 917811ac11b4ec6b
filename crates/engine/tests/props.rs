//! Property tests: every formed match satisfies every constraint; obvious matches are found; the rule
//! diagnostics are consistent with the matches.
mod common;

use common::{
    check_invariants, run, run_changed_recorded, run_diagnosed, run_recorded, run_recorded_in, threaded, Pool, Rng,
};
use matchmaker_engine::{
    Curve, Expansion, FilterMode, PoolChanges, RelaxationStep, RuleDiagnostics, Ruleset, TickParams, TicketRefusal,
    Workspace,
};
use proptest::prelude::*;

const NOW: f64 = 10_000_000.0;

#[derive(Clone, Debug)]
struct Ticket {
    party: u8,
    mmr: f64,
    wait: f64,
    mask: u32,
    attrs: Vec<(u64, u64)>,
    lat: Vec<u16>,
}

#[derive(Clone, Debug)]
struct RulesetSpec {
    teams: u32,
    team_size: u32,
    spread: f64,
    imbalance: f64,
    latency: u32,
    require_host: bool,
    relax: Vec<RelaxationStep>,
    expansion: Expansion,
}

/// A continuous widening of a ruleset with base bounds `spread`, `imbalance`, `latency`.
fn expansion(spread: f64, imbalance: f64, latency: u32) -> impl Strategy<Value = Expansion> {
    (
        prop_oneof![Just(Curve::None), Just(Curve::Linear), Just(Curve::Exponential)],
        100.0f64..60_000.0,
        prop_oneof![Just(f64::INFINITY), 0.0f64..5.0],
        prop_oneof![Just(f64::INFINITY), 0.0f64..2.0],
        prop_oneof![Just(u32::MAX), 0u32..300],
        prop_oneof![Just(0.0), Just(f64::INFINITY), 0.0f64..60_000.0],
    )
        .prop_map(move |(curve, over_ms, ws, wi, wl, any_host_after_ms)| Expansion {
            curve,
            over_ms,
            max_skill_spread: spread + ws,
            max_team_imbalance: imbalance + wi,
            max_latency_ms: latency.saturating_add(wl),
            any_host_after_ms,
        })
}

fn ruleset_spec() -> impl Strategy<Value = RulesetSpec> {
    (
        1u32..=3,
        1u32..=4,
        0.0f64..4.0,
        prop_oneof![Just(f64::INFINITY), 0.0f64..2.0],
        20u32..200,
        any::<bool>(),
        0usize..3,
    )
        .prop_flat_map(|(teams, team_size, spread, imbalance, latency, require_host, steps)| {
            prop::collection::vec((1_000.0f64..60_000.0, 0.0f64..3.0, 0u32..100), steps).prop_map(move |raw| {
                // Build widening steps: sorted waits, cumulative increments.
                let mut waits: Vec<f64> = raw.iter().map(|r| r.0).collect();
                waits.sort_by(f64::total_cmp);
                let (mut s, mut l) = (spread, latency);
                let relax = waits
                    .iter()
                    .zip(&raw)
                    .map(|(&w, r)| {
                        s += r.1;
                        l += r.2;
                        RelaxationStep { after_wait_ms: w, max_skill_spread: s, max_latency_ms: l }
                    })
                    .collect();
                (
                    RulesetSpec {
                        teams,
                        team_size,
                        spread,
                        imbalance,
                        latency,
                        require_host,
                        relax,
                        expansion: Expansion::NONE,
                    },
                    (),
                )
            })
        })
        .prop_flat_map(|(spec, ())| {
            let e = expansion(spec.spread, spec.imbalance, spec.latency);
            (Just(spec), e).prop_map(|(spec, expansion)| RulesetSpec { expansion, ..spec })
        })
}

fn attr(mode: FilterMode) -> impl Strategy<Value = (u64, u64)> {
    let unspecified = match mode {
        FilterMode::Overlap => (u64::MAX, u64::MAX),
        _ => (0, u64::MAX),
    };
    prop_oneof![
        Just(unspecified),
        // Small value universes so compatibility is sometimes true, sometimes false.
        (1u64..16, 0u64..16).prop_map(|(v, a)| (v, a | v)),
        (0u64..16, 0u64..16),
    ]
}

fn ticket(filters: Vec<FilterMode>, hosts: usize, rulesets: usize) -> impl Strategy<Value = Ticket> {
    let modes = Pool::new(filters, 0);
    let attrs: Vec<_> = (0..modes.filters.len()).map(|k| attr(modes.mode_of(k))).collect();
    (1u8..=4, 0.0f64..1.0, 0.0f64..90_000.0, 1u32..(1u32 << rulesets), attrs, prop::collection::vec(0u16..300, hosts))
        .prop_map(|(party, mmr, wait, mask, attrs, lat)| Ticket { party, mmr, wait, mask, attrs, lat })
}

#[derive(Clone, Debug)]
struct Case {
    filters: Vec<FilterMode>,
    hosts: usize,
    rulesets: Vec<RulesetSpec>,
    tickets: Vec<Ticket>,
    bonus: f64,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        // Filters of one to three columns (more than 64 values: `Continued` columns).
        prop::collection::vec(
            (prop_oneof![Just(FilterMode::Overlap), Just(FilterMode::Containment)], 1usize..=3),
            0..=3,
        )
        .prop_map(|filters| {
            filters
                .into_iter()
                .flat_map(|(mode, w)| std::iter::once(mode).chain(std::iter::repeat_n(FilterMode::Continued, w - 1)))
                .collect::<Vec<_>>()
        }),
        // Mostly a few hosts; sometimes past 64 (host sets of several words).
        prop_oneof![4 => 0usize..=4, 1 => 63usize..=66, 1 => 129usize..=130],
        prop::collection::vec(ruleset_spec(), 1..=3),
        0.0f64..0.05,
        any::<u64>(),
    )
        .prop_flat_map(|(filters, hosts, rulesets, bonus, seed)| {
            let t = ticket(filters.clone(), hosts, rulesets.len());
            prop::collection::vec(t, 0..80).prop_map(move |tickets| Case {
                filters: filters.clone(),
                hosts,
                rulesets: rulesets.clone(),
                tickets,
                bonus,
                seed,
            })
        })
}

fn build(c: &Case) -> Pool {
    let mut pool = Pool::new(c.filters.clone(), c.hosts);
    for t in &c.tickets {
        let i = pool.add(t.party, t.mmr, NOW - t.wait, t.mask);
        for (f, &(v, a)) in t.attrs.iter().enumerate() {
            pool.set_attr(i, f, v, a);
        }
        pool.set_latency(i, &t.lat);
    }
    pool
}

fn rulesets(c: &Case) -> Vec<Ruleset<'_>> {
    c.rulesets
        .iter()
        .map(|r| Ruleset {
            teams: r.teams,
            team_size: r.team_size,
            max_skill_spread: r.spread,
            max_team_imbalance: r.imbalance,
            max_latency_ms: r.latency,
            require_host: r.require_host,
            relaxation: &r.relax,
            expansion: r.expansion,
        })
        .collect()
}

/// The tick parameters of a case, over `rs` (its rulesets, or more).
fn params<'a>(c: &'a Case, rs: &'a [Ruleset<'a>]) -> TickParams<'a> {
    TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: c.bonus,
        filters: &c.filters,
        rulesets: rs,
        now_ms: NOW,
        seed: c.seed,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Ticks that update the layout they kept (`run_tick_changed`) write what a tick laying the same pool
    /// out afresh writes, through tickets matched and removed, cancelled, rewritten, moved by swap-removes
    /// and added, with arrival ties, each tick's own seed, and now and then another party bonus.
    #[test]
    fn a_tick_updating_its_kept_layout_writes_what_a_fresh_tick_writes(
        c in case(),
        ticks in prop::collection::vec(any::<u64>(), 1..7),
        threads in 1usize..=2,
    ) {
        let rs = rulesets(&c);
        let templates = build(&c);
        let mut pool = build(&c);
        let mut ws = if threads == 2 { threaded(2) } else { Workspace::new() };
        let (mut changed, mut previous_len) = (Vec::<u32>::new(), 0);
        for (t, &draw) in ticks.iter().enumerate() {
            let mut rng = Rng(draw);
            let bonus = if rng.below(8) == 0 { c.bonus + 0.01 } else { c.bonus };
            let p = TickParams {
                now_ms: NOW + 250.0 * t as f64,
                seed: c.seed.wrapping_add(t as u64),
                party_synergy_bonus: bonus,
                ..params(&c, &rs)
            };
            let changes = PoolChanges { previous_len, rows: &changed };
            let (m, d, refusals) = run_changed_recorded(&pool, &changes, &p, &mut ws);
            let fresh = run_recorded(&pool, &p);
            prop_assert_eq!(&(&m, &d, &refusals), &(&fresh.0, &fresh.1, &fresh.2), "tick {}", t);

            // The changes before the next tick: the matched tickets leave, then some others, some rows
            // are rewritten, some tickets arrive (some at an arrival already in the pool).
            previous_len = pool.len();
            changed.clear();
            let mut matched: Vec<usize> = m.iter().flat_map(|x| x.tickets.iter().map(|&i| i as usize)).collect();
            matched.sort_unstable_by(|a, b| b.cmp(a));
            for i in matched {
                changed.extend(pool.swap_remove(i).map(|r| r as u32));
            }
            for _ in 0..rng.below(4) {
                if !pool.is_empty() {
                    let i = rng.below(pool.len() as u64) as usize;
                    changed.extend(pool.swap_remove(i).map(|r| r as u32));
                }
            }
            if !templates.is_empty() {
                for _ in 0..rng.below(4) {
                    if !pool.is_empty() {
                        let i = rng.below(pool.len() as u64) as usize;
                        pool.put(i, &templates, rng.below(templates.len() as u64) as usize);
                        changed.push(i as u32);
                    }
                }
                for _ in 0..rng.below(12) {
                    let i = pool.len();
                    pool.put(i, &templates, rng.below(templates.len() as u64) as usize);
                    if rng.below(3) == 0 && i > 0 {
                        pool.arrival_ms[i] = pool.arrival_ms[rng.below(i as u64) as usize];
                    }
                    // Rows past the last tick's are new whether listed or not; a row below, freed by a
                    // removal and written again, must be listed.
                    if i < previous_len || rng.below(2) == 0 {
                        changed.push(i as u32);
                    }
                }
            }
        }
    }

    #[test]
    fn every_match_satisfies_every_constraint(c in case()) {
        let pool = build(&c);
        let rs = rulesets(&c);
        let p = params(&c, &rs);
        let m = run(&pool, &p);
        if let Err(e) = check_invariants(&pool, &p, &m) {
            return Err(TestCaseError::fail(e));
        }
        // Determinism.
        prop_assert_eq!(run(&pool, &p), m);
    }

    #[test]
    fn rule_diagnostics_are_consistent_with_the_matches(c in case()) {
        let pool = build(&c);
        // One more ruleset, in no ticket's mask (the case's masks only use its own rulesets).
        let mut rs = rulesets(&c);
        rs.push(Ruleset { teams: 1, team_size: 2, max_skill_spread: 0.0, max_team_imbalance: 0.0, max_latency_ms: 0, require_host: true, relaxation: &[], expansion: Expansion::NONE });
        let p = params(&c, &rs);
        let (m, d) = run_diagnosed(&pool, &p);
        prop_assert_eq!(d.len(), rs.len());
        prop_assert_eq!(d[c.rulesets.len()], RuleDiagnostics::default());
        // The same input, the same counts; and the counts do not change the matches.
        prop_assert_eq!(&run_diagnosed(&pool, &p), &(m.clone(), d.clone()));
        prop_assert_eq!(&run(&pool, &p), &m);
        let mut matched = vec![false; pool.len()];
        for t in m.iter().flat_map(|mm| &mm.tickets) {
            matched[*t as usize] = true;
        }
        for (r, (d, rs)) in d.iter().zip(&rs).enumerate() {
            let competing = (0..pool.len()).filter(|&t| pool.ruleset_mask[t] >> r & 1 == 1);
            let waiting = competing.clone().filter(|&t| !matched[t]).count() as u64;
            // A ticket left waiting failed in each of its rulesets (as a seed or set aside); no ticket
            // fails in a ruleset twice in one tick.
            prop_assert!(waiting <= d.failed && d.failed <= competing.count() as u64, "ruleset {}: {:?}", r, d);
            // Every rejection belongs to a failed candidate: a ticket its scan examined, or one per
            // candidate (its seed, its balance) or two (the window's edges).
            let rejected: u64 = d.rejections.iter().sum();
            prop_assert!(rejected <= d.examined + 2 * d.failed, "ruleset {}: {:?}", r, d);
            let limit = (rs.players_per_match() as u64 * 16).clamp(64, 16_384);
            prop_assert!(d.examined <= d.failed * limit, "ruleset {}: {:?}", r, d);
        }
    }

    #[test]
    fn the_per_ticket_record_names_every_waiting_ticket_and_changes_nothing(c in case()) {
        let pool = build(&c);
        let rs = rulesets(&c);
        let p = params(&c, &rs);
        let (m, d, refusals) = run_recorded(&pool, &p);
        // Recording changes neither the matches nor the counts, and is itself deterministic.
        prop_assert_eq!(&run_diagnosed(&pool, &p), &(m.clone(), d.clone()));
        prop_assert_eq!(&run_recorded(&pool, &p).2, &refusals);
        let mut matched = vec![false; pool.len()];
        for t in m.iter().flat_map(|mm| &mm.tickets) {
            matched[*t as usize] = true;
        }
        for (t, &code) in refusals.iter().enumerate() {
            if matched[t] {
                prop_assert_eq!(code, TicketRefusal::NONE, "ticket {} is matched", t);
            } else {
                // Every ticket of the case is in one of its rulesets: a waiting one has a reason.
                let refusal = TicketRefusal::from_code(code);
                prop_assert!(refusal.is_some(), "ticket {} waits with code {}", t, code);
                // A reason the ticket's own rulesets counted.
                if let Some(TicketRefusal::Rejected(reason)) = refusal {
                    let counted = (0..rs.len()).any(|r| pool.ruleset_mask[t] >> r & 1 == 1 && d[r].rejected(reason) > 0);
                    prop_assert!(counted, "ticket {}: {:?} counted in none of its rulesets", t, reason);
                }
            }
        }
    }

    #[test]
    fn threads_change_nothing(c in case(), threads in 2usize..=4) {
        let pool = build(&c);
        let rs = rulesets(&c);
        let p = params(&c, &rs);
        // The matches, the counts and the per-ticket record, bit for bit.
        prop_assert_eq!(run_recorded_in(&pool, &p, threaded(threads)), run_recorded(&pool, &p));
    }

    #[test]
    fn obvious_match_is_found(c in case(), teams in 1u32..=3, team_size in 1u32..=4) {
        // Noise from `c`, plus teams*team_size identical solos that are compatible with anything,
        // have zero latency everywhere, and compete only in ruleset 0 (made easy to satisfy).
        let mut c = c;
        for t in &mut c.tickets {
            t.mask &= !1; // keep the noise out of ruleset 0
            if t.mask == 0 { t.mask = 2; }
        }
        c.rulesets[0] = RulesetSpec {
            teams, team_size, spread: 0.5, imbalance: f64::INFINITY, latency: 50, require_host: c.hosts > 0, relax: vec![],
            expansion: Expansion::NONE,
        };
        let mut pool = build(&c);
        for _ in 0..teams * team_size {
            pool.add(1, 0.5, NOW - 1_000.0, 1);
        }
        let rs = rulesets(&c);
        let p = params(&c, &rs);
        let m = run(&pool, &p);
        prop_assert!(m.iter().any(|mm| mm.ruleset == 0), "no ruleset-0 match formed");
        if let Err(e) = check_invariants(&pool, &p, &m) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn single_ruleset_pool_of_compatible_solos_is_fully_matched(k in 1usize..8, teams in 1u32..=3, team_size in 1u32..=3, seed in any::<u64>()) {
        // k full matches' worth of identical solos: everyone must be matched.
        let mut pool = Pool::new(vec![FilterMode::Overlap], 2);
        for i in 0..k * (teams * team_size) as usize {
            let t = pool.add(1, 0.5, NOW - i as f64, 1);
            pool.set_latency(t, &[10, 20]);
        }
        let rs = [Ruleset { teams, team_size, max_skill_spread: 0.1, max_team_imbalance: 0.0, max_latency_ms: 50, require_host: true, relaxation: &[], expansion: Expansion::NONE }];
        let filters = pool.filters.clone();
        let p = TickParams { mmr_normalization_ref: 0.1, party_synergy_bonus: 0.0, filters: &filters, rulesets: &rs, now_ms: NOW, seed };
        let m = run(&pool, &p);
        prop_assert_eq!(m.len(), k);
        prop_assert!(m.iter().all(|mm| mm.preferred_host == 0 && mm.acceptable_hosts == [0b11]));
        if let Err(e) = check_invariants(&pool, &p, &m) {
            return Err(TestCaseError::fail(e));
        }
    }
}
