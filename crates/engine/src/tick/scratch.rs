//! The scratch memory one candidate match is built in, reused from candidate to candidate: the
//! selection that `search` grows and `balance` rebalances, and the buffers each of them works in.
//! Its own module, not `search`'s, so that `balance` and `emit`, which `search` imports, need not import
//! `search` back.

use super::packing::TwoTeams;
use crate::input::filter_groups;
use crate::FilterMode;

/// Per-candidate scratch; all indices are live positions or indices into `sel`.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pub(super) sel: Vec<u32>,
    pub(super) sel_team: Vec<u32>,
    /// Per selected ticket: party size and effective skill, copied so `balance` does not chase
    /// positions.
    pub(super) sel_party: Vec<u32>,
    pub(super) sel_eff: Vec<f64>,
    /// The best candidate so far while `try_form` compares candidates: sel, sel_team, sel_party, sel_eff.
    best: (Vec<u32>, Vec<u32>, Vec<u32>, Vec<f64>),
    /// Room left per team during the scan.
    pub(super) room: Vec<u32>,
    /// Exact placement into two teams, for a party the scan's placement has no room for.
    pub(super) two_teams: TwoTeams,
    pub(super) big: BigBalance,
    /// Per filter column: a one-column overlap filter (else containment, or a column of a `wide` one).
    pub(super) overlap: Vec<bool>,
    /// Overlap filters of more than one column: (first column, columns).
    pub(super) wide: Vec<(usize, usize)>,
    pub(super) agg: Vec<Agg>,
    /// Distinct (filter, values) of the selected tickets' overlap values other than `u64::MAX`.
    pub(super) overlap_values: Vec<(usize, u64)>,
    /// The same for `wide` filters: (index in `wide`, offset of the values in `wide_words`), other
    /// than all `u64::MAX`.
    pub(super) wide_values: Vec<(usize, usize)>,
    pub(super) wide_words: Vec<u64>,
}

impl Scratch {
    /// Sets the filter columns' rules from the tick's modes.
    pub(super) fn set_filters(&mut self, modes: &[FilterMode]) {
        self.overlap.clear();
        self.wide.clear();
        for (k, w, mode) in filter_groups(modes) {
            let one = mode == FilterMode::Overlap && w == 1;
            self.overlap.extend(std::iter::repeat_n(one, w));
            if mode == FilterMode::Overlap && w > 1 {
                self.wide.push((k, w));
            }
        }
    }

    /// Keeps the selected candidate as the best so far.
    pub(super) fn keep_best(&mut self) {
        let (sel, team, party, eff) = &mut self.best;
        sel.clone_from(&self.sel);
        team.clone_from(&self.sel_team);
        party.clone_from(&self.sel_party);
        eff.clone_from(&self.sel_eff);
    }

    /// Makes the best candidate kept the selected one.
    pub(super) fn restore_best(&mut self) {
        let (sel, team, party, eff) = &mut self.best;
        std::mem::swap(&mut self.sel, sel);
        std::mem::swap(&mut self.sel_team, team);
        std::mem::swap(&mut self.sel_party, party);
        std::mem::swap(&mut self.sel_eff, eff);
    }
}

/// Per filter, over the selected tickets: AND of accepts and OR of values (containment filters;
/// neutral for overlap), and `u64::MAX` for overlap filters (whose values must be non-zero).
/// See `search::try_form`.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Agg {
    pub(super) and_accepts: u64,
    pub(super) or_values: u64,
    pub(super) nonzero: u64,
    /// A column of a `wide` overlap filter: neutral here, checked over the filter's columns.
    pub(super) wide: bool,
}

/// Storage for matches too large for `balance`'s stack arrays.
#[derive(Debug, Default)]
pub(super) struct BigBalance {
    pub(super) weight: Vec<f64>,
    pub(super) order: Vec<u128>,
    pub(super) alt_team: Vec<u32>,
    pub(super) members: Vec<u32>,
    pub(super) sums: Vec<f64>,
    pub(super) alt_sums: Vec<f64>,
    pub(super) room: Vec<u32>,
}
