//! Runs the shared JSON fixtures in tests/fixtures/ (also meant for the TypeScript side).
mod common;

use common::{check_invariants, Pool};
use matchmaker_engine::{Expansion, FilterMode, RelaxationStep, Ruleset, TickParams, NO_HOST};
use serde_json::Value;
use std::path::Path;

fn u64_of(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.parse().expect("u64 decimal string"),
        Value::Number(n) => n.as_u64().expect("u64"),
        other => panic!("not a u64: {other}"),
    }
}

fn f64_or_inf(v: &Value) -> f64 {
    if v.is_null() {
        f64::INFINITY
    } else {
        v.as_f64().expect("number")
    }
}

fn run_fixture(path: &Path) {
    let name = path.display().to_string();
    let fx: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let p = &fx["params"];
    let filters: Vec<FilterMode> = p["filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m.as_str().unwrap() {
            "overlap" => FilterMode::Overlap,
            "containment" => FilterMode::Containment,
            other => panic!("{name}: unknown filter mode {other}"),
        })
        .collect();
    let hosts = p["host_count"].as_u64().unwrap() as usize;
    let mut pool = Pool::new(filters.clone(), hosts);
    for t in fx["tickets"].as_array().unwrap() {
        let i = pool.add(
            t["party_size"].as_u64().unwrap() as u8,
            t["mmr_mean"].as_f64().unwrap(),
            t["arrival_ms"].as_f64().unwrap(),
            t["ruleset_mask"].as_u64().unwrap() as u32,
        );
        let vals = t["attr_values"].as_array().unwrap();
        let accs = t["attr_accepts"].as_array().unwrap();
        for f in 0..vals.len() {
            pool.set_attr(i, f, u64_of(&vals[f]), u64_of(&accs[f]));
        }
        let lat: Vec<u16> = t["latency_ms"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u16).collect();
        if !lat.is_empty() {
            pool.set_latency(i, &lat);
        }
    }
    let steps: Vec<Vec<RelaxationStep>> = fx["rulesets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["relaxation"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| RelaxationStep {
                    after_wait_ms: s["after_wait_ms"].as_f64().unwrap(),
                    max_skill_spread: s["max_skill_spread"].as_f64().unwrap(),
                    max_latency_ms: s["max_latency_ms"].as_u64().unwrap() as u32,
                })
                .collect()
        })
        .collect();
    let rulesets: Vec<Ruleset> = fx["rulesets"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&steps)
        .map(|(r, s)| Ruleset {
            teams: r["teams"].as_u64().unwrap() as u32,
            team_size: r["team_size"].as_u64().unwrap() as u32,
            max_skill_spread: f64_or_inf(&r["max_skill_spread"]),
            max_team_imbalance: f64_or_inf(&r["max_team_imbalance"]),
            max_latency_ms: r["max_latency_ms"].as_u64().unwrap() as u32,
            require_host: r["require_host"].as_bool().unwrap(),
            relaxation: s,
            expansion: Expansion::NONE,
        })
        .collect();
    let params = TickParams {
        mmr_normalization_ref: p["mmr_normalization_ref"].as_f64().unwrap(),
        party_synergy_bonus: p["party_synergy_bonus"].as_f64().unwrap(),
        filters: &filters,
        rulesets: &rulesets,
        now_ms: p["now_ms"].as_f64().unwrap(),
        seed: u64_of(&p["seed"]),
    };
    let got = common::run(&pool, &params);
    check_invariants(&pool, &params, &got).unwrap_or_else(|e| panic!("{name}: {e}"));

    let exp = &fx["expect"];
    assert_eq!(got.len() as u64, exp["match_count"].as_u64().unwrap(), "{name}: match count, got {got:?}");
    let matched: Vec<u32> = got.iter().flat_map(|m| m.tickets.iter().copied()).collect();
    if let Some(un) = exp["unmatched"].as_array() {
        for t in un {
            let t = t.as_u64().unwrap() as u32;
            assert!(!matched.contains(&t), "{name}: ticket {t} should be unmatched");
        }
    }
    if let Some(c) = exp["contains"].as_array() {
        for t in c {
            let t = t.as_u64().unwrap() as u32;
            assert!(matched.contains(&t), "{name}: ticket {t} should be matched");
        }
    }
    for em in exp["matches"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let want: Vec<u32> = em["tickets"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        let m = got
            .iter()
            .find(|m| m.sorted_tickets() == want)
            .unwrap_or_else(|| panic!("{name}: no match with tickets {want:?} in {got:?}"));
        if let Some(r) = em["ruleset"].as_u64() {
            assert_eq!(u64::from(m.ruleset), r, "{name}: ruleset");
        }
        if let Some(ph) = em.get("preferred_host") {
            let want = if ph.is_null() { NO_HOST } else { ph.as_u64().unwrap() as u32 };
            assert_eq!(m.preferred_host, want, "{name}: preferred host");
        }
        if let Some(ah) = em.get("acceptable_hosts") {
            assert_eq!(m.acceptable_hosts, [u64_of(ah)], "{name}: acceptable hosts");
        }
        if let Some(acc) = em["accepts"].as_array() {
            let want: Vec<u64> = acc.iter().map(u64_of).collect();
            assert_eq!(m.accepts, want, "{name}: accepts");
        }
        if let Some(teams) = em["teams"].as_array() {
            // Each listed group shares one team, and different groups are on different teams.
            let mut seen = Vec::new();
            for group in teams {
                let ids: Vec<u32> = group.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
                let team = m.team_of(ids[0]).unwrap();
                assert!(ids.iter().all(|&t| m.team_of(t) == Some(team)), "{name}: group {ids:?} split");
                assert!(!seen.contains(&team), "{name}: two groups on team {team}");
                seen.push(team);
            }
        }
    }
}

#[test]
fn shared_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 8, "fixtures missing in {}", dir.display());
    for p in &paths {
        run_fixture(p);
    }
}
