//! One seed's turn, in the two halves the seed loop runs apart on many threads: `try_seed` tries the
//! seed's rulesets against the pool as it stands (it writes nothing shared), and `Commit::seed` writes
//! what the try found, in age order, into the tick's outputs and marks the match's tickets used.

use super::emit::{emit, Staged, StagedMatch};
use super::lanes::{host_words, HostMask, LatBound};
use super::layout::{Ctx, Sorted};
use super::links::{Links, Skip};
use super::refusals::Refusals;
use super::scratch::Scratch;
use super::search::{try_form, Found};
use crate::{MatchBuffers, RuleDiagnostics, TickParams};

/// A match formed around a seed: its ruleset, whether the scan kept to common hosts, the acceptable
/// hosts (exact only then) and the latency bound in force, and whether it depends on no ticket but its
/// own (`SeedTry::own_tickets_only`). Its tickets and teams are the selection of the scratch it was
/// grown in.
#[derive(Clone, Copy, Debug)]
struct Formed<M> {
    r: usize,
    host_filtered: bool,
    acceptable: M,
    lat: LatBound,
    own_tickets_only: bool,
}

impl<M: HostMask> Formed<M> {
    /// Stages the match, of the selection `sel` in teams `sel_team`, into `staged`; answers its index.
    fn stage(&self, ctx: &Ctx<'_>, sel: &[u32], sel_team: &[u32], staged: &mut Staged) -> usize {
        staged.stage(ctx, sel, sel_team, self.r, self.host_filtered, self.acceptable, &self.lat)
    }
}

/// The memory one thread tries seeds in: the candidate's scratch, the rule decisions per ruleset
/// (`try_seed`'s `local`), each try's records, and the matches staged.
pub(super) type TryMemory<'a> =
    (&'a mut Scratch, &'a mut [RuleDiagnostics], &'a mut Vec<RuleDiagnostics>, &'a mut Staged);

/// The same memory, borrowed again for one call.
pub(super) fn reborrow<'a>(memory: &'a mut TryMemory<'_>) -> TryMemory<'a> {
    (&mut *memory.0, &mut *memory.1, &mut *memory.2, &mut *memory.3)
}

/// What a seed's try found.
#[derive(Clone, Copy, Debug)]
pub(super) struct SeedTry {
    /// The match formed: its index among the staged ones.
    pub(super) formed: Option<usize>,
    /// The rulesets tried, a bit each.
    pub(super) rulesets: u32,
    /// Whether the match formed would be found again as long as its own tickets are free: it came from
    /// the first attempt of the only ruleset tried (so no failed attempt's record depends on the pool)
    /// and from that attempt's one scan (`Found::one_scan`).
    pub(super) own_tickets_only: bool,
}

/// Tries the seed at skill position `q` (`try_seed`), appends its tries' records to the memory's (`drain`)
/// and stages the match it formed.
pub(super) fn try_and_stage<M: HostMask, S: Skip>(
    ctx: &Ctx<'_>,
    params: &TickParams<'_>,
    links: &mut S,
    q: usize,
    valid_rulesets: u32,
    (scratch, local, tried, staged): TryMemory<'_>,
) -> SeedTry {
    let (formed, rulesets) = try_seed::<M, S>(ctx, params, links, scratch, q, valid_rulesets, local);
    drain(local, rulesets, tried);
    SeedTry {
        formed: formed.map(|fm| fm.stage(ctx, &scratch.sel, &scratch.sel_team, staged)),
        rulesets,
        own_tickets_only: formed.is_some_and(|fm| fm.own_tickets_only),
    }
}

/// Tries the seed at skill position `q` in each of its rulesets, the first by index first, and
/// answers the match the first of them forms and the rulesets it tried (a bit each). Each try's rule
/// decisions go to its ruleset's record in `local`, which must be zero for every ruleset on entry
/// (`drain` zeroes them again).
fn try_seed<M: HostMask, S: Skip>(
    ctx: &Ctx<'_>,
    params: &TickParams<'_>,
    links: &mut S,
    scratch: &mut Scratch,
    q: usize,
    valid_rulesets: u32,
    local: &mut [RuleDiagnostics],
) -> (Option<Formed<M>>, u32) {
    let s = ctx.s;
    let sp = s.cur[q];
    let mut mask = s.hot[sp as usize + 1].mask & valid_rulesets;
    let mut tried = 0;
    while mask != 0 {
        let r = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        tried |= 1 << r;
        let rs = &params.rulesets[r];
        let bounds = rs.bounds_for_wait(params.now_ms - s.arrival[q]);
        // Latency is a filter first, with or without `require_host`: a seed looks for a match with
        // a common acceptable host, and only a ruleset that does not require one may then, once
        // `bounds.any_host`, form a match without (its host then only minimises latency).
        let mut formed = None;
        let filtered = rs.require_host || ctx.h > 0;
        if filtered {
            formed = try_form::<M, S>(ctx, links, scratch, sp, &bounds, true, r, rs, &mut local[r]).map(|x| (x, true));
        }
        if formed.is_none() && (bounds.any_host || !filtered) {
            // A seed fails at most once per ruleset in the diagnostics: after a filtered attempt,
            // only that attempt's rule decisions count.
            let mut second = RuleDiagnostics::default();
            let diag = if filtered { &mut second } else { &mut local[r] };
            formed = try_form::<M, S>(ctx, links, scratch, sp, &bounds, false, r, rs, diag).map(|x| (x, false));
        }
        if let Some((found, host_filtered)) = formed {
            let Found { hosts: acceptable, lat, one_scan } = found;
            let own_tickets_only = one_scan && tried == 1 << r && host_filtered == filtered;
            return (Some(Formed { r, host_filtered, acceptable, lat, own_tickets_only }), tried);
        }
    }
    (None, tried)
}

/// Moves the records of the rulesets in `tried` from `local` to the end of `into`, in ruleset order,
/// and zeroes them in `local`.
fn drain(local: &mut [RuleDiagnostics], mut tried: u32, into: &mut Vec<RuleDiagnostics>) {
    while tried != 0 {
        let r = tried.trailing_zeros() as usize;
        tried &= tried - 1;
        into.push(std::mem::take(&mut local[r]));
    }
}

/// The tick's outputs as the seeds commit, oldest first.
pub(super) struct Commit<'t, 'o> {
    pub(super) params: &'t TickParams<'t>,
    pub(super) out: &'t mut MatchBuffers<'o>,
    pub(super) refusals: &'t mut Refusals<'o>,
    pub(super) diagnostics: &'t mut [RuleDiagnostics],
    pub(super) f: usize,
    pub(super) h: usize,
    /// Words per row of `Sorted::rows`.
    pub(super) row: usize,
    pub(super) matches: usize,
    pub(super) written: usize,
    used_since_compact: usize,
}

impl<'t, 'o> Commit<'t, 'o> {
    pub(super) fn new(
        params: &'t TickParams<'t>,
        out: &'t mut MatchBuffers<'o>,
        refusals: &'t mut Refusals<'o>,
        diagnostics: &'t mut [RuleDiagnostics],
        (f, h, row): (usize, usize, usize),
    ) -> Self {
        Commit { params, out, refusals, diagnostics, f, h, row, matches: 0, written: 0, used_since_compact: 0 }
    }

    /// The staged match `k` of `staged`.
    pub(super) fn staged<'s>(&self, staged: &'s Staged, k: usize) -> StagedMatch<'s> {
        staged.get(k, host_words(self.h), self.f)
    }

    /// The context the seed loop's tries read.
    pub(super) fn ctx<'s>(&self, sorted: &'s Sorted) -> Ctx<'s> {
        Ctx { s: sorted, f: self.f, h: self.h, norm: self.params.mmr_normalization_ref }
    }

    /// Commits the try of the seed at skill position `q`: the records in `tried` (one per ruleset
    /// tried, in ruleset order, `rulesets` their bits) into the diagnostics, and the match it formed, of
    /// the live positions `sel`, staged as `staged`, into the output, its tickets marked used. Answers
    /// whether half the live tickets are now used, so that the caller should `compact`.
    pub(super) fn seed(
        &mut self,
        sorted: &Sorted,
        links: &Links,
        q: usize,
        (rulesets, tried): (u32, &[RuleDiagnostics]),
        formed: Option<(&[u32], StagedMatch<'_>)>,
    ) -> bool {
        let mut bits = rulesets;
        for d in tried {
            self.diagnostics[bits.trailing_zeros() as usize].add(d);
            bits &= bits - 1;
        }
        let Some((sel, staged)) = formed else {
            let row = self.row;
            self.refusals.unmatched(|| sorted.rows[sorted.cur[q] as usize * row] as u32 as usize, tried);
            return false;
        };
        emit(self.out, self.matches, self.written, &staged);
        self.written += sel.len();
        self.matches += 1;
        for (&p, &entry) in sel.iter().zip(staged.entries) {
            links.mark_used(p);
            self.refusals.matched(entry as u32 as usize);
            sorted.mark_used((entry >> 32) as usize);
        }
        self.used_since_compact += sel.len();
        // Once half the live tickets are used, drop them so scans stay dense in memory. When does not
        // change what a scan finds (it skips used tickets either way), only how fast.
        2 * self.used_since_compact >= sorted.live && sorted.live >= 256
    }

    /// Drops the used tickets from the live arrays (which moves every live position); with `spread`, on
    /// the calling rayon pool's threads.
    pub(super) fn compact(&mut self, sorted: &mut Sorted, links: &mut Links, spread: bool) {
        sorted.compact(links, 2 * self.f, self.row, spread);
        self.used_since_compact = 0;
    }
}
