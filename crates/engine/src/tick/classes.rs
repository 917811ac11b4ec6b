//! Attribute classes: the pool's distinct attribute rows, interned, and per filter the pairwise
//! compatibility of their (values, accepts) pairs as bitsets.

use crate::input::{compatible, filter_groups};
use crate::FilterMode;

/// Distinct attribute rows of the pool ("classes"), 2F words each, with an open-addressing
/// index. Pools usually have few distinct rows, so the table stays in cache.
#[derive(Debug, Default)]
pub(super) struct Interner {
    pub(super) rows: Vec<u64>,
    /// class + 1, or 0 when empty; the length is a power of two at least twice the classes.
    slots: Vec<u32>,
    count: usize,
    /// Scratch for `grow`.
    split: (Vec<u64>, Vec<u64>),
}

impl Interner {
    #[inline]
    fn hash(vals: &[u64], accs: &[u64]) -> u64 {
        let mut x = 0x243F_6A88_85A3_08D3u64;
        for (&v, &a) in vals.iter().zip(accs) {
            x = (x ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x = (x ^ a ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        }
        x ^ (x >> 32)
    }

    pub(super) fn clear(&mut self) {
        self.rows.clear();
        self.slots.clear();
        self.count = 0;
    }

    /// Class of the row (`vals`, `accs`), adding it when new. `None` when that would exceed
    /// `max_classes` (the caller then lays the rows out per ticket instead).
    #[inline]
    pub(super) fn intern(&mut self, vals: &[u64], accs: &[u64], max_classes: usize) -> Option<u32> {
        // Fixed widths for the usual filter counts: the loops unroll.
        match vals.len() {
            1 => self.intern_n::<1>(vals, accs, max_classes),
            2 => self.intern_n::<2>(vals, accs, max_classes),
            3 => self.intern_n::<3>(vals, accs, max_classes),
            4 => self.intern_n::<4>(vals, accs, max_classes),
            _ => self.intern_n::<0>(vals, accs, max_classes),
        }
    }

    /// `intern` for `F` filters (0: any number).
    #[inline(always)]
    fn intern_n<const F: usize>(&mut self, vals: &[u64], accs: &[u64], max_classes: usize) -> Option<u32> {
        let f = if F > 0 { F } else { vals.len() };
        let (vals, accs) = (&vals[..f], &accs[..f]);
        if 2 * (self.count + 1) > self.slots.len() {
            if self.count + 1 > max_classes {
                return None;
            }
            self.grow(f);
        }
        let mask = self.slots.len() - 1;
        let mut k = Self::hash(vals, accs) as usize & mask;
        loop {
            let c = self.slots[k] as usize;
            if c == 0 {
                self.slots[k] = self.count as u32 + 1;
                for (&v, &a) in vals.iter().zip(accs) {
                    self.rows.push(v);
                    self.rows.push(a);
                }
                self.count += 1;
                return Some(self.count as u32 - 1);
            }
            let row = &self.rows[(c - 1) * 2 * f..c * 2 * f];
            let mut same = true;
            for k in 0..f {
                same &= (row[2 * k] == vals[k]) & (row[2 * k + 1] == accs[k]);
            }
            if same {
                return Some(c as u32 - 1);
            }
            k = (k + 1) & mask;
        }
    }

    /// Adds the classes of `other` (rows of `f` filters) not here yet, in its order, and writes into `map`
    /// each one's class here. Answers false, with the table left part-filled, when that would exceed
    /// `max_classes`.
    pub(super) fn merge(&mut self, other: &Interner, f: usize, max_classes: usize, map: &mut Vec<u32>) -> bool {
        map.clear();
        let (mut vals, mut accs) = std::mem::take(&mut self.split);
        let mut fits = true;
        for row in other.rows.chunks_exact(2 * f.max(1)).take(other.count) {
            vals.clear();
            accs.clear();
            vals.extend(row.iter().step_by(2));
            accs.extend(row.iter().skip(1).step_by(2));
            match self.intern(&vals, &accs, max_classes) {
                Some(c) => map.push(c),
                None => {
                    fits = false;
                    break;
                }
            }
        }
        self.split = (vals, accs);
        fits
    }

    /// Doubles the index (load factor at most 1/2) and re-inserts every class.
    #[cold]
    fn grow(&mut self, f: usize) {
        let size = (self.slots.len() * 2).max(1024);
        self.slots.clear();
        self.slots.resize(size, 0);
        for c in 0..self.count {
            let row = &self.rows[c * 2 * f..(c + 1) * 2 * f];
            let (vals, accs) = &mut self.split;
            vals.clear();
            accs.clear();
            vals.extend(row.iter().step_by(2));
            accs.extend(row.iter().skip(1).step_by(2));
            let mut k = Self::hash(vals, accs) as usize & (size - 1);
            while self.slots[k] != 0 {
                k = (k + 1) & (size - 1);
            }
            self.slots[k] = c as u32 + 1;
        }
    }
}

/// Attribute compatibility by bitsets. Filter k's distinct rows (values and accepts over its columns)
/// get ids `0..64`; `compat[64k + id]` has bit j set when row `id` is compatible with row j under
/// filter k's mode (a symmetric relation). A match keeps, per filter, the AND of its tickets'
/// rows: the rows compatible with all of them, so testing a candidate is one AND per filter.
#[derive(Debug, Default)]
pub(super) struct FilterBits {
    pub(super) enabled: bool,
    /// Filters (column groups, `filter_groups`); a class has one word per filter in `class_bits`.
    pub(super) filters: usize,
    /// `filters` words per class: `1 << id` of the class's row in filter k.
    pub(super) class_bits: Vec<u64>,
    pub(super) compat: Vec<u64>,
    /// Distinct rows of one filter while building: values then accepts, `2 * columns` words each.
    rows: Vec<u64>,
}

impl FilterBits {
    /// At most this many filters (column groups).
    pub(super) const MAX_FILTERS: usize = 16;

    pub(super) fn build(&mut self, classes: Option<&Interner>, modes: &[FilterMode]) {
        self.enabled = false;
        let Some(classes) = classes else { return };
        let f = modes.len();
        let filters = filter_groups(modes).count();
        if filters > Self::MAX_FILTERS {
            return;
        }
        self.filters = filters;
        self.class_bits.clear();
        self.class_bits.resize(classes.count * filters, 0);
        self.compat.clear();
        self.compat.resize(64 * filters, 0);
        for (g, (k, w, mode)) in filter_groups(modes).enumerate() {
            self.rows.clear();
            for (c, row) in classes.rows.chunks_exact(2 * f).enumerate() {
                // This filter's values, then its accepts.
                let own = &row[2 * k..2 * (k + w)];
                let mut this = own.iter().step_by(2).chain(own.iter().skip(1).step_by(2));
                let found = self.rows.chunks_exact(2 * w).position(|r| r.iter().eq(this.clone()));
                let id = match found {
                    Some(id) => id,
                    None if self.rows.len() < 64 * 2 * w => {
                        self.rows.extend(&mut this);
                        self.rows.len() / (2 * w) - 1
                    }
                    None => return,
                };
                self.class_bits[c * filters + g] = 1 << id;
            }
            for (a, ra) in self.rows.chunks_exact(2 * w).enumerate() {
                for (b, rb) in self.rows.chunks_exact(2 * w).enumerate() {
                    let ok = compatible(mode, &ra[..w], &ra[w..], &rb[..w], &rb[w..]);
                    self.compat[64 * g + a] |= u64::from(ok) << b;
                }
            }
        }
        self.enabled = true;
    }
}

#[cfg(test)]
mod tests {
    use super::super::sort::mix;
    use super::*;

    #[test]
    fn interner_gives_equal_rows_one_class() {
        let mut classes = Interner::default();
        let rows: Vec<([u64; 2], [u64; 2])> = (0..3000u64).map(|i| ([i % 1500, 7], [u64::MAX, i % 1500])).collect();
        // Growing the index (at 512 and 1024 classes) keeps every class.
        let ids: Vec<u32> = rows.iter().map(|(v, a)| classes.intern(v, a, usize::MAX).unwrap()).collect();
        for (i, (v, a)) in rows.iter().enumerate() {
            assert_eq!(ids[i], (i % 1500) as u32);
            let c = ids[i] as usize;
            assert_eq!(classes.rows[c * 4..c * 4 + 4], [v[0], a[0], v[1], a[1]]);
        }
        assert_eq!(classes.count, 1500);
        // The cap is checked when the index must grow (first at 512 classes): past it, refused, so
        // the caller lays rows out per ticket instead.
        classes.clear();
        for v in 0..512 {
            assert_eq!(classes.intern(&[v], &[0], 512), Some(v as u32));
        }
        assert_eq!(classes.intern(&[512], &[0], 512), None);
        assert_eq!(classes.intern(&[512], &[0], 513), Some(512));
    }

    #[test]
    fn merged_tables_number_rows_as_one_table_would() {
        // Two pieces of a pool: rows 0..6 then 4..10 (one filter column), each interned apart.
        let (mut a, mut b, mut whole) = (Interner::default(), Interner::default(), Interner::default());
        for v in (0..6).chain(4..10) {
            whole.intern(&[v], &[!v], usize::MAX).unwrap();
        }
        for v in 0..6 {
            a.intern(&[v], &[!v], usize::MAX).unwrap();
        }
        for v in 4..10 {
            b.intern(&[v], &[!v], usize::MAX).unwrap();
        }
        let (mut merged, mut map) = (Interner::default(), Vec::new());
        assert!(merged.merge(&a, 1, usize::MAX, &mut map));
        assert_eq!(map, [0, 1, 2, 3, 4, 5]);
        assert!(merged.merge(&b, 1, usize::MAX, &mut map));
        assert_eq!(map, [4, 5, 6, 7, 8, 9]);
        assert_eq!((merged.count, &merged.rows), (whole.count, &whole.rows));
        // Past the cap (checked as `intern` checks it, when the index must grow at 512), refused.
        let mut many = Interner::default();
        for v in 0..600 {
            many.intern(&[v], &[0], usize::MAX).unwrap();
        }
        assert!(!Interner::default().merge(&many, 1, 512, &mut map));
        assert!(Interner::default().merge(&many, 1, 600, &mut map));
        assert_eq!(map.len(), 600);
    }

    fn one_column(mode: FilterMode, (va, aa): (u64, u64), (vb, ab): (u64, u64)) -> bool {
        compatible(mode, &[va], &[aa], &[vb], &[ab])
    }

    #[test]
    fn filter_bits_hold_the_pairwise_compatibility_of_classes() {
        let modes = [FilterMode::Overlap, FilterMode::Containment, FilterMode::Overlap];
        let mut classes = Interner::default();
        let mut z = 17u64;
        // Few distinct pairs per filter (at most 25), as bitsets need.
        let mut small = || {
            z = mix(z);
            if z & 7 == 0 {
                u64::MAX
            } else {
                (z >> 8) & 3
            }
        };
        for _ in 0..400 {
            let (vals, accs): (Vec<u64>, Vec<u64>) = (0..3).map(|_| (small(), small())).unzip();
            classes.intern(&vals, &accs, usize::MAX).unwrap();
        }
        let mut bits = FilterBits::default();
        bits.build(Some(&classes), &modes);
        assert!(bits.enabled);
        let pair = |c: usize, k: usize| (classes.rows[c * 6 + 2 * k], classes.rows[c * 6 + 2 * k + 1]);
        for a in 0..classes.count {
            for b in 0..classes.count {
                for (k, &mode) in modes.iter().enumerate() {
                    let id_a = bits.class_bits[a * 3 + k].trailing_zeros() as usize;
                    let got = bits.compat[64 * k + id_a] & bits.class_bits[b * 3 + k] != 0;
                    assert_eq!(got, one_column(mode, pair(a, k), pair(b, k)), "classes {a} {b} filter {k}");
                }
            }
        }
        // More than 64 distinct pairs in a filter: no bitsets.
        let mut many = Interner::default();
        for v in 0..65 {
            many.intern(&[v], &[u64::MAX], usize::MAX).unwrap();
        }
        bits.build(Some(&many), &[FilterMode::Overlap]);
        assert!(!bits.enabled);
        bits.build(None, &[FilterMode::Overlap]);
        assert!(!bits.enabled);
    }
}
