//! Input validation: `run_tick` refuses bad input here, before anything is written, so the tick
//! itself never panics or indexes out of bounds.

use crate::{
    Curve, EngineError, FilterMode, MatchBuffers, OutputCapacity, PoolChanges, PoolColumns, Ruleset, TickParams,
    MAX_HOSTS, MAX_PLAYERS_PER_MATCH, MAX_RULESETS,
};

fn check_len(column: &'static str, expected: usize, actual: usize) -> Result<(), EngineError> {
    if expected == actual {
        Ok(())
    } else {
        Err(EngineError::ColumnLength { column, expected, actual })
    }
}

fn check_buf(buffer: &'static str, required: usize, actual: usize) -> Result<(), EngineError> {
    if actual >= required {
        Ok(())
    } else {
        Err(EngineError::BufferTooSmall { buffer, required, actual })
    }
}

/// The pool's length at the last tick must fit the u32 indices. (A listed row past both lengths was
/// written and removed since: it is ignored.)
pub(crate) fn validate_changes(changes: &PoolChanges<'_>) -> Result<(), EngineError> {
    if changes.previous_len >= u32::MAX as usize {
        return Err(EngineError::InvalidParam { name: "previous_len", reason: "too many tickets for u32 indices" });
    }
    Ok(())
}

pub(crate) fn validate(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    out: &MatchBuffers<'_>,
) -> Result<(), EngineError> {
    let n = pool.len();
    // Indices are written as u32.
    if n >= u32::MAX as usize {
        return Err(EngineError::InvalidParam { name: "pool", reason: "too many tickets for u32 indices" });
    }
    let f = pool.filter_count;
    let h = pool.host_count;
    if h > MAX_HOSTS {
        return Err(EngineError::TooManyHosts { count: h });
    }
    if params.filters.len() != f {
        return Err(EngineError::FilterCount { pool: f, params: params.filters.len() });
    }
    if params.filters.first() == Some(&FilterMode::Continued) {
        return Err(EngineError::InvalidParam { name: "filters", reason: "the first column cannot be Continued" });
    }
    let nf = n
        .checked_mul(f)
        .ok_or(EngineError::InvalidParam { name: "filter_count", reason: "n * filter_count overflows" })?;
    check_len("mmr_mean", n, pool.mmr_mean.len())?;
    check_len("arrival_ms", n, pool.arrival_ms.len())?;
    check_len("ruleset_mask", n, pool.ruleset_mask.len())?;
    check_len("attr_values", nf, pool.attr_values.len())?;
    check_len("attr_accepts", nf, pool.attr_accepts.len())?;
    check_len("latency_ms", n * h, pool.latency_ms.len())?;

    if !(params.mmr_normalization_ref.is_finite() && params.mmr_normalization_ref > 0.0) {
        return Err(EngineError::InvalidParam { name: "mmr_normalization_ref", reason: "must be finite and > 0" });
    }
    if !params.party_synergy_bonus.is_finite() {
        return Err(EngineError::InvalidParam { name: "party_synergy_bonus", reason: "must be finite" });
    }
    if !params.now_ms.is_finite() {
        return Err(EngineError::InvalidParam { name: "now_ms", reason: "must be finite" });
    }
    if params.rulesets.len() > MAX_RULESETS {
        return Err(EngineError::TooManyRulesets { count: params.rulesets.len() });
    }
    for (r, rs) in params.rulesets.iter().enumerate() {
        validate_ruleset(r, rs)?;
    }
    for i in 0..n {
        if pool.party_size[i] == 0 {
            return Err(EngineError::InvalidTicket { ticket: i, reason: "party_size is 0" });
        }
        if !pool.mmr_mean[i].is_finite() {
            return Err(EngineError::InvalidTicket { ticket: i, reason: "mmr_mean is not finite" });
        }
        if !pool.arrival_ms[i].is_finite() {
            return Err(EngineError::InvalidTicket { ticket: i, reason: "arrival_ms is not finite" });
        }
    }

    let cap = OutputCapacity::for_pool(n, f, h);
    check_buf("match_ruleset", cap.matches, out.match_ruleset.len())?;
    check_buf("match_offsets", cap.offsets, out.match_offsets.len())?;
    check_buf("match_tickets", cap.tickets, out.match_tickets.len())?;
    check_buf("ticket_team", cap.tickets, out.ticket_team.len())?;
    check_buf("match_preferred_host", cap.matches, out.match_preferred_host.len())?;
    check_buf("match_acceptable_hosts", cap.acceptable_hosts, out.match_acceptable_hosts.len())?;
    check_buf("match_accepts", cap.accepts, out.match_accepts.len())?;
    if let Some(refusals) = &out.ticket_refusals {
        check_buf("ticket_refusals", n, refusals.len())?;
    }
    Ok(())
}

fn validate_ruleset(r: usize, rs: &Ruleset<'_>) -> Result<(), EngineError> {
    let bad = |reason| Err(EngineError::InvalidRuleset { ruleset: r, reason });
    if rs.teams == 0 || rs.team_size == 0 {
        return bad("teams and team_size must be >= 1");
    }
    if rs.teams.checked_mul(rs.team_size).is_none_or(|p| p > MAX_PLAYERS_PER_MATCH) {
        return bad("teams * team_size exceeds MAX_PLAYERS_PER_MATCH (1024)");
    }
    if rs.max_skill_spread.is_nan() || rs.max_skill_spread < 0.0 {
        return bad("max_skill_spread must be >= 0");
    }
    if rs.max_team_imbalance.is_nan() || rs.max_team_imbalance < 0.0 {
        return bad("max_team_imbalance must be >= 0");
    }
    let mut prev = (f64::NEG_INFINITY, rs.max_skill_spread, rs.max_latency_ms);
    for step in rs.relaxation {
        if !step.after_wait_ms.is_finite() {
            return bad("relaxation after_wait_ms must be finite");
        }
        if step.after_wait_ms < prev.0 {
            return bad("relaxation steps must be sorted by after_wait_ms");
        }
        if step.max_skill_spread.is_nan() || step.max_skill_spread < prev.1 {
            return bad("relaxation steps may only widen max_skill_spread");
        }
        if step.max_latency_ms < prev.2 {
            return bad("relaxation steps may only widen max_latency_ms");
        }
        prev = (step.after_wait_ms, step.max_skill_spread, step.max_latency_ms);
    }
    let e = &rs.expansion;
    if e.curve != Curve::None && !(e.over_ms.is_finite() && e.over_ms > 0.0) {
        return bad("expansion over_ms must be finite and > 0");
    }
    if e.max_skill_spread.is_nan() || e.max_skill_spread < rs.max_skill_spread {
        return bad("expansion max_skill_spread must be >= the base max_skill_spread");
    }
    if e.max_team_imbalance.is_nan() || e.max_team_imbalance < rs.max_team_imbalance {
        return bad("expansion max_team_imbalance must be >= the base max_team_imbalance");
    }
    if e.max_latency_ms < rs.max_latency_ms {
        return bad("expansion max_latency_ms must be >= the base max_latency_ms");
    }
    if e.any_host_after_ms.is_nan() {
        return bad("expansion any_host_after_ms must not be NaN");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RelaxationStep;

    fn ruleset(relaxation: &[RelaxationStep]) -> Ruleset<'_> {
        Ruleset {
            teams: 2,
            team_size: 5,
            max_skill_spread: 1.0,
            max_team_imbalance: 0.5,
            max_latency_ms: 100,
            require_host: false,
            relaxation,
            expansion: crate::Expansion::NONE,
        }
    }

    fn reason(rs: &Ruleset<'_>) -> Option<&'static str> {
        match validate_ruleset(3, rs) {
            Ok(()) => None,
            Err(EngineError::InvalidRuleset { ruleset: 3, reason }) => Some(reason),
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn rulesets_are_checked_field_by_field() {
        let step = |after_wait_ms, max_skill_spread, max_latency_ms| RelaxationStep {
            after_wait_ms,
            max_skill_spread,
            max_latency_ms,
        };
        assert_eq!(reason(&ruleset(&[])), None);
        assert_eq!(reason(&ruleset(&[step(10.0, 1.0, 100), step(10.0, 2.0, 150)])), None);
        assert_eq!(reason(&Ruleset { teams: 0, ..ruleset(&[]) }), Some("teams and team_size must be >= 1"));
        assert_eq!(
            reason(&Ruleset { teams: 32, team_size: 33, ..ruleset(&[]) }),
            Some("teams * team_size exceeds MAX_PLAYERS_PER_MATCH (1024)")
        );
        assert_eq!(
            reason(&Ruleset { max_skill_spread: f64::NAN, ..ruleset(&[]) }),
            Some("max_skill_spread must be >= 0")
        );
        assert_eq!(
            reason(&Ruleset { max_team_imbalance: -1.0, ..ruleset(&[]) }),
            Some("max_team_imbalance must be >= 0")
        );
        assert_eq!(reason(&ruleset(&[step(f64::NAN, 1.0, 100)])), Some("relaxation after_wait_ms must be finite"));
        assert_eq!(
            reason(&ruleset(&[step(20.0, 1.0, 100), step(10.0, 1.0, 100)])),
            Some("relaxation steps must be sorted by after_wait_ms")
        );
        assert_eq!(reason(&ruleset(&[step(10.0, 0.5, 100)])), Some("relaxation steps may only widen max_skill_spread"));
        assert_eq!(reason(&ruleset(&[step(10.0, 1.0, 99)])), Some("relaxation steps may only widen max_latency_ms"));
    }

    #[test]
    fn lengths_and_capacities_name_the_column() {
        assert_eq!(check_len("mmr_mean", 3, 3), Ok(()));
        assert_eq!(
            check_len("mmr_mean", 3, 2),
            Err(EngineError::ColumnLength { column: "mmr_mean", expected: 3, actual: 2 })
        );
        // Output buffers may be larger than needed, not smaller.
        assert_eq!(check_buf("match_tickets", 3, 4), Ok(()));
        assert_eq!(
            check_buf("match_tickets", 3, 2),
            Err(EngineError::BufferTooSmall { buffer: "match_tickets", required: 3, actual: 2 })
        );
    }
}
