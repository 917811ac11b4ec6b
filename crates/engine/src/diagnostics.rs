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
    /// Adds `other`'s counts (a seed's tries, counted apart and committed later).
    pub(crate) fn add(&mut self, other: &RuleDiagnostics) {
        for (t, &x) in self.rejections.iter_mut().zip(&other.rejections) {
            *t += x;
        }
        self.failed += other.failed;
        self.examined += other.examined;
    }

    #[inline]
    pub(crate) fn fail(&mut self, reason: Rejection) {
        self.rejections[reason as usize] += 1;
        self.failed += 1;
    }

    /// `count` failures for `reason` at once (the tickets a kept layout holds set aside, tick/kept.rs).
    pub(crate) fn fail_many(&mut self, reason: Rejection, count: u64) {
        self.rejections[reason as usize] += count;
        self.failed += count;
    }
}

/// Per ticket, why it is still waiting after a tick: the rule that refused the candidate match it
/// seeded (docs/rule-diagnostics.md, "Per ticket"). Written, as [`TicketRefusal::code`], to
/// `MatchBuffers::ticket_refusals` when the caller gives that buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TicketRefusal {
    /// The reason that counted most in the ticket's failed candidates this tick (summed over the
    /// rulesets it tried; ties go to the earlier reason in [`Rejection::ALL`]), or
    /// [`Rejection::TeamImbalance`] when a candidate was full but unbalanced. A ticket set aside before
    /// the search (no host in reach) is [`Rejection::NoAcceptableHost`].
    Rejected(Rejection),
    /// Its candidates refused no one: too few tickets were within reach.
    NotEnoughTickets,
}

impl TicketRefusal {
    /// The code of a ticket with no refusal this tick: it was matched (or is in none of the rulesets).
    pub const NONE: u8 = 0;
    /// Codes of [`TicketRefusal::NotEnoughTickets`]; a [`Rejection`] `r` is `r as u8 + 1`.
    pub const NOT_ENOUGH_TICKETS: u8 = 6;

    /// The byte the tick writes for this refusal.
    pub fn code(self) -> u8 {
        match self {
            TicketRefusal::Rejected(r) => r as u8 + 1,
            TicketRefusal::NotEnoughTickets => Self::NOT_ENOUGH_TICKETS,
        }
    }

    /// The refusal a code stands for; `None` for [`TicketRefusal::NONE`] and unknown codes.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1..=5 => Some(TicketRefusal::Rejected(Rejection::ALL[code as usize - 1])),
            Self::NOT_ENOUGH_TICKETS => Some(TicketRefusal::NotEnoughTickets),
            _ => None,
        }
    }

    /// The refusal's name in the API and docs: a [`Rejection::name`] or `not_enough_tickets`.
    pub fn name(self) -> &'static str {
        match self {
            TicketRefusal::Rejected(r) => r.name(),
            TicketRefusal::NotEnoughTickets => "not_enough_tickets",
        }
    }

    /// The refusal of a seed whose failed candidates rejected `counts` (by [`Rejection`] index).
    pub(crate) fn of_counts(counts: &[u64; 5]) -> Self {
        if counts[Rejection::TeamImbalance as usize] > 0 {
            return TicketRefusal::Rejected(Rejection::TeamImbalance);
        }
        let mut best = TicketRefusal::NotEnoughTickets;
        let mut most = 0;
        for (&r, &c) in Rejection::ALL.iter().zip(counts) {
            if c > most {
                (best, most) = (TicketRefusal::Rejected(r), c);
            }
        }
        best
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

    #[test]
    fn refusal_codes_round_trip_and_pick_the_reason_that_counted_most() {
        for code in 0..=255u8 {
            match TicketRefusal::from_code(code) {
                Some(r) => assert_eq!(r.code(), code),
                None => assert!(code == TicketRefusal::NONE || code > TicketRefusal::NOT_ENOUGH_TICKETS),
            }
        }
        let names: Vec<_> = (1..=6).map(|c| TicketRefusal::from_code(c).unwrap().name()).collect();
        let want =
            ["skill_spread", "team_imbalance", "no_acceptable_host", "attributes", "party_size", "not_enough_tickets"];
        assert_eq!(names, want);
        let of = |counts| TicketRefusal::of_counts(&counts).name();
        assert_eq!(of([0, 0, 0, 0, 0]), "not_enough_tickets");
        assert_eq!(of([1, 0, 2, 0, 0]), "no_acceptable_host");
        // Ties go to the earlier reason; a full but unbalanced candidate wins over any count.
        assert_eq!(of([0, 0, 0, 3, 3]), "attributes");
        assert_eq!(of([9, 1, 9, 9, 9]), "team_imbalance");
    }
}
