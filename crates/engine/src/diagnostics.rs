//! Rule diagnostics: per ruleset, how many candidate matches failed in a tick and which rule turned
//! their tickets away, so an operator sees which rule to relax (docs/rule-diagnostics.md).
//!
//! The tick counts into [`RuleDiagnostics`] records kept in the caller's `Workspace` (one per
//! ruleset, zeroed at the start of each tick, never reallocated once grown), with plain increments
//! where each rule decides. Only candidates that fail are counted: a match that forms discards its
//! search's counts.

/// The rule that turned a candidate away. The discriminant is the index into
/// [`RuleDiagnostics::rejections`]: this order is part of the interface (the binding and the host
/// read the counts by position).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// The ticket would take the match past its `max_skill_spread` (relaxed by the seed's wait), or
    /// lies beyond the seed's skill window.
    SkillSpread = 0,
    /// The match was full, but its balanced teams exceed `max_team_imbalance`.
    TeamImbalance = 1,
    /// With `require_host`: no host is within the latency bound of the ticket and of the tickets
    /// already chosen (or the queue has no host).
    NoAcceptableHost = 2,
    /// The ticket is incompatible, on some attribute filter, with a ticket already chosen.
    Attributes = 3,
    /// The party does not fit the room left in any team (or is larger than `team_size`).
    PartySize = 4,
}

impl Rejection {
    /// Every reason, in count order.
    pub const ALL: [Rejection; 5] = [
        Rejection::SkillSpread,
        Rejection::TeamImbalance,
        Rejection::NoAcceptableHost,
        Rejection::Attributes,
        Rejection::PartySize,
    ];

    /// The reason's name in metrics and docs.
    pub fn name(self) -> &'static str {
        match self {
            Rejection::SkillSpread => "skill_spread",
            Rejection::TeamImbalance => "team_imbalance",
            Rejection::NoAcceptableHost => "no_acceptable_host",
            Rejection::Attributes => "attributes",
            Rejection::PartySize => "party_size",
        }
    }
}

/// One ruleset's counts for one tick (see docs/rule-diagnostics.md for what each one counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuleDiagnostics {
    /// Rejections in the failed candidate matches, indexed by `Rejection as usize`.
    pub rejections: [u64; 5],
    /// Candidate matches of this ruleset that failed: seeds that tried it and formed nothing, and
    /// tickets set aside before the search (one per ruleset they compete in).
    pub failed: u64,
    /// Tickets the failed candidates' scans examined (the seeds not included).
    pub examined: u64,
}

impl RuleDiagnostics {
    /// Values per ruleset in [`RuleDiagnostics::columns`]: the five rejection counts in
    /// [`Rejection::ALL`] order, then `failed`, then `examined`.
    pub const COLUMNS: usize = 7;

    pub fn rejected(&self, reason: Rejection) -> u64 {
        self.rejections[reason as usize]
    }

    /// The counts as one flat row of [`RuleDiagnostics::COLUMNS`] values.
    pub fn columns(&self) -> [u64; Self::COLUMNS] {
        let [a, b, c, d, e] = self.rejections;
        [a, b, c, d, e, self.failed, self.examined]
    }

    /// A candidate failed at once, for `reason`, before any ticket was examined.
    #[inline]
    pub(crate) fn fail(&mut self, reason: Rejection) {
        self.rejections[reason as usize] += 1;
        self.failed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_in_their_count_order() {
        for (i, r) in Rejection::ALL.into_iter().enumerate() {
            assert_eq!(r as usize, i);
        }
        let names: Vec<_> = Rejection::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["skill_spread", "team_imbalance", "no_acceptable_host", "attributes", "party_size"]);
        let d = RuleDiagnostics { rejections: [1, 2, 3, 4, 5], failed: 6, examined: 7 };
        assert_eq!(d.columns(), [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(d.rejected(Rejection::Attributes), 4);
    }
}
