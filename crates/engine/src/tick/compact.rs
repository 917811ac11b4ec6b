//! Compaction: the used tickets dropped from the live arrays once half of them are used, so scans stay
//! dense in memory (`Commit::seed` decides when). Order is kept, so scans see the same sequence of
//! unused tickets; only positions change. On the engine's threads the arrays are compacted in pieces
//! into the spare ones (tick/speculate.rs's loop runs on them); otherwise in place.

use rayon::prelude::*;

use super::layout::{Hot, Sorted, Spare};
use super::links::Links;
use super::speculate::PIECES_A_THREAD;

impl Sorted {
    /// Removes used tickets from the live arrays (`f2` attribute words and `rw` row words a ticket).
    /// With `spread`, on the calling rayon pool's threads.
    pub(super) fn compact(&mut self, links: &mut Links, f2: usize, rw: usize, spread: bool) {
        let f2 = if self.interned { 0 } else { f2 };
        let pieces = if spread { rayon::current_num_threads() * PIECES_A_THREAD } else { 1 };
        // A kept layout already displaced lies in the spare arrays: then the search's copy is
        // compacted in place.
        if pieces > 1 && !self.displaced {
            self.compact_into_spare(links, (f2, rw), pieces);
        } else {
            self.compact_in_place(links, f2, rw);
        }
        links.reset(self.live);
    }

    fn compact_in_place(&mut self, links: &Links, f2: usize, rw: usize) {
        if self.kept.is_kept() && !self.displaced {
            // The first compaction of a kept layout: the search goes on in a copy, so the next tick
            // updates the layout as this one laid it out (`restore`).
            self.spare.hot.clone_from(&self.hot);
            self.spare.rows.clone_from(&self.rows);
            self.spare.attrs.clone_from(&self.attrs);
            self.swap_spare();
            self.displaced = true;
        }
        let live = self.live;
        // In place: entries only move down. Branch-free over which entries are used (random, so
        // a branch would mispredict): each entry is copied to the next free place, which
        // advances only when the entry is unused; a used one is overwritten by the next copy.
        let mut kept = 0;
        for pos in 0..live {
            let unused = !links.is_used(pos as u32);
            if kept < pos {
                self.hot[kept + 1] = self.hot[pos + 1];
                let (dst, src) = self.rows.split_at_mut(pos * rw);
                copy_words(&mut dst[kept * rw..(kept + 1) * rw], &src[..rw]);
                let (dst, src) = self.attrs.split_at_mut(pos * f2);
                copy_words(&mut dst[kept * f2..(kept + 1) * f2], &src[..f2]);
            }
            // Skill positions ascend with live positions, so these writes go in order. A used entry
            // gets the next kept one's position, so that it lies within the arrays (the seed loops skip a
            // used seed before they read its position).
            let q = (self.rows[kept * rw] >> 32) as usize;
            self.cur[q] = kept as u32;
            kept += usize::from(unused);
        }
        self.hot.truncate(kept + 1);
        self.hot.push(Hot::sentinel(f64::INFINITY));
        self.rows.truncate(kept * rw);
        self.attrs.truncate(kept * f2);
        self.live = kept;
    }

    /// Compacts the live arrays into the spare ones, `pieces` runs of live positions at once (each
    /// counts its unused tickets, then copies them after the earlier runs'), and makes those the live
    /// arrays. A kept layout stays whole in the spare arrays then (`displaced`), with no copy of it.
    fn compact_into_spare(&mut self, links: &Links, (f2, rw): (usize, usize), pieces: usize) {
        let live = self.live;
        let len = live.div_ceil(pieces).max(1);
        let runs = live.div_ceil(len);
        let Spare { hot: spare_hot, rows: spare_rows, attrs: spare_attrs, counts, .. } = &mut self.spare;
        counts.clear();
        counts.resize(runs, 0);
        counts.par_iter_mut().enumerate().for_each(|(k, count)| {
            *count = (k * len..((k + 1) * len).min(live)).filter(|&p| !links.is_used(p as u32)).count();
        });
        let kept: usize = counts.iter().sum();
        spare_hot.resize(kept + 2, Hot::default());
        spare_hot[0] = self.hot[0];
        spare_hot[kept + 1] = Hot::sentinel(f64::INFINITY);
        spare_rows.resize(kept * rw, 0);
        spare_attrs.resize(kept * f2, 0);
        // Each run's part of the outputs, and of `cur`: skill positions ascend with live positions, so
        // a run's tickets have the skill positions from its first one's to the next run's first one's.
        let mut parts = Vec::with_capacity(runs);
        let (mut hot, mut rows, mut attrs) = (&mut spare_hot[1..=kept], &mut spare_rows[..], &mut spare_attrs[..]);
        let mut cur = &mut self.cur[..];
        let (mut at, mut cur_from) = (0, 0);
        for (k, &count) in counts.iter().enumerate() {
            let (h, rest_hot) = std::mem::take(&mut hot).split_at_mut(count);
            let (r, rest_rows) = std::mem::take(&mut rows).split_at_mut(count * rw);
            let (a, rest_attrs) = std::mem::take(&mut attrs).split_at_mut(count * f2);
            let cur_to =
                if k + 1 < runs { (self.rows[(k + 1) * len * rw] >> 32) as usize } else { cur_from + cur.len() };
            let (c, rest_cur) = std::mem::take(&mut cur).split_at_mut(cur_to - cur_from);
            parts.push((k * len..((k + 1) * len).min(live), at, (h, r, a), (c, cur_from)));
            (hot, rows, attrs, cur) = (rest_hot, rest_rows, rest_attrs, rest_cur);
            at += count;
            cur_from = cur_to;
        }
        let (src_hot, src_rows, src_attrs) = (&self.hot, &self.rows, &self.attrs);
        parts.into_par_iter().for_each(|(positions, at, (hot, rows, attrs), (cur, cur_from))| {
            let mut j = 0;
            for pos in positions {
                // As in place, a used ticket's skill position gets the next kept one's live position.
                cur[(src_rows[pos * rw] >> 32) as usize - cur_from] = (at + j) as u32;
                if links.is_used(pos as u32) {
                    continue;
                }
                hot[j] = src_hot[pos + 1];
                copy_words(&mut rows[j * rw..(j + 1) * rw], &src_rows[pos * rw..(pos + 1) * rw]);
                copy_words(&mut attrs[j * f2..(j + 1) * f2], &src_attrs[pos * f2..(pos + 1) * f2]);
                j += 1;
            }
        });
        self.swap_spare();
        self.displaced = self.kept.is_kept();
        self.live = kept;
    }

    /// Swaps the live arrays with the spare ones.
    pub(super) fn swap_spare(&mut self) {
        std::mem::swap(&mut self.hot, &mut self.spare.hot);
        std::mem::swap(&mut self.rows, &mut self.spare.rows);
        std::mem::swap(&mut self.attrs, &mut self.spare.attrs);
    }
}

/// `dst.copy_from_slice(src)` without a `memcpy` call for the usual short rows.
#[inline]
fn copy_words(dst: &mut [u64], src: &[u64]) {
    match (dst, src) {
        ([d0, d1], [s0, s1]) => (*d0, *d1) = (*s0, *s1),
        ([d0, d1, d2], [s0, s1, s2]) => (*d0, *d1, *d2) = (*s0, *s1, *s2),
        (dst, src) => dst.copy_from_slice(src),
    }
}
