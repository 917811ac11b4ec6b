//! Which live positions are still unused: `Links`, and the two ways a scan walks them (`Skip`): the
//! committing thread's, and a thread's trying seeds apart (`Span`, tick/speculate.rs).

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// Which live positions are still unused, with O(α) skipping of used runs. Slot `p + 1` is live
/// position p; slots 0 and n + 1 are sentinels. `next[slot][0]` leads left, `[1]` right (both
/// directions in one cache line); an unused slot points to itself. Atomic (relaxed; plain loads and
/// stores on x86) so that the threads trying seeds at once shorten the paths they walk too
/// (tick/speculate.rs): no slot turns unused while they do, so every shortcut any of them writes
/// holds.
#[derive(Debug, Default)]
pub(crate) struct Links {
    pub(super) next: Vec<[AtomicU32; 2]>,
}

impl Links {
    pub(crate) fn reserve(&mut self, n: usize) {
        self.next.reserve(n + 2);
    }

    #[inline]
    pub(super) fn is_used(&self, pos: u32) -> bool {
        self.next[pos as usize + 1][1].load(Relaxed) != pos + 1
    }

    /// Bytes held (the links' capacity).
    pub(crate) fn bytes(&self) -> usize {
        self.next.capacity() * std::mem::size_of::<[AtomicU32; 2]>()
    }

    /// All of `n` positions unused.
    pub(super) fn reset(&mut self, n: usize) {
        self.next.clear();
        self.next.extend((0..(n as u32 + 2)).map(|x| [AtomicU32::new(x), AtomicU32::new(x)]));
    }

    /// Through a shared reference: threads trying seeds walk the links while the committing thread marks
    /// (tick/speculate.rs); a walk that meets the change finds the same unused slots or the new ones.
    pub(super) fn mark_used(&self, pos: u32) {
        let slot = pos + 1;
        let [left, right] = &self.next[slot as usize];
        left.store(slot - 1, Relaxed);
        right.store(slot + 1, Relaxed);
    }
}

/// How a scan finds the next unused slot towards `side` (0 left, 1 right): through `Links`, or
/// through a `Span` of them, which also notes the outermost slots it found, so that a try made while
/// other threads try theirs can be checked against the tickets matched since (tick/speculate.rs).
pub(super) trait Skip {
    fn find(&mut self, x: u32, side: usize) -> u32;
}

impl Skip for &Links {
    #[inline]
    fn find(&mut self, x: u32, side: usize) -> u32 {
        find(&self.next, x, side)
    }
}

/// A walk of the links, shared with other threads, that keeps the lowest and highest slot it answered.
pub(super) struct Span<'a> {
    next: &'a [[AtomicU32; 2]],
    pub(super) lo: u32,
    pub(super) hi: u32,
}

impl<'a> Span<'a> {
    /// A walk that has read only `slot` so far.
    pub(super) fn new(links: &'a Links, slot: u32) -> Self {
        Span { next: &links.next, lo: slot, hi: slot }
    }
}

impl Skip for Span<'_> {
    #[inline]
    fn find(&mut self, x: u32, side: usize) -> u32 {
        let x = find(self.next, x, side);
        self.lo = self.lo.min(x);
        self.hi = self.hi.max(x);
        x
    }
}

/// Union-find "next unused slot" towards `side` (0 left, 1 right) with path halving.
#[inline]
fn find(next: &[[AtomicU32; 2]], mut x: u32, side: usize) -> u32 {
    loop {
        let p = next[x as usize][side].load(Relaxed);
        if p == x {
            return x;
        }
        let gp = next[p as usize][side].load(Relaxed);
        next[x as usize][side].store(gp, Relaxed);
        x = gp;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_find_the_nearest_unused_position() {
        let mut links = Links::default();
        links.reset(6);
        links.mark_used(2);
        links.mark_used(3);
        assert!(links.is_used(2) && links.is_used(3) && !links.is_used(1) && !links.is_used(4));
        // Slots are positions + 1: from position 3, left skips 2 to position 1, right finds 4.
        assert_eq!(find(&links.next, 4, 0), 2);
        assert_eq!(find(&links.next, 4, 1), 5);
        assert_eq!(find(&links.next, 3, 1), 5);
        for p in [0, 1, 4, 5] {
            links.mark_used(p);
        }
        // Every position used: the scans end at the sentinels.
        assert_eq!(find(&links.next, 3, 0), 0);
        assert_eq!(find(&links.next, 3, 1), 7);
    }
}
