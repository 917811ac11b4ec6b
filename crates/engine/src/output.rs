//! Where a tick writes: caller-owned match buffers, their required sizes, and an owned version.

use crate::tick::host_words;

/// Minimum lengths of the [`MatchBuffers`] slices for a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputCapacity {
    /// `match_ruleset`, `match_preferred_host`.
    pub matches: usize,
    /// `match_acceptable_hosts` (= matches * one word per 64 hosts, at least one).
    pub acceptable_hosts: usize,
    /// `match_offsets` (= matches + 1).
    pub offsets: usize,
    /// `match_tickets`, `ticket_team`.
    pub tickets: usize,
    /// `match_accepts` (= matches * F).
    pub accepts: usize,
}

impl OutputCapacity {
    /// Worst case: every ticket alone in its own match (a 1x1 ruleset of solos).
    pub fn for_pool(tickets: usize, filter_count: usize, host_count: usize) -> Self {
        OutputCapacity {
            matches: tickets,
            acceptable_hosts: tickets.saturating_mul(host_words(host_count)),
            offsets: tickets + 1,
            tickets,
            accepts: tickets.saturating_mul(filter_count),
        }
    }
}

/// Caller-owned output. Match m's tickets are
/// `match_tickets[match_offsets[m]..match_offsets[m+1]]`, their teams the same range of
/// `ticket_team`, its accept intersections `match_accepts[m*F..(m+1)*F]`.
#[derive(Debug)]
pub struct MatchBuffers<'a> {
    pub match_ruleset: &'a mut [u32],
    pub match_offsets: &'a mut [u32],
    /// Pool indices.
    pub match_tickets: &'a mut [u32],
    /// Team index (0..teams) of the ticket at the same position of `match_tickets`.
    pub ticket_team: &'a mut [u32],
    /// Host index, or [`NO_HOST`](crate::NO_HOST).
    pub match_preferred_host: &'a mut [u32],
    /// Bit h = host h acceptable to every ticket of the match: per match one word per 64 hosts (at
    /// least one), match m's at `m * words..(m + 1) * words`.
    pub match_acceptable_hosts: &'a mut [u64],
    /// Per match, per filter: AND of the tickets' `attr_accepts`.
    pub match_accepts: &'a mut [u64],
    /// Optional, at least one byte per ticket (pool index): the tick writes every ticket's
    /// [`TicketRefusal`](crate::TicketRefusal) code, [`TicketRefusal::NONE`](crate::TicketRefusal::NONE)
    /// for the matched ones (docs/rule-diagnostics.md, "Per ticket"). `None` records nothing.
    pub ticket_refusals: Option<&'a mut [u8]>,
}

/// Owned output vectors sized for a pool; convenient for tests, benches and Rust callers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MatchOutput {
    pub match_ruleset: Vec<u32>,
    pub match_offsets: Vec<u32>,
    pub match_tickets: Vec<u32>,
    pub ticket_team: Vec<u32>,
    pub match_preferred_host: Vec<u32>,
    pub match_acceptable_hosts: Vec<u64>,
    pub match_accepts: Vec<u64>,
    /// The per-ticket refusal record; `None` (the default) records nothing. See
    /// [`MatchOutput::recording_refusals`].
    pub ticket_refusals: Option<Vec<u8>>,
}

impl MatchOutput {
    pub fn with_capacity(cap: OutputCapacity) -> Self {
        MatchOutput {
            match_ruleset: vec![0; cap.matches],
            match_offsets: vec![0; cap.offsets],
            match_tickets: vec![0; cap.tickets],
            ticket_team: vec![0; cap.tickets],
            match_preferred_host: vec![0; cap.matches],
            match_acceptable_hosts: vec![0; cap.acceptable_hosts],
            match_accepts: vec![0; cap.accepts],
            ticket_refusals: None,
        }
    }

    /// The same output, with a per-ticket refusal record for `cap.tickets` tickets.
    pub fn recording_refusals(mut self) -> Self {
        self.ticket_refusals = Some(vec![0; self.match_tickets.len()]);
        self
    }

    pub fn buffers(&mut self) -> MatchBuffers<'_> {
        MatchBuffers {
            match_ruleset: &mut self.match_ruleset,
            match_offsets: &mut self.match_offsets,
            match_tickets: &mut self.match_tickets,
            ticket_team: &mut self.ticket_team,
            match_preferred_host: &mut self.match_preferred_host,
            match_acceptable_hosts: &mut self.match_acceptable_hosts,
            match_accepts: &mut self.match_accepts,
            ticket_refusals: self.ticket_refusals.as_deref_mut(),
        }
    }
}
