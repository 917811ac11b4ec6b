//! Exact packing of parties into two teams. The scan places each ticket in a team as it takes it
//! (best fit), and that placement can leave no room for a party that would fit after moving the
//! others: one solo and a trio in one team of five, a five-stack in the other, leave no place for a
//! duo, while solo + duo and trio + ... would. For two teams, a ticket the placement has no room for
//! is checked here (a subset sum) and, when it fits, every ticket is placed anew.

/// Largest sum tracked: two teams of at most 255 players.
const WORDS: usize = 8;

/// Sums reachable with the first k parties, one bitset per k (bit s: some subset sums to s).
#[derive(Debug, Default)]
pub(crate) struct TwoTeams {
    reach: Vec<[u64; WORDS]>,
}

impl TwoTeams {
    /// Whether `sizes` (the parties placed so far) and one more party of `extra` players fit into two
    /// teams of `team_size`. Keeps the table `place` reads.
    pub(super) fn fits(&mut self, sizes: &[u32], extra: u32, team_size: u32) -> bool {
        let total: u32 = sizes.iter().sum::<u32>() + extra;
        if total > 2 * team_size || 2 * team_size as usize > WORDS * 64 - 1 {
            return false;
        }
        self.reach.clear();
        let mut cur = [0u64; WORDS];
        cur[0] = 1;
        self.reach.push(cur);
        for &s in sizes.iter().chain(std::iter::once(&extra)) {
            cur = or_shifted(&cur, s as usize);
            self.reach.push(cur);
        }
        target(&cur, total, team_size).is_some()
    }

    /// Places `sizes` (the last being the `extra` of the previous `fits`, which answered true) into
    /// teams 0 and 1: team 0 takes the largest sum that leaves the other team within `team_size`,
    /// and, going from the last party back, a party goes to team 1 whenever the rest can still make
    /// team 0's sum.
    pub(super) fn place(&self, sizes: &[u32], team_size: u32, teams: &mut [u32]) {
        let total: u32 = sizes.iter().sum();
        let mut t = target(&self.reach[sizes.len()], total, team_size).expect("fits answered true") as usize;
        for i in (0..sizes.len()).rev() {
            if has(&self.reach[i], t) {
                teams[i] = 1;
            } else {
                teams[i] = 0;
                t -= sizes[i] as usize;
            }
        }
    }
}

/// The largest reachable sum in `total - team_size ..= team_size`.
fn target(reach: &[u64; WORDS], total: u32, team_size: u32) -> Option<u32> {
    let lo = total.saturating_sub(team_size);
    (lo..=team_size.min(total)).rev().find(|&s| has(reach, s as usize))
}

fn has(bits: &[u64; WORDS], s: usize) -> bool {
    bits[s / 64] >> (s % 64) & 1 == 1
}

/// `bits | bits << by`.
fn or_shifted(bits: &[u64; WORDS], by: usize) -> [u64; WORDS] {
    let mut out = *bits;
    let (words, shift) = (by / 64, by % 64);
    for i in (words..WORDS).rev() {
        let lo = bits[i - words] << shift;
        let carry = if shift > 0 && i > words { bits[i - words - 1] >> (64 - shift) } else { 0 };
        out[i] |= lo | carry;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed(sizes: &[u32], team_size: u32) -> Option<Vec<u32>> {
        let mut p = TwoTeams::default();
        let (last, rest) = sizes.split_last().unwrap();
        if !p.fits(rest, *last, team_size) {
            return None;
        }
        let mut teams = vec![9; sizes.len()];
        p.place(sizes, team_size, &mut teams);
        Some(teams)
    }

    #[test]
    fn a_party_fits_when_the_others_move() {
        // A duo after solo + trio (team 0) and a five (team 1) as the scan placed them: it fits once
        // the five has a team of its own and solo + trio + solo the other.
        assert_eq!(packed(&[1, 3, 5, 1], 5), Some(vec![1, 1, 0, 1]));
        // Four, four and two make no five.
        assert_eq!(packed(&[4, 4, 2], 5), None);
        // More players than two teams hold.
        assert_eq!(packed(&[5, 5, 1], 5), None);
        // Every answer keeps both teams within team_size.
        for sizes in [[2, 2, 3, 3], [1, 4, 1, 4], [5, 2, 3, 1], [3, 3, 3, 1]] {
            if let Some(teams) = packed(&sizes, 5) {
                for team in 0..2 {
                    let s: u32 = teams.iter().zip(sizes).filter(|(&x, _)| x == team).map(|(_, s)| s).sum();
                    assert!(s <= 5, "{sizes:?} {teams:?}");
                }
            }
        }
        assert_eq!(packed(&[3, 3, 3, 1], 5), None);
    }

    #[test]
    fn shifts_cross_words() {
        let mut bits = [0u64; WORDS];
        bits[0] = 1 << 63 | 1;
        let out = or_shifted(&bits, 65);
        assert!(has(&out, 0) && has(&out, 63) && has(&out, 65) && has(&out, 128));
        assert_eq!(out.iter().map(|w| w.count_ones()).sum::<u32>(), 4);
    }
}
