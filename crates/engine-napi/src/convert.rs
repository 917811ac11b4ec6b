//! JavaScript objects to engine types: queue parameters once per configuration, typed arrays to
//! borrowed column slices and output buffers on every run (no copy).

use matchmaker_engine::{
    BackfillBuffers, BackfillColumns, Curve, Expansion, FilterMode, MatchBuffers, PoolColumns, RelaxationStep,
    RuleDiagnostics, Ruleset, TickParams,
};

use crate::error::BindingError;
use crate::types::{
    BackfillArrays, BackfillOutput, ExpansionParams, MatchArrays, PoolArrays, QueueParams, RelaxationStepParams,
    RulesetParams,
};

impl TryFrom<ExpansionParams> for Expansion {
    type Error = BindingError;

    fn try_from(params: ExpansionParams) -> Result<Self, BindingError> {
        let ExpansionParams { curve, over_ms, max_skill_spread, max_team_imbalance, max_latency_ms, any_host_after_ms } =
            params;
        let curve = match curve.as_str() {
            "none" => Curve::None,
            "linear" => Curve::Linear,
            "exponential" => Curve::Exponential,
            _ => return Err(BindingError::UnknownCurve(curve)),
        };
        Ok(Expansion { curve, over_ms, max_skill_spread, max_team_imbalance, max_latency_ms, any_host_after_ms })
    }
}

impl From<RelaxationStepParams> for RelaxationStep {
    fn from(step: RelaxationStepParams) -> Self {
        let RelaxationStepParams { after_wait_ms, max_skill_spread, max_latency_ms } = step;
        RelaxationStep { after_wait_ms, max_skill_spread, max_latency_ms }
    }
}

/// A ruleset converted once per configuration: the engine's `Ruleset`, and beside it the relaxation
/// steps it borrows for a run.
pub struct OwnedRuleset {
    /// Every field but `relaxation` (left empty; see `get`).
    ruleset: Ruleset<'static>,
    relaxation: Vec<RelaxationStep>,
}

impl OwnedRuleset {
    pub fn get(&self) -> Ruleset<'_> {
        Ruleset { relaxation: &self.relaxation, ..self.ruleset }
    }
}

impl TryFrom<RulesetParams> for OwnedRuleset {
    type Error = BindingError;

    /// The one place a ruleset's fields are mapped; destructured in full, so a field added on either
    /// side and not mapped here fails to compile.
    fn try_from(params: RulesetParams) -> Result<Self, BindingError> {
        let RulesetParams {
            teams,
            team_size,
            max_skill_spread,
            max_team_imbalance,
            max_latency_ms,
            require_host,
            relaxation,
            expansion,
        } = params;
        Ok(OwnedRuleset {
            ruleset: Ruleset {
                teams,
                team_size,
                max_skill_spread,
                max_team_imbalance,
                max_latency_ms,
                require_host,
                relaxation: &[],
                expansion: Expansion::try_from(expansion)?,
            },
            relaxation: relaxation.into_iter().map(RelaxationStep::from).collect(),
        })
    }
}

/// A queue's engine parameters, owned (the engine's `TickParams` borrows from it for one run).
pub struct OwnedParams {
    mmr_normalization_ref: f64,
    party_synergy_bonus: f64,
    filters: Vec<FilterMode>,
    rulesets: Vec<OwnedRuleset>,
}

impl TryFrom<QueueParams> for OwnedParams {
    type Error = BindingError;

    fn try_from(params: QueueParams) -> Result<Self, BindingError> {
        let QueueParams { mmr_normalization_ref, party_synergy_bonus, filter_modes, rulesets } = params;
        let filters = filter_modes
            .into_iter()
            .map(|mode| match mode.as_str() {
                "overlap" => Ok(FilterMode::Overlap),
                "containment" => Ok(FilterMode::Containment),
                "continued" => Ok(FilterMode::Continued),
                _ => Err(BindingError::UnknownFilterMode(mode)),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rulesets = rulesets.into_iter().map(OwnedRuleset::try_from).collect::<Result<Vec<_>, _>>()?;
        Ok(OwnedParams { mmr_normalization_ref, party_synergy_bonus, filters, rulesets })
    }
}

impl OwnedParams {
    pub fn ruleset_count(&self) -> usize {
        self.rulesets.len()
    }

    /// Calls `run` with these parameters as the engine's `TickParams`.
    pub fn with<R>(&self, now_ms: f64, seed: u64, run: impl FnOnce(&TickParams<'_>) -> R) -> R {
        let rulesets: Vec<Ruleset<'_>> = self.rulesets.iter().map(OwnedRuleset::get).collect();
        run(&TickParams {
            mmr_normalization_ref: self.mmr_normalization_ref,
            party_synergy_bonus: self.party_synergy_bonus,
            filters: &self.filters,
            rulesets: &rulesets,
            now_ms,
            seed,
        })
    }
}

/// The first `len` elements, or an error naming the column when the array is shorter.
fn prefix<'a, T>(name: &'static str, data: &'a [T], len: usize) -> Result<&'a [T], BindingError> {
    data.get(..len).ok_or(BindingError::ShortArray { name, len: data.len(), needs: len })
}

pub fn pool_columns(p: &PoolArrays) -> Result<PoolColumns<'_>, BindingError> {
    let n = p.ticket_count as usize;
    let f = p.filter_count as usize;
    let h = p.host_count as usize;
    Ok(PoolColumns {
        party_size: prefix("partySize", &p.party_size, n)?,
        mmr_mean: prefix("mmrMean", &p.mmr_mean, n)?,
        arrival_ms: prefix("arrivalMs", &p.arrival_ms, n)?,
        ruleset_mask: prefix("rulesetMask", &p.ruleset_mask, n)?,
        attr_values: prefix("attrValues", &p.attr_values, n * f)?,
        attr_accepts: prefix("attrAccepts", &p.attr_accepts, n * f)?,
        latency_ms: prefix("latencyMs", &p.latency_ms, n * h)?,
        filter_count: f,
        host_count: h,
    })
}

/// The requests' columns; `filter_count` is the pool's.
pub fn backfill_columns(q: &BackfillArrays, filter_count: u32) -> Result<BackfillColumns<'_>, BindingError> {
    let r = q.request_count as usize;
    let f = filter_count as usize;
    Ok(BackfillColumns {
        ruleset: prefix("ruleset", &q.ruleset, r)?,
        slots: prefix("slots", &q.slots, r)?,
        skill: prefix("skill", &q.skill, r)?,
        host: prefix("host", &q.host, r)?,
        arrival_ms: prefix("arrivalMs", &q.arrival_ms, r)?,
        attr_values: prefix("attrValues", &q.attr_values, r * f)?,
        attr_accepts: prefix("attrAccepts", &q.attr_accepts, r * f)?,
    })
}

/// The match output arrays as the engine's buffers (whole arrays; the engine checks their sizes).
///
/// # Safety
///
/// JavaScript must neither read nor write these arrays while the returned buffers live: the engine
/// writes them from another thread without synchronization.
pub unsafe fn match_buffers(o: &mut MatchArrays) -> MatchBuffers<'_> {
    // SAFETY: the caller guarantees JavaScript leaves the arrays alone meanwhile, so these are the
    // only references to their memory; `o` owns a reference to each array, which keeps it alive.
    unsafe {
        MatchBuffers {
            match_ruleset: o.match_ruleset.as_mut(),
            match_offsets: o.match_offsets.as_mut(),
            match_tickets: o.match_tickets.as_mut(),
            ticket_team: o.ticket_team.as_mut(),
            match_preferred_host: o.match_preferred_host.as_mut(),
            match_acceptable_hosts: o.match_acceptable_hosts.as_mut(),
            match_accepts: o.match_accepts.as_mut(),
            ticket_refusals: o.ticket_refusals.as_mut().map(|r| r.as_mut()),
        }
    }
}

/// Refuses a `ruleCounts` array too short for `rulesets` rulesets, before the tick writes anything.
pub fn check_rule_counts(o: &MatchArrays, rulesets: usize) -> Result<(), BindingError> {
    match &o.rule_counts {
        Some(counts) => prefix("ruleCounts", counts, rulesets * RuleDiagnostics::COLUMNS).map(|_| ()),
        None => Ok(()),
    }
}

/// Copies the tick's rule diagnostics into `ruleCounts`, when given (checked by
/// [`check_rule_counts`]), as numbers: a tick's counts stay far below 2^53.
///
/// # Safety
///
/// As for [`match_buffers`]: JavaScript must leave the array alone meanwhile.
pub unsafe fn write_rule_counts(o: &mut MatchArrays, diagnostics: &[RuleDiagnostics]) {
    if let Some(counts) = &mut o.rule_counts {
        // SAFETY: the caller guarantees JavaScript leaves the array alone meanwhile, so this is the only
        // reference to its memory; `o` keeps it alive.
        let counts = unsafe { counts.as_mut() };
        for (row, d) in counts.chunks_exact_mut(RuleDiagnostics::COLUMNS).zip(diagnostics) {
            for (x, &c) in row.iter_mut().zip(&d.columns()) {
                *x = c as f64;
            }
        }
    }
}

/// The backfill output arrays as the engine's buffers.
///
/// # Safety
///
/// As for [`match_buffers`]: JavaScript must leave these arrays alone while the buffers live.
pub unsafe fn backfill_buffers(o: &mut BackfillOutput) -> BackfillBuffers<'_> {
    // SAFETY: as in `match_buffers`: no other user of the arrays meanwhile, and `o` keeps them alive.
    unsafe { BackfillBuffers { offsets: o.offsets.as_mut(), assigned: o.assigned.as_mut() } }
}
