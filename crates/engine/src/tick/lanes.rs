//! Latencies as four 16-bit lanes per u64 word, so one SWAR step tests four hosts.

/// Words of latencies per ticket: four 16-bit lanes each.
#[inline]
pub(super) fn lat_words(h: usize) -> usize {
    h.div_ceil(4)
}

/// Words per `Sorted::rows` entry: the pool index, then the latencies.
#[inline]
pub(super) fn row_words(h: usize) -> usize {
    1 + lat_words(h)
}

const LANE_HI: u64 = 0x8000_8000_8000_8000;

/// Top bit of 16-bit lane j set when lane j of `x` is below lane j of `t` (unsigned, SWAR).
#[inline]
fn lanes_lt_hi(x: u64, t: u64) -> u64 {
    // Per-lane x - t on the low 15 bits without borrows between lanes: bit 15 of a lane is
    // set when x_lo >= t_lo. With equal top bits that decides; otherwise the top bits do.
    let d = (x | LANE_HI) - (t & !LANE_HI);
    ((!x & t) | (!(x ^ t) & !d)) & LANE_HI
}

/// Bit j (j < 4) set when 16-bit lane j of `x` is below lane j of `t`.
#[inline]
fn lanes_lt(x: u64, t: u64) -> u64 {
    // Gather the four lane flags (bits 0, 16, 32, 48 after the shift) into bits 45..=48.
    ((lanes_lt_hi(x, t) >> 15).wrapping_mul(1 | 1 << 15 | 1 << 30 | 1 << 45) >> 45) & 0xF
}

/// Host test for one latency bound: `host_mask` is then a few word operations.
#[derive(Clone, Copy)]
pub(super) struct LatBound {
    /// `bound + 1` in every lane, when the bound is below 65535.
    lanes: u64,
    /// Every host passes (bound >= 65535, so no u16 latency exceeds it).
    all: bool,
    all_mask: u64,
}

/// A mask with a bit for each of `h` hosts (0 without hosts).
pub(super) fn all_hosts(h: usize) -> u64 {
    if h >= 64 {
        u64::MAX
    } else {
        (1u64 << h) - 1
    }
}

impl LatBound {
    pub(super) fn new(bound: u32, h: usize) -> Self {
        let all = bound >= u32::from(u16::MAX);
        let lane = if all { 0 } else { u64::from(bound) + 1 };
        let all_mask = all_hosts(h);
        LatBound { lanes: lane * 0x0001_0001_0001_0001, all, all_mask }
    }

    /// Hosts whose latency in `row` (one ticket's words) is within the bound.
    #[inline]
    pub(super) fn host_mask(&self, row: &[u64]) -> u64 {
        if self.all {
            return self.all_mask;
        }
        match *row {
            [a] => lanes_lt(a, self.lanes),
            [a, b] => lanes_lt(a, self.lanes) | lanes_lt(b, self.lanes) << 4,
            _ => row.iter().enumerate().fold(0, |m, (w, &x)| m | lanes_lt(x, self.lanes) << (4 * w)),
        }
    }
}

/// Lane-wise unsigned max of four 16-bit lanes.
#[inline]
pub(super) fn lanes_max(x: u64, y: u64) -> u64 {
    // Lane flags widened to full-lane masks (no carries: each lane holds 0 or 1).
    let m = (lanes_lt_hi(x, y) >> 15) * 0xFFFF;
    (x & !m) | (y & m)
}

#[cfg(test)]
mod tests {
    use super::super::sort::mix;
    use super::*;

    #[test]
    fn lanes_lt_matches_scalar() {
        let mut z = 1u64;
        let mut next = || {
            z = mix(z);
            z
        };
        let edge = [0u16, 1, 2, 0x7FFE, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF];
        for round in 0..20_000 {
            let pick = |r: u64| if r & 1 == 0 { edge[(r >> 1) as usize % edge.len()] } else { (r >> 8) as u16 };
            let x: [u16; 4] = [pick(next()), pick(next()), pick(next()), pick(next())];
            let t = if round % 3 == 0 { edge[round % edge.len()] } else { next() as u16 };
            let xw = x.iter().enumerate().fold(0u64, |w, (k, &l)| w | u64::from(l) << (16 * k));
            let got = lanes_lt(xw, u64::from(t) * 0x0001_0001_0001_0001);
            let want = x.iter().enumerate().fold(0u64, |m, (k, &l)| m | u64::from(l < t) << k);
            assert_eq!(got, want, "x={x:?} t={t}");
        }
    }

    #[test]
    fn lanes_max_matches_scalar() {
        let mut z = 7u64;
        for _ in 0..20_000 {
            z = mix(z);
            let (x, y) = (z, mix(z ^ 1));
            let want = (0..4).fold(0u64, |m, k| {
                let (a, b) = ((x >> (16 * k)) as u16, (y >> (16 * k)) as u16);
                m | u64::from(a.max(b)) << (16 * k)
            });
            assert_eq!(lanes_max(x, y), want);
        }
    }

    /// One ticket's latencies as `layout::prepare` packs them: four lanes a word, padding 0xFFFF.
    fn pack(latency_ms: &[u16]) -> Vec<u64> {
        let mut row = vec![u64::MAX; lat_words(latency_ms.len())];
        for (h, &l) in latency_ms.iter().enumerate() {
            row[h / 4] &= !(0xFFFF << (16 * (h % 4)));
            row[h / 4] |= u64::from(l) << (16 * (h % 4));
        }
        row
    }

    #[test]
    fn host_mask_is_the_hosts_within_the_bound() {
        let mut z = 9u64;
        for &h in &[1usize, 3, 4, 5, 8, 13, 63, 64] {
            for &bound in &[0u32, 1, 80, 150, 0x7FFF, 0xFFFE, 0xFFFF, 70_000] {
                let lb = LatBound::new(bound, h);
                for _ in 0..200 {
                    let lat: Vec<u16> = (0..h)
                        .map(|_| {
                            z = mix(z);
                            if z & 3 == 0 {
                                [0, 80, 150, 0xFFFE, 0xFFFF][(z >> 2) as usize % 5]
                            } else {
                                (z >> 16) as u16 % 300
                            }
                        })
                        .collect();
                    let want =
                        lat.iter().enumerate().fold(0u64, |m, (k, &l)| m | u64::from(u32::from(l) <= bound) << k);
                    assert_eq!(lb.host_mask(&pack(&lat)), want, "h={h} bound={bound} lat={lat:?}");
                }
            }
        }
        assert_eq!(row_words(5), 3, "the pool index word, then two words of lanes");
    }
}
