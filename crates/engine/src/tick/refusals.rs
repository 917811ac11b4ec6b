//! The optional per-ticket record of why a ticket is still waiting (docs/rule-diagnostics.md,
//! "Per ticket"): the seed loop diffs each ruleset's rejection counts around a seed's failed tries and
//! writes the [`TicketRefusal`] they add up to. Off (no buffer given), every call is one predictable
//! branch.

use crate::{PoolColumns, Rejection, RuleDiagnostics, TicketRefusal};

pub(super) struct Refusals<'a> {
    out: Option<&'a mut [u8]>,
    /// The current seed's rejections so far, over the rulesets it tried.
    seed: [u64; 5],
}

impl<'a> Refusals<'a> {
    /// Starts the record: every ticket of some ruleset `valid` is `no_acceptable_host` (what a ticket
    /// set aside before the search keeps), the others none. Every ticket the search lays out is
    /// overwritten: it either seeds or is matched before its turn.
    pub(super) fn new(out: Option<&'a mut [u8]>, pool: &PoolColumns<'_>, valid: u32) -> Self {
        let mut refusals = Refusals { out, seed: [0; 5] };
        if let Some(out) = refusals.out.as_deref_mut() {
            let aside = TicketRefusal::Rejected(Rejection::NoAcceptableHost).code();
            for (o, &mask) in out.iter_mut().zip(pool.ruleset_mask) {
                *o = if mask & valid != 0 { aside } else { TicketRefusal::NONE };
            }
        }
        refusals
    }

    /// Hands the buffer back to the caller's output.
    pub(super) fn into_inner(self) -> Option<&'a mut [u8]> {
        self.out
    }

    /// A new seed.
    #[inline]
    pub(super) fn seed(&mut self) {
        if self.out.is_some() {
            self.seed = [0; 5];
        }
    }

    /// A ruleset's counts before the seed tries it.
    #[inline]
    pub(super) fn before(&self, d: &RuleDiagnostics) -> [u64; 5] {
        if self.out.is_some() {
            d.rejections
        } else {
            [0; 5]
        }
    }

    /// The seed's try of a ruleset failed: what it added to the counts since `before`.
    #[inline]
    pub(super) fn failed(&mut self, d: &RuleDiagnostics, before: [u64; 5]) {
        if self.out.is_some() {
            for ((s, &after), b) in self.seed.iter_mut().zip(&d.rejections).zip(before) {
                *s += after - b;
            }
        }
    }

    /// The seed (pool index) formed nothing in any of its rulesets.
    #[inline]
    pub(super) fn unmatched(&mut self, ticket: usize) {
        if let Some(out) = self.out.as_deref_mut() {
            out[ticket] = TicketRefusal::of_counts(&self.seed).code();
        }
    }

    /// The ticket (pool index) is in a match, perhaps after it failed as a seed.
    #[inline]
    pub(super) fn matched(&mut self, ticket: usize) {
        if let Some(out) = self.out.as_deref_mut() {
            out[ticket] = TicketRefusal::NONE;
        }
    }
}
