//! Tick timing on seeded synthetic pools: 2x5, parties of 1..=5, 3 filters, 8 hosts.
//! Run with `cargo bench -p matchmaker-engine`. Plain `Instant`, no harness. `TICK_BENCH_SIZES` (e.g.
//! `100000`) limits the pool sizes and `TICK_BENCH_REPEAT` multiplies the ticks timed per size;
//! `TICK_BENCH_EXPANSION=none` turns the bounds' widening off. `TICK_BENCH_REFUSALS=1` records the
//! per-ticket refusals (docs/rule-diagnostics.md, "Per ticket") in every tick;
//! `TICK_BENCH_REFUSALS=compare` times ticks without and with the record alternately, on the same pool
//! and workspace, and reports both. Each size also ticks the same pool with its third filter spread over 256
//! values (four columns; the same values, so the same matches) and prints its best over the narrow tick's: what
//! a filter past 64 values costs; and the same pool with 56 and 64 more hosts that no ticket reaches (64 hosts on
//! one-word host sets, 72 on two-word ones); `TICK_BENCH_WIDE=0` skips those. Each size also times a plain sort of the pool's skill keys, `(f64, u32)`
//! pairs with `sort_unstable_by`, and prints the tick's best over the sort's best: the baseline the engine's
//! speed is read against, from the same run on the same machine. Each size also ticks on several threads
//! (`TICK_BENCH_THREADS`, default every core), in turn with one thread, and prints how much faster (best over
//! best, and the median of the pairs' ratios: a pair ran one after the other) and
//! whether the output is the same; `TICK_BENCH_SPREAD_FROM` sets the fewest live tickets those workspaces
//! spread over their threads (`Workspace::spread_from`; default the engine's 100,000, so smaller pools tick on
//! one). Each size then ticks a waiting pool in steady state (`TICK_BENCH_STEADY=0` skips it): the same generator with skills spread 10,000 times wider, so most
//! tickets wait for their bounds to widen, and 1% new tickets a tick after the matched ones leave; each
//! tick updates the layout the last one kept (`run_tick_changed`) and, in turn on the same pool, lays it
//! out whole (`run_tick`), and, on each of `TICK_BENCH_THREADS`, updates its kept layout on that many threads;
//! the bench prints each, their ratios, whether the output is the same and the last steady tick's rule diagnostics.

#[path = "../tests/common/mod.rs"]
mod common;

use common::{Pool, Rng};
use matchmaker_engine::{
    run_tick, run_tick_changed, Curve, Expansion, FilterMode, MatchOutput, OutputCapacity, PoolChanges, Rejection,
    RelaxationStep, Ruleset, TickParams, Workspace,
};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

const F: usize = 3;
const H: usize = 8;
const NOW: f64 = 1_700_000_000_000.0;
/// The bench pool's filters with the third spread over four columns (`widen_third_filter`).
const WIDE_FILTERS: [FilterMode; 6] = [
    FilterMode::Overlap,
    FilterMode::Containment,
    FilterMode::Overlap,
    FilterMode::Continued,
    FilterMode::Continued,
    FilterMode::Continued,
];

fn generate(n: usize, seed: u64) -> Pool {
    let mut rng = Rng(seed);
    let filters = vec![FilterMode::Overlap, FilterMode::Containment, FilterMode::Overlap];
    let mut p = Pool {
        party_size: Vec::with_capacity(n),
        mmr_mean: Vec::with_capacity(n),
        arrival_ms: Vec::with_capacity(n),
        ruleset_mask: Vec::with_capacity(n),
        attr_values: Vec::with_capacity(n * F),
        attr_accepts: Vec::with_capacity(n * F),
        latency_ms: Vec::with_capacity(n * H),
        ..Pool::new(filters, H)
    };
    for _ in 0..n {
        // Mostly solos, some full stacks.
        let size = match rng.below(100) {
            0..=59 => 1,
            60..=74 => 2,
            75..=84 => 3,
            85..=92 => 4,
            _ => 5,
        };
        p.party_size.push(size);
        // Roughly bell-shaped around 0.5 on the spec's 0..1 scale.
        let mmr = (rng.unit() + rng.unit() + rng.unit()) / 3.0;
        p.mmr_mean.push(mmr);
        p.arrival_ms.push(NOW - rng.unit() * 120_000.0);
        p.ruleset_mask.push(1);
        // Filter 0 (overlap, e.g. region): 60% unspecified, else one of 4 values.
        if rng.below(10) < 6 {
            p.attr_values.push(u64::MAX);
        } else {
            p.attr_values.push(1 << rng.below(4));
        }
        p.attr_accepts.push(u64::MAX);
        // Filter 1 (containment, e.g. game mode): 50% unspecified, else one of 3 values, accepts
        // its own value plus sometimes another.
        if rng.below(2) == 0 {
            p.attr_values.push(0);
            p.attr_accepts.push(u64::MAX);
        } else {
            let v = 1u64 << rng.below(3);
            p.attr_values.push(v);
            p.attr_accepts.push(v | (1 << rng.below(3)));
        }
        // Filter 2 (overlap, e.g. language): 70% unspecified, else 1-2 of 8 values.
        if rng.below(10) < 7 {
            p.attr_values.push(u64::MAX);
        } else {
            p.attr_values.push((1 << rng.below(8)) | (1 << rng.below(8)));
        }
        p.attr_accepts.push(u64::MAX);
        // One nearby region (20..80 ms), the rest far (80..300 ms).
        let home = rng.below(H as u64) as usize;
        for h in 0..H {
            let l = if h == home { 20 + rng.below(60) } else { 80 + rng.below(220) };
            p.latency_ms.push(l as u16);
        }
    }
    p
}

fn main() {
    let relax = [
        RelaxationStep { after_wait_ms: 30_000.0, max_skill_spread: 1.0, max_latency_ms: 200 },
        RelaxationStep { after_wait_ms: 90_000.0, max_skill_spread: 3.0, max_latency_ms: 300 },
    ];
    let rulesets = [Ruleset {
        teams: 2,
        team_size: 5,
        max_skill_spread: 0.5,
        max_team_imbalance: 0.2,
        max_latency_ms: 120,
        require_host: true,
        relaxation: &relax,
        // The queue config's default: bounds double every 2 s; latency does not widen.
        // TICK_BENCH_EXPANSION=none: no widening, the bounds of the engine before it had any.
        expansion: if std::env::var("TICK_BENCH_EXPANSION").is_ok_and(|v| v == "none") {
            Expansion::NONE
        } else {
            Expansion {
                curve: Curve::Exponential,
                over_ms: 2_000.0,
                max_skill_spread: f64::INFINITY,
                max_team_imbalance: f64::INFINITY,
                max_latency_ms: 120,
                any_host_after_ms: 10_000.0,
            }
        },
    }];
    let filters = [FilterMode::Overlap, FilterMode::Containment, FilterMode::Overlap];
    let params = TickParams {
        mmr_normalization_ref: 0.1,
        party_synergy_bonus: 0.01,
        filters: &filters,
        rulesets: &rulesets,
        now_ms: NOW,
        seed: 42,
    };

    // TICK_BENCH_SIZES=100000 (comma-separated) runs only those sizes, for profiling one of them.
    let only: Option<Vec<usize>> = std::env::var("TICK_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').map(|x| x.trim().parse().expect("TICK_BENCH_SIZES: numbers")).collect());
    let refusals = std::env::var("TICK_BENCH_REFUSALS").unwrap_or_default();
    let iters_scale: usize =
        std::env::var("TICK_BENCH_REPEAT").ok().map_or(1, |v| v.parse().expect("TICK_BENCH_REPEAT: a number"));
    // TICK_BENCH_THREADS=2,4 (comma-separated) also ticks each pool on that many threads; by default on
    // every core, when there are several.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let thread_counts: Vec<usize> = match std::env::var("TICK_BENCH_THREADS") {
        Ok(v) => v.split(',').map(|x| x.trim().parse().expect("TICK_BENCH_THREADS: numbers")).collect(),
        Err(_) if cores > 1 => vec![cores],
        Err(_) => vec![],
    };
    for &(n, iters) in &[(10_000usize, 50usize), (100_000, 20), (1_000_000, 5)] {
        if only.as_ref().is_some_and(|sizes| !sizes.contains(&n)) {
            continue;
        }
        let iters = iters * iters_scale;
        let p = generate(n, 7);
        let pool = p.columns();
        let mut ws = Workspace::with_capacity(n, F, H);
        let mut plain = MatchOutput::with_capacity(OutputCapacity::for_pool(n, F, H));
        let mut recording = plain.clone().recording_refusals();
        // Which output each timed tick writes: false without the per-ticket record, true with it.
        let modes: &[bool] = match refusals.as_str() {
            "compare" => &[false, true],
            "1" => &[true],
            _ => &[false],
        };
        // Warm-up tick: grows the workspace to steady state.
        let matches = run_tick(&pool, &params, &mut ws, &mut plain.buffers()).expect("valid input");
        let matched_tickets = plain.match_offsets[matches] as usize;
        let mut best = [f64::INFINITY; 2];
        let mut total = [0.0; 2];
        for _ in 0..iters {
            for &record in modes {
                let out = if record { &mut recording } else { &mut plain };
                let t0 = Instant::now();
                let m = run_tick(black_box(&pool), &params, &mut ws, &mut out.buffers()).expect("valid input");
                let ms = t0.elapsed().as_secs_f64() * 1e3;
                black_box(m);
                let i = usize::from(record);
                best[i] = best[i].min(ms);
                total[i] += ms;
            }
        }
        for &record in modes {
            let i = usize::from(record);
            println!(
                "tick n={n:>9}{}: mean {:>8.2} ms, best {:>8.2} ms ({iters} ticks) | {matches} matches, {matched_tickets} tickets matched ({:.1}%)",
                if record { " (refusals recorded)" } else { "" },
                total[i] / iters as f64,
                best[i],
                100.0 * matched_tickets as f64 / n as f64
            );
        }
        if std::env::var("TICK_BENCH_WIDE").map_or(true, |v| v != "0") {
            let wide = widen_third_filter(&p);
            let wide_params = TickParams { filters: &WIDE_FILTERS, ..params };
            let wide_pool = wide.columns();
            let mut wide_ws = Workspace::with_capacity(n, WIDE_FILTERS.len(), H);
            let mut wide_out = MatchOutput::with_capacity(OutputCapacity::for_pool(n, WIDE_FILTERS.len(), H));
            let wide_matches =
                run_tick(&wide_pool, &wide_params, &mut wide_ws, &mut wide_out.buffers()).expect("valid input");
            let same = wide_matches == matches
                && wide_out.match_offsets[..=matches] == plain.match_offsets[..=matches]
                && wide_out.match_tickets[..matched_tickets] == plain.match_tickets[..matched_tickets];
            let mut wide_best = f64::INFINITY;
            for _ in 0..iters {
                let t0 = Instant::now();
                black_box(
                    run_tick(black_box(&wide_pool), &wide_params, &mut wide_ws, &mut wide_out.buffers())
                        .expect("valid input"),
                );
                wide_best = wide_best.min(t0.elapsed().as_secs_f64() * 1e3);
            }
            println!(
                "  third filter over 256 values (4 columns): best {wide_best:.2} ms, {:.2}x the narrow tick; same matches: {same}",
                wide_best / best[0]
            );
            // 64 and 72 hosts: the pool's 8, and more that no ticket reaches (65535 ms), so the same matches;
            // 64 on one-word host sets, 72 on two-word ones.
            for extra in [56, 64] {
                let hosts = with_unreachable_hosts(&p, extra);
                let hosts_pool = hosts.columns();
                let mut hosts_ws = Workspace::with_capacity(n, F, hosts.host_count);
                let mut hosts_out = MatchOutput::with_capacity(OutputCapacity::for_pool(n, F, hosts.host_count));
                let hosts_matches =
                    run_tick(&hosts_pool, &params, &mut hosts_ws, &mut hosts_out.buffers()).expect("valid input");
                let same = hosts_matches == matches
                    && hosts_out.match_offsets[..=matches] == plain.match_offsets[..=matches]
                    && hosts_out.match_tickets[..matched_tickets] == plain.match_tickets[..matched_tickets]
                    && hosts_out.match_preferred_host[..matches] == plain.match_preferred_host[..matches];
                let mut hosts_best = f64::INFINITY;
                for _ in 0..iters {
                    let t0 = Instant::now();
                    let m = run_tick(black_box(&hosts_pool), &params, &mut hosts_ws, &mut hosts_out.buffers());
                    black_box(m.expect("valid input"));
                    hosts_best = hosts_best.min(t0.elapsed().as_secs_f64() * 1e3);
                }
                println!(
                    "  {} hosts, {extra} out of reach: best {hosts_best:.2} ms, {:.2}x the narrow tick; same matches: {same}",
                    hosts.host_count,
                    hosts_best / best[0]
                );
            }
        }
        let sort_ms = best_sort_ms(&p.mmr_mean, iters);
        println!(
            "  sort of {n} (f64, u32) keys: best {sort_ms:.2} ms; tick best / sort best {:.1}x",
            best[0] / sort_ms
        );
        for &threads in &thread_counts {
            // One thread and `threads` ticks in turn, so both meet the same machine.
            let pool_of = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
            let mut spread_ws = spread(Workspace::with_capacity(n, F, H).with_threads(Arc::new(pool_of)));
            let mut spread_out = MatchOutput::with_capacity(OutputCapacity::for_pool(n, F, H));
            let spread_matches =
                run_tick(&pool, &params, &mut spread_ws, &mut spread_out.buffers()).expect("valid input");
            let same = spread_matches == matches && spread_out == plain;
            let (mut one, mut many) = (f64::INFINITY, f64::INFINITY);
            // Each pair's ratio too: on a shared machine the two bests may come from different moments, while
            // a pair's two ticks ran one after the other.
            let mut ratios = Vec::with_capacity(iters);
            for _ in 0..iters {
                let t0 = Instant::now();
                black_box(run_tick(black_box(&pool), &params, &mut ws, &mut plain.buffers()).expect("valid input"));
                let one_ms = t0.elapsed().as_secs_f64() * 1e3;
                let t0 = Instant::now();
                let m = run_tick(black_box(&pool), &params, &mut spread_ws, &mut spread_out.buffers());
                black_box(m.expect("valid input"));
                let many_ms = t0.elapsed().as_secs_f64() * 1e3;
                (one, many) = (one.min(one_ms), many.min(many_ms));
                ratios.push(one_ms / many_ms);
            }
            println!(
                "  {threads} threads: best {many:.2} ms against {one:.2} ms on one ({:.2}x faster; median of {iters} pairs {:.2}x); tick best / sort best {:.1}x; same output: {same}",
                one / many,
                median(&mut ratios),
                many / sort_ms
            );
        }
        if modes.len() == 2 {
            println!(
                "  recording the refusals: mean {:+.2}%, best {:+.2}%",
                100.0 * (total[1] / total[0] - 1.0),
                100.0 * (best[1] / best[0] - 1.0)
            );
        }
        // What the last tick's failed candidates ran into (docs/rule-diagnostics.md).
        let d = &ws.rule_diagnostics()[0];
        let reasons: Vec<String> = Rejection::ALL.iter().map(|&r| format!("{} {}", r.name(), d.rejected(r))).collect();
        println!("  failed candidates {}, examined {} | {}", d.failed, d.examined, reasons.join(", "));
        if std::env::var("TICK_BENCH_STEADY").map_or(true, |v| v != "0") {
            steady(n, iters, &params, &thread_counts);
        }
    }
}

/// A waiting pool of `n` tickets in steady state: ticks that update their kept layout against ticks that lay
/// the same pool out whole, and ticks that update their kept layout on each of `thread_counts` threads,
/// `iters` of each, in turn (module doc).
fn steady(n: usize, iters: usize, params: &TickParams<'_>, thread_counts: &[usize]) {
    const SCALE: f64 = 10_000.0;
    // The first ticks lay the pool out and match what the first tick's wide bounds reach: not timed.
    const WARM_UP: usize = 2;
    let waiting = |seed: u64, count: usize, now: f64| {
        let mut p = generate(count, seed);
        let mut rng = Rng(seed);
        for (m, a) in p.mmr_mean.iter_mut().zip(&mut p.arrival_ms) {
            *m *= SCALE;
            *a = (now - rng.unit() * 2_000.0).floor();
        }
        p
    };
    /// One way of ticking the pool: its workspace and output, whether it keeps its layout, its times.
    struct Way {
        ws: Workspace,
        out: MatchOutput,
        kept: bool,
        best: f64,
        total: f64,
        /// Each timed tick's ms, for the paired ratios.
        times: Vec<f64>,
        updated: usize,
    }
    let mut pool = waiting(17, n, NOW);
    let arrivals = waiting(18, n / 100 * (iters + WARM_UP), NOW);
    let cap = OutputCapacity::for_pool(2 * n, F, H);
    let way = |ws: Workspace, kept: bool| Way {
        ws,
        out: MatchOutput::with_capacity(cap),
        kept,
        best: f64::INFINITY,
        total: 0.0,
        times: Vec::new(),
        updated: 0,
    };
    // The first keeps its layout on one thread (its matches drive the churn), the second lays the pool out
    // whole, the others keep theirs on threads.
    let mut ways = vec![way(Workspace::with_capacity(n, F, H), true), way(Workspace::with_capacity(n, F, H), false)];
    for &threads in thread_counts {
        let pool_of = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a thread pool");
        ways.push(way(spread(Workspace::with_capacity(n, F, H).with_threads(Arc::new(pool_of))), true));
    }
    let (mut changed, mut previous_len) = (Vec::<u32>::new(), 0);
    let (mut same, mut matched_total) = (true, 0);
    for t in 0..iters + WARM_UP {
        let now_ms = NOW + 250.0 * t as f64;
        let p = TickParams { now_ms, seed: 42 + t as u64, ..*params };
        let changes = PoolChanges { previous_len, rows: &changed };
        let mut count = None;
        for w in &mut ways {
            let t0 = Instant::now();
            let m = if w.kept {
                run_tick_changed(black_box(&pool.columns()), &changes, &p, &mut w.ws, &mut w.out.buffers())
            } else {
                run_tick(black_box(&pool.columns()), &p, &mut w.ws, &mut w.out.buffers())
            };
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let m = m.expect("valid input");
            same &= *count.get_or_insert(m) == m;
            if t >= WARM_UP {
                (w.best, w.total) = (w.best.min(ms), w.total + ms);
                w.times.push(ms);
                w.updated += usize::from(w.ws.updated_layout());
            }
        }
        same &= ways.iter().all(|w| w.out == ways[0].out);
        let out = &ways[0].out;
        let matched = out.match_offsets[count.unwrap_or(0)] as usize;
        if t >= WARM_UP {
            matched_total += matched;
        }
        previous_len = pool.len();
        changed.clear();
        let mut rows: Vec<usize> = out.match_tickets[..matched].iter().map(|&r| r as usize).collect();
        rows.sort_unstable_by(|a, b| b.cmp(a));
        for r in rows {
            changed.extend(pool.swap_remove(r).map(|r| r as u32));
        }
        for k in 0..n / 100 {
            let i = pool.len();
            pool.put(i, &arrivals, t * (n / 100) + k);
            pool.arrival_ms[i] = (now_ms + k as f64 * 250.0 / (n / 100) as f64).floor();
            if i < previous_len {
                changed.push(i as u32);
            }
        }
    }
    let mean = |w: &Way| w.total / iters as f64;
    let (kept, whole) = (&ways[0], &ways[1]);
    println!(
        "  steady, a waiting pool of {} with 1% new a tick ({:.2}% matched a tick): kept layout mean {:.2} ms, best {:.2} ms; laid out whole mean {:.2} ms, best {:.2} ms; best / best {:.2}x; {} of {iters} ticks updated; same output: {same}; workspace B/ticket {:.0} kept, {:.0} whole",
        pool.len(),
        100.0 * matched_total as f64 / (iters * pool.len()) as f64,
        mean(kept),
        kept.best,
        mean(whole),
        whole.best,
        kept.best / whole.best,
        kept.updated,
        kept.ws.pool_bytes() as f64 / pool.len() as f64,
        whole.ws.pool_bytes() as f64 / pool.len() as f64,
    );
    let d = &kept.ws.rule_diagnostics()[0];
    let reasons: Vec<String> = Rejection::ALL.iter().map(|&r| format!("{} {}", r.name(), d.rejected(r))).collect();
    println!(
        "  steady, the last tick's failed candidates {}, examined {} | {}",
        d.failed,
        d.examined,
        reasons.join(", ")
    );
    for (w, threads) in ways[2..].iter().zip(thread_counts) {
        // Each round's one-thread time over this one's: the two ticked the same pool in the same round.
        let mut ratios: Vec<f64> = kept.times.iter().zip(&w.times).map(|(one, many)| one / many).collect();
        println!(
            "  steady, kept layout on {threads} threads: mean {:.2} ms, best {:.2} ms ({:.2}x faster than one thread; median of {iters} pairs {:.2}x); {} of {iters} ticks updated",
            mean(w),
            w.best,
            kept.best / w.best,
            median(&mut ratios),
            w.updated
        );
    }
}

/// The pool with its third filter (overlap, values 0..8) as a filter of 256 values in four columns: value
/// b becomes value 32 b (column b / 2), so every pair of tickets is exactly as compatible as before.
fn widen_third_filter(p: &Pool) -> Pool {
    let mut wide = Pool {
        attr_values: Vec::with_capacity(p.len() * (F + 3)),
        attr_accepts: Vec::with_capacity(p.len() * (F + 3)),
        ..p.clone()
    };
    wide.attr_values.clear();
    wide.attr_accepts.clear();
    for i in 0..p.len() {
        wide.attr_values.extend_from_slice(&p.attr_values[i * F..i * F + 2]);
        wide.attr_accepts.extend_from_slice(&p.attr_accepts[i * F..i * F + 2]);
        let (v, a) = (p.attr_values[i * F + 2], p.attr_accepts[i * F + 2]);
        let mut columns = [u64::MAX; 4];
        if v != u64::MAX {
            columns = [0; 4];
            for b in (0..8).filter(|b| v >> b & 1 == 1) {
                columns[b / 2] |= 1 << (32 * b % 64);
            }
        }
        wide.attr_values.extend_from_slice(&columns);
        wide.attr_accepts.extend_from_slice(&[a; 4]);
    }
    wide.filters = WIDE_FILTERS.to_vec();
    wide
}

/// The pool with `extra` more hosts after its own, at 65535 ms from every ticket (never acceptable, never
/// preferred).
fn with_unreachable_hosts(p: &Pool, extra: usize) -> Pool {
    let h = p.host_count + extra;
    let mut latency_ms = Vec::with_capacity(p.len() * h);
    for row in p.latency_ms.chunks_exact(p.host_count) {
        latency_ms.extend_from_slice(row);
        latency_ms.extend(std::iter::repeat_n(u16::MAX, extra));
    }
    Pool { host_count: h, latency_ms, ..p.clone() }
}

/// The best of `iters` unstable sorts of (skill, index) pairs by skill; each sort starts from the unsorted keys.
fn best_sort_ms(skills: &[f64], iters: usize) -> f64 {
    let keys: Vec<(f64, u32)> = skills.iter().enumerate().map(|(i, &s)| (s, i as u32)).collect();
    let mut best = f64::INFINITY;
    for _ in 0..iters {
        let mut v = keys.clone();
        let t0 = Instant::now();
        v.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        best = best.min(t0.elapsed().as_secs_f64() * 1e3);
        black_box(&v);
    }
    best
}

/// The workspace with `TICK_BENCH_SPREAD_FROM`'s threshold, if set.
fn spread(ws: Workspace) -> Workspace {
    match std::env::var("TICK_BENCH_SPREAD_FROM") {
        Ok(v) => ws.spread_from(v.parse().expect("TICK_BENCH_SPREAD_FROM: a number")),
        Err(_) => ws,
    }
}

/// The median of `xs` (the mean of the middle two for an even count).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_unstable_by(f64::total_cmp);
    let k = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[k]
    } else {
        (xs[k - 1] + xs[k]) / 2.0
    }
}
