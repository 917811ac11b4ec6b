//! Backfill: fill a running match's open slots from the pool, before new matches form.
//!
//! Each request describes the running match: its ruleset, its open slots, the mean mmr of the players it
//! has (the skill target, `NaN` when unknown), its host (`NO_HOST` when unknown) and its attribute masks
//! (encoded like a ticket's). Requests are served oldest first; each takes compatible tickets nearest to
//! its skill target until its slots are full or no candidate is left. Complexity: O(requests x pool) plus
//! sorting each request's candidates, which suits the few requests a queue holds at a time.
use crate::input::{compatible, filter_groups};
use crate::{EngineError, FilterMode, PoolColumns, TickParams, NO_HOST};

/// One queue's open backfill requests as columns; r = `ruleset.len()`, F = the pool's filter count.
#[derive(Clone, Copy, Debug)]
pub struct BackfillColumns<'a> {
    /// Index of the ruleset the running match plays.
    pub ruleset: &'a [u32],
    /// Open slots (players), >= 1.
    pub slots: &'a [u32],
    /// Mean mmr of the match's current players; `NaN` when the request carries none (no skill bound).
    pub skill: &'a [f64],
    /// Host index of the running match, or `NO_HOST` (no latency bound).
    pub host: &'a [u32],
    /// When the request was posted (epoch ms): its wait selects the relaxation step, and older ones go first.
    pub arrival_ms: &'a [f64],
    /// Attribute masks, r x F row-major, encoded like the pool's.
    pub attr_values: &'a [u64],
    pub attr_accepts: &'a [u64],
}

/// Caller-owned output: request q's tickets are `assigned[offsets[q]..offsets[q + 1]]` (pool rows); a
/// request with none was not filled. `offsets` needs r + 1 entries, `assigned` the pool size.
#[derive(Debug)]
pub struct BackfillBuffers<'a> {
    pub offsets: &'a mut [u32],
    pub assigned: &'a mut [u32],
}

/// Reusable scratch memory.
#[derive(Debug, Default)]
pub struct BackfillWorkspace {
    used: Vec<bool>,
    order: Vec<usize>,
    candidates: Vec<(f64, u32)>,
    /// Per request, its run in `served` (requests are served in arrival order, reported in index order).
    runs: Vec<(u32, u32)>,
    served: Vec<u32>,
}

impl BackfillWorkspace {
    pub fn new() -> Self {
        Self::default()
    }
}

/// Fills backfill requests; answers how many got at least one ticket.
pub fn run_backfill(
    pool: &PoolColumns<'_>,
    requests: &BackfillColumns<'_>,
    params: &TickParams<'_>,
    ws: &mut BackfillWorkspace,
    out: &mut BackfillBuffers<'_>,
) -> Result<usize, EngineError> {
    let n = pool.len();
    let r = requests.ruleset.len();
    let f = pool.filter_count;
    let h = pool.host_count;
    let check = |column: &'static str, expected: usize, actual: usize| {
        if expected == actual {
            Ok(())
        } else {
            Err(EngineError::ColumnLength { column, expected, actual })
        }
    };
    check("backfill slots", r, requests.slots.len())?;
    check("backfill skill", r, requests.skill.len())?;
    check("backfill host", r, requests.host.len())?;
    check("backfill arrival_ms", r, requests.arrival_ms.len())?;
    check("backfill attr_values", r * f, requests.attr_values.len())?;
    check("backfill attr_accepts", r * f, requests.attr_accepts.len())?;
    check("party_size", n, pool.party_size.len())?;
    check("mmr_mean", n, pool.mmr_mean.len())?;
    check("arrival_ms", n, pool.arrival_ms.len())?;
    check("ruleset_mask", n, pool.ruleset_mask.len())?;
    check("attr_values", n * f, pool.attr_values.len())?;
    check("attr_accepts", n * f, pool.attr_accepts.len())?;
    check("latency_ms", n * h, pool.latency_ms.len())?;
    if params.filters.len() != f {
        return Err(EngineError::FilterCount { pool: f, params: params.filters.len() });
    }
    if params.filters.first() == Some(&FilterMode::Continued) {
        return Err(EngineError::InvalidParam { name: "filters", reason: "the first column cannot be Continued" });
    }
    if out.offsets.len() < r + 1 {
        return Err(EngineError::BufferTooSmall { buffer: "offsets", required: r + 1, actual: out.offsets.len() });
    }
    if out.assigned.len() < n {
        return Err(EngineError::BufferTooSmall { buffer: "assigned", required: n, actual: out.assigned.len() });
    }
    for q in 0..r {
        if requests.ruleset[q] as usize >= params.rulesets.len() {
            return Err(EngineError::InvalidParam { name: "backfill ruleset", reason: "no such ruleset" });
        }
        if requests.host[q] != NO_HOST && requests.host[q] as usize >= h {
            return Err(EngineError::InvalidParam { name: "backfill host", reason: "no such host" });
        }
    }

    ws.used.clear();
    ws.used.resize(n, false);
    // Oldest request first; ties by index, so the result is deterministic.
    ws.order.clear();
    ws.order.extend(0..r);
    ws.order.sort_by(|&a, &b| requests.arrival_ms[a].total_cmp(&requests.arrival_ms[b]).then(a.cmp(&b)));

    let reference = params.mmr_normalization_ref;
    let mut filled_count = 0;
    ws.runs.clear();
    ws.runs.resize(r, (0, 0));
    ws.served.clear();
    for &q in &ws.order {
        let ruleset = &params.rulesets[requests.ruleset[q] as usize];
        let bounds = ruleset.bounds_for_wait(params.now_ms - requests.arrival_ms[q]);
        let (spread, max_latency) = (bounds.max_skill_spread, bounds.max_latency_ms);
        let bit = 1u32 << requests.ruleset[q];
        let target = requests.skill[q];
        let host = requests.host[q];
        let request_attrs = q * f..(q + 1) * f;

        ws.candidates.clear();
        for i in 0..n {
            if ws.used[i] || pool.ruleset_mask[i] & bit == 0 || u32::from(pool.party_size[i]) > requests.slots[q] {
                continue;
            }
            if host != NO_HOST && u32::from(pool.latency_ms[i * h + host as usize]) > max_latency {
                continue;
            }
            let effective = params.effective_skill(pool.mmr_mean[i], pool.party_size[i]);
            let distance = if target.is_nan() { 0.0 } else { (effective - target).abs() / reference };
            if distance > spread {
                continue;
            }
            let (pv, pa) = (&pool.attr_values[i * f..(i + 1) * f], &pool.attr_accepts[i * f..(i + 1) * f]);
            let (rv, ra) =
                (&requests.attr_values[request_attrs.clone()], &requests.attr_accepts[request_attrs.clone()]);
            let fits = filter_groups(params.filters)
                .all(|(k, w, mode)| compatible(mode, &rv[k..k + w], &ra[k..k + w], &pv[k..k + w], &pa[k..k + w]));
            if fits {
                ws.candidates.push((distance, i as u32));
            }
        }
        // Nearest skill first; ties by row, so the result is deterministic.
        ws.candidates.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));

        let start = ws.served.len();
        let mut open = requests.slots[q];
        for &(_, row) in &ws.candidates {
            let i = row as usize;
            if open == 0 {
                break;
            }
            if u32::from(pool.party_size[i]) > open {
                continue;
            }
            // Pairwise with the tickets already taken for this request.
            let fits_taken = ws.served[start..].iter().all(|&j| {
                let j = j as usize;
                let (jv, ja) = (&pool.attr_values[j * f..(j + 1) * f], &pool.attr_accepts[j * f..(j + 1) * f]);
                let (iv, ia) = (&pool.attr_values[i * f..(i + 1) * f], &pool.attr_accepts[i * f..(i + 1) * f]);
                filter_groups(params.filters)
                    .all(|(k, w, mode)| compatible(mode, &iv[k..k + w], &ia[k..k + w], &jv[k..k + w], &ja[k..k + w]))
            });
            if !fits_taken {
                continue;
            }
            ws.served.push(row);
            ws.used[i] = true;
            open -= u32::from(pool.party_size[i]);
        }
        ws.runs[q] = (start as u32, ws.served.len() as u32);
        if ws.served.len() > start {
            filled_count += 1;
        }
    }
    // Report in request index order.
    let mut at = 0usize;
    for q in 0..r {
        out.offsets[q] = at as u32;
        let (start, end) = ws.runs[q];
        let run = &ws.served[start as usize..end as usize];
        out.assigned[at..at + run.len()].copy_from_slice(run);
        at += run.len();
    }
    out.offsets[r] = at as u32;
    Ok(filled_count)
}
