//! The optional per-ticket record of why a ticket is still waiting (docs/rule-diagnostics.md,
//! "Per ticket"): the seed loop sums what a seed's failed tries added to each ruleset's rejection counts and
//! writes the [`TicketRefusal`] they add up to. Off (no buffer given), every call is one predictable
//! branch.

use crate::{PoolColumns, Rejection, RuleDiagnostics, TicketRefusal};

pub(super) struct Refusals<'a> {
    out: Option<&'a mut [u8]>,
}

impl<'a> Refusals<'a> {
    /// Starts the record: every ticket of some ruleset `valid` is `no_acceptable_host` (what a ticket
    /// set aside before the search keeps), the others none. Every ticket the search lays out is
    /// overwritten: it either seeds or is matched before its turn.
    pub(super) fn new(out: Option<&'a mut [u8]>, pool: &PoolColumns<'_>, valid: u32) -> Self {
        let mut refusals = Refusals { out };
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

    /// The seed (pool index `ticket()`, read only when recording: a seed's row is far from the others')
    /// formed nothing in any of its rulesets; `tried` holds what each of its tries added to the rejection
    /// counts.
    #[inline]
    pub(super) fn unmatched(&mut self, ticket: impl FnOnce() -> usize, tried: &[RuleDiagnostics]) {
        if let Some(out) = self.out.as_deref_mut() {
            let mut counts = [0u64; 5];
            for d in tried {
                for (c, &x) in counts.iter_mut().zip(&d.rejections) {
                    *c += x;
                }
            }
            out[ticket()] = TicketRefusal::of_counts(&counts).code();
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
