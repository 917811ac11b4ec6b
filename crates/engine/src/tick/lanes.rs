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
#[derive(Clone, Copy, Debug)]
pub(super) struct LatBound {
    /// `bound + 1` in every lane, when the bound is below 65535.
    lanes: u64,
    /// Every host passes (bound >= 65535, so no u16 latency exceeds it).
    all: bool,
    h: usize,
}

/// A mask with a bit for each of `h` hosts (0 without hosts), of the first 64.
pub(super) fn all_hosts(h: usize) -> u64 {
    if h >= 64 {
        u64::MAX
    } else {
        (1u64 << h) - 1
    }
}

/// Words of the acceptable-host output per match: one per 64 hosts, at least one.
pub(crate) fn host_words(h: usize) -> usize {
    h.div_ceil(64).max(1)
}

/// A set of hosts: one u64 for queues of up to 64 hosts, so they pay nothing for wider ones, and
/// `WideHosts` for up to `MAX_HOSTS`. The search is compiled once for each.
pub(super) trait HostMask: Copy + Eq + std::fmt::Debug {
    const EMPTY: Self;
    /// Every one of `h` hosts.
    fn all(h: usize) -> Self;
    fn and(self, other: Self) -> Self;
    /// The hosts of `row` (one ticket's latency words) within `lat`'s bound.
    fn within(lat: &LatBound, row: &[u64]) -> Self;
    /// Calls `f` with each host in ascending order.
    fn for_each(self, f: impl FnMut(usize));
    /// Writes the set as `dst.len()` words of 64 hosts.
    fn write(self, dst: &mut [u64]);
}

/// Bits of the hosts of `row`'s first 16 words (64 hosts) within the bound `lanes`.
#[inline]
fn mask_of(row: &[u64], lanes: u64) -> u64 {
    match *row {
        [a] => lanes_lt(a, lanes),
        [a, b] => lanes_lt(a, lanes) | lanes_lt(b, lanes) << 4,
        _ => row.iter().take(16).enumerate().fold(0, |m, (w, &x)| m | lanes_lt(x, lanes) << (4 * w)),
    }
}

impl HostMask for u64 {
    const EMPTY: Self = 0;

    fn all(h: usize) -> Self {
        all_hosts(h)
    }

    #[inline]
    fn and(self, other: Self) -> Self {
        self & other
    }

    #[inline]
    fn within(lat: &LatBound, row: &[u64]) -> Self {
        if lat.all {
            return all_hosts(lat.h);
        }
        mask_of(row, lat.lanes)
    }

    #[inline]
    fn for_each(self, mut f: impl FnMut(usize)) {
        let mut bits = self;
        while bits != 0 {
            f(bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }

    fn write(self, dst: &mut [u64]) {
        dst[0] = self;
    }
}

/// Up to 256 hosts, 64 a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WideHosts(pub(super) [u64; 4]);

impl HostMask for WideHosts {
    const EMPTY: Self = WideHosts([0; 4]);

    fn all(h: usize) -> Self {
        WideHosts(std::array::from_fn(|k| all_hosts(h.saturating_sub(64 * k))))
    }

    #[inline]
    fn and(self, other: Self) -> Self {
        WideHosts(std::array::from_fn(|k| self.0[k] & other.0[k]))
    }

    #[inline]
    fn within(lat: &LatBound, row: &[u64]) -> Self {
        if lat.all {
            return Self::all(lat.h);
        }
        let mut m = [0; 4];
        for (k, words) in row.chunks(16).enumerate().take(4) {
            m[k] = mask_of(words, lat.lanes);
        }
        WideHosts(m)
    }

    fn for_each(self, mut f: impl FnMut(usize)) {
        for (k, &word) in self.0.iter().enumerate() {
            word.for_each(|h| f(64 * k + h));
        }
    }

    fn write(self, dst: &mut [u64]) {
        for (d, &w) in dst.iter_mut().zip(&self.0) {
            *d = w;
        }
    }
}

impl LatBound {
    pub(super) fn new(bound: u32, h: usize) -> Self {
        let all = bound >= u32::from(u16::MAX);
        let lane = if all { 0 } else { u64::from(bound) + 1 };
        LatBound { lanes: lane * 0x0001_0001_0001_0001, all, h }
    }

    /// Hosts whose latency in `row` (one ticket's words) is within the bound.
    #[inline]
    pub(super) fn host_mask<M: HostMask>(&self, row: &[u64]) -> M {
        M::within(self, row)
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
        for &h in &[1usize, 3, 4, 5, 8, 13, 63, 64, 65, 100, 255, 256] {
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
                    let mut want = [0u64; 4];
                    for (k, &l) in lat.iter().enumerate() {
                        want[k / 64] |= u64::from(u32::from(l) <= bound) << (k % 64);
                    }
                    let row = pack(&lat);
                    if h <= 64 {
                        assert_eq!(lb.host_mask::<u64>(&row), want[0], "h={h} bound={bound} lat={lat:?}");
                    }
                    assert_eq!(lb.host_mask::<WideHosts>(&row), WideHosts(want), "h={h} bound={bound} lat={lat:?}");
                    let mut seen = Vec::new();
                    WideHosts(want).for_each(|host| seen.push(host));
                    let listed: Vec<usize> = (0..h).filter(|&k| u32::from(lat[k]) <= bound).collect();
                    assert_eq!(seen, listed);
                }
            }
        }
        assert_eq!(row_words(5), 3, "the pool index word, then two words of lanes");
        assert_eq!(WideHosts::all(70), WideHosts([u64::MAX, 0b11_1111, 0, 0]));
        assert_eq!((host_words(0), host_words(64), host_words(65), host_words(256)), (1, 1, 2, 4));
    }
}
