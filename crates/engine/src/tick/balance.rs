//! Team balancing of a full candidate match: a greedy packing, then improving swaps, so that the
//! spread of team skill sums shrinks while every team keeps exactly `team_size` players.

use super::scratch::Scratch;
use crate::Ruleset;

/// A balancing swap must shrink the team gap by at least this factor. A swap that merely mirrors the two
/// team sums (its new gap equals the old up to rounding) is refused: without this margin such swaps could
/// alternate until the round cap, and the teams would depend on the cap's parity.
const MIN_SWAP_GAIN: f64 = 1.0 - 1e-9;

/// Max minus min of `sums`: team skill sums here, a candidate's skills in `search::cost`.
pub(super) fn range(sums: &[f64]) -> f64 {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for &x in sums {
        lo = lo.min(x);
        hi = hi.max(x);
    }
    hi - lo
}

/// Key with the order of `f64::total_cmp`.
#[inline]
fn total_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Rebalances `ws.sel_team` (a valid packing on entry) to shrink the spread of team skill sums,
/// keeping every team at exactly `team_size` players. Returns whether the imbalance bound holds.
pub(super) fn balance(norm: f64, ws: &mut Scratch, rs: &Ruleset<'_>) -> bool {
    let teams = rs.teams as usize;
    let len = ws.sel.len();
    // Typical matches fit in stack arrays, which avoids resizing vectors per candidate match.
    const SMALL: usize = 16;
    if teams == 2 && len <= SMALL {
        balance2(norm, rs, &ws.sel, &ws.sel_party, &ws.sel_eff, &mut ws.sel_team)
    } else if len <= SMALL && teams <= SMALL {
        let mut order = [0u128; SMALL];
        let (mut weight, mut alt_team, mut members) = ([0.0; SMALL], [0u32; SMALL], [0u32; SMALL]);
        let (mut sums, mut alt_sums, mut room) = ([0.0; SMALL], [0.0; SMALL], [0u32; SMALL]);
        let bufs = BalanceBufs {
            weight: &mut weight[..len],
            order: &mut order[..len],
            alt_team: &mut alt_team[..len],
            members: &mut members[..len],
            sums: &mut sums[..teams],
            alt_sums: &mut alt_sums[..teams],
            room: &mut room[..teams],
        };
        balance_with(norm, rs, &ws.sel, &ws.sel_party, &ws.sel_eff, &mut ws.sel_team, bufs)
    } else {
        let b = &mut ws.big;
        b.weight.resize(len, 0.0);
        b.order.resize(len, 0);
        b.alt_team.resize(len, 0);
        b.members.resize(len, 0);
        b.sums.resize(teams, 0.0);
        b.alt_sums.resize(teams, 0.0);
        b.room.resize(teams, 0);
        let bufs = BalanceBufs {
            weight: &mut b.weight,
            order: &mut b.order,
            alt_team: &mut b.alt_team,
            members: &mut b.members,
            sums: &mut b.sums,
            alt_sums: &mut b.alt_sums,
            room: &mut b.room,
        };
        balance_with(norm, rs, &ws.sel, &ws.sel_party, &ws.sel_eff, &mut ws.sel_team, bufs)
    }
}

/// Greedy order key: biggest parties first (hardest to place), strongest first within a size,
/// ties by skill position; the low bits carry the index into `sel`.
#[inline]
fn greedy_key(party: u32, eff: f64, pos: u32, i: usize) -> u128 {
    (u128::from(255 - party) << 120) | (u128::from(!total_key(eff)) << 56) | (u128::from(pos) << 24) | i as u128
}

/// Sorts distinct keys (at most 16) by counting ranks: no data-dependent branches.
#[inline]
fn rank_sort(keys: &mut [u128]) {
    let mut copy = [0u128; 16];
    let copy = &mut copy[..keys.len()];
    copy.copy_from_slice(keys);
    for &k in copy.iter() {
        let rank: usize = copy.iter().map(|&o| usize::from(o < k)).sum();
        keys[rank] = k;
    }
}

/// `balance_with` for two teams and at most 16 tickets (the common case), with teams as
/// bitmasks. Same steps, same arithmetic in the same order, so the same result (the property
/// and golden tests run both).
fn balance2(norm: f64, rs: &Ruleset<'_>, sel: &[u32], party: &[u32], eff: &[f64], team: &mut [u32]) -> bool {
    let len = sel.len();
    let (mut weight, mut order) = ([0.0; 16], [0u128; 16]);
    let mut sums = [0.0; 2];
    for i in 0..len {
        weight[i] = eff[i] * f64::from(party[i]);
        order[i] = greedy_key(party[i], eff[i], sel[i], i);
        sums[team[i] as usize] += weight[i];
    }
    let weight = &weight[..len];
    let order = &mut order[..len];
    rank_sort(order);

    // Greedy: each party, in that order, to the weaker team with room (team 0 on ties).
    let (mut room, mut alt_sums, mut alt_ones) = ([rs.team_size; 2], [0.0; 2], 0u32);
    let mut packed = true;
    for &key in order.iter() {
        let i = (key & 0xFF_FFFF) as usize;
        let size = party[i];
        let best = match (room[0] >= size, room[1] >= size) {
            (true, fits1) => usize::from(fits1 && alt_sums[1] < alt_sums[0]),
            (false, true) => 1,
            (false, false) => {
                packed = false;
                break;
            }
        };
        room[best] -= size;
        alt_sums[best] += weight[i];
        alt_ones |= (best as u32) << i;
    }
    let mut ones = team.iter().enumerate().fold(0u32, |m, (i, &t)| m | t << i);
    if packed && range(&alt_sums) < range(&sums) {
        ones = alt_ones;
        sums = alt_sums;
    }

    // Improving swaps of equal-size parties, as in `balance_with`; pairs in (a, b) order.
    let all = if len == 32 { u32::MAX } else { (1u32 << len) - 1 };
    for _ in 0..(4 * len) {
        let tmax = usize::from(sums[1] > sums[0]);
        let tmin = usize::from(sums[1] < sums[0]);
        let diff = sums[tmax] - sums[tmin];
        if tmax == tmin || diff <= 0.0 {
            break;
        }
        let (strong, weak) = if tmax == 1 { (ones, all & !ones) } else { (all & !ones, ones) };
        let (mut found, mut best_a, mut best_b, mut best_diff) = (false, 0, 0, 0.0);
        let mut a_bits = strong;
        while a_bits != 0 {
            let a = a_bits.trailing_zeros() as usize;
            a_bits &= a_bits - 1;
            let mut b_bits = weak;
            while b_bits != 0 {
                let b = b_bits.trailing_zeros() as usize;
                b_bits &= b_bits - 1;
                let d = weight[a] - weight[b];
                let new_diff = (diff - 2.0 * d).abs();
                let better = (party[a] == party[b])
                    & (d > 0.0)
                    & (new_diff < diff * MIN_SWAP_GAIN)
                    & (!found | (new_diff < best_diff));
                found |= better;
                best_a = if better { a } else { best_a };
                best_b = if better { b } else { best_b };
                best_diff = if better { new_diff } else { best_diff };
            }
        }
        if !found {
            break;
        }
        let d = weight[best_a] - weight[best_b];
        sums[tmax] -= d;
        sums[tmin] += d;
        ones ^= (1 << best_a) | (1 << best_b);
    }
    for (i, t) in team.iter_mut().enumerate() {
        *t = ones >> i & 1;
    }
    imbalance(&sums, rs.team_size, norm) <= rs.max_team_imbalance
}

/// Work space of `balance_with`: `len` entries per selected ticket, `teams` per team. Contents
/// on entry do not matter.
struct BalanceBufs<'a> {
    weight: &'a mut [f64],
    order: &'a mut [u128],
    alt_team: &'a mut [u32],
    members: &'a mut [u32],
    sums: &'a mut [f64],
    alt_sums: &'a mut [f64],
    room: &'a mut [u32],
}

fn balance_with(
    norm: f64,
    rs: &Ruleset<'_>,
    sel: &[u32],
    party: &[u32],
    eff: &[f64],
    team: &mut [u32],
    b: BalanceBufs<'_>,
) -> bool {
    let BalanceBufs { weight, order, alt_team, members, sums, alt_sums, room } = b;
    let teams = sums.len();
    let (sums, alt_sums, room) = (&mut sums[..teams], &mut alt_sums[..teams], &mut room[..teams]);
    let len = sel.len();
    for (((w, &e), &p), ((o, &pos), i)) in weight.iter_mut().zip(eff).zip(party).zip(order.iter_mut().zip(sel).zip(0..))
    {
        *w = e * f64::from(p);
        *o = greedy_key(p, e, pos, i);
    }
    let weight = &*weight;

    sums.fill(0.0);
    for (&t, &w) in team.iter().zip(weight) {
        sums[t as usize] += w;
    }

    // Greedy: each party, in that order, to the weakest team with room. May fail to pack; then
    // the scan's packing is kept. Small matches sort by counting ranks (keys are distinct),
    // which has no data-dependent branches.
    if len <= 16 {
        rank_sort(order);
    } else {
        order.sort_unstable();
    }
    alt_sums.fill(0.0);
    room.fill(rs.team_size);
    let mut packed = true;
    for &key in order.iter() {
        let i = (key & 0xFF_FFFF) as usize;
        let size = party[i];
        let mut best = usize::MAX;
        for tm in 0..teams {
            if room[tm] >= size && (best == usize::MAX || alt_sums[tm] < alt_sums[best]) {
                best = tm;
            }
        }
        if best == usize::MAX {
            packed = false;
            break;
        }
        room[best] -= size;
        alt_team[i] = best as u32;
        alt_sums[best] += weight[i];
    }
    if packed && range(alt_sums) < range(sums) {
        team.copy_from_slice(alt_team);
        sums.copy_from_slice(alt_sums);
    }

    // Improving swaps of equal-size parties between the strongest and the weakest team. Each
    // accepted swap strictly lowers the sum of squared team sums, so this terminates; the cap
    // bounds the cost for very large matches.
    for _ in 0..(4 * len) {
        let (mut tmax, mut tmin) = (0usize, 0usize);
        for tm in 1..teams {
            if sums[tm] > sums[tmax] {
                tmax = tm;
            }
            if sums[tm] < sums[tmin] {
                tmin = tm;
            }
        }
        let diff = sums[tmax] - sums[tmin];
        if tmax == tmin || diff <= 0.0 {
            break;
        }
        // Members of the weakest team, in `sel` order, so pairs are tried in (a, b) order; the
        // first strictly best pair wins. Selects rather than branches: outcomes are random.
        let mut count = 0;
        for (b, &t) in team.iter().enumerate() {
            members[count] = b as u32;
            count += usize::from(t as usize == tmin);
        }
        let (mut found, mut best_a, mut best_b, mut best_diff) = (false, 0, 0, 0.0);
        for a in 0..len {
            if team[a] as usize != tmax {
                continue;
            }
            for &b in &members[..count] {
                let b = b as usize;
                let d = weight[a] - weight[b];
                let new_diff = (diff - 2.0 * d).abs();
                let better = (party[a] == party[b])
                    & (d > 0.0)
                    & (new_diff < diff * MIN_SWAP_GAIN)
                    & (!found | (new_diff < best_diff));
                found |= better;
                best_a = if better { a } else { best_a };
                best_b = if better { b } else { best_b };
                best_diff = if better { new_diff } else { best_diff };
            }
        }
        if !found {
            break;
        }
        let (a, b) = (best_a, best_b);
        let d = weight[a] - weight[b];
        sums[tmax] -= d;
        sums[tmin] += d;
        team[a] = tmin as u32;
        team[b] = tmax as u32;
    }

    imbalance(sums, rs.team_size, norm) <= rs.max_team_imbalance
}

/// (max team mean - min team mean) / norm, team mean = party-size-weighted mean effective skill.
fn imbalance(sums: &[f64], team_size: u32, norm: f64) -> f64 {
    range(sums) / f64::from(team_size) / norm
}

#[cfg(test)]
mod tests {
    use super::super::sort::mix;
    use super::*;

    fn ruleset(teams: u32, team_size: u32, max_team_imbalance: f64) -> Ruleset<'static> {
        Ruleset {
            teams,
            team_size,
            max_skill_spread: f64::INFINITY,
            max_team_imbalance,
            max_latency_ms: 0,
            require_host: false,
            relaxation: &[],
            expansion: crate::Expansion::NONE,
        }
    }

    /// `balance_with` on heap buffers.
    fn balance_vec(norm: f64, rs: &Ruleset<'_>, sel: &[u32], party: &[u32], eff: &[f64], team: &mut [u32]) -> bool {
        let (len, teams) = (sel.len(), rs.teams as usize);
        let (mut weight, mut order, mut alt_team, mut members) =
            (vec![0.0; len], vec![0; len], vec![0; len], vec![0; len]);
        let (mut sums, mut alt_sums, mut room) = (vec![0.0; teams], vec![0.0; teams], vec![0; teams]);
        let bufs = BalanceBufs {
            weight: &mut weight,
            order: &mut order,
            alt_team: &mut alt_team,
            members: &mut members,
            sums: &mut sums,
            alt_sums: &mut alt_sums,
            room: &mut room,
        };
        balance_with(norm, rs, sel, party, eff, team, bufs)
    }

    /// A random valid packing: `teams` teams of exactly `team_size` players, parties of 1 to 5.
    fn packing(z: &mut u64, teams: u32, team_size: u32) -> Scratch {
        let mut sc = Scratch::default();
        for t in 0..teams {
            let mut room = team_size;
            while room > 0 {
                *z = mix(*z);
                let size = (1 + (*z % 5) as u32).min(room);
                room -= size;
                sc.sel.push(sc.sel.len() as u32 * 3 + 1);
                sc.sel_team.push(t);
                sc.sel_party.push(size);
                sc.sel_eff.push((*z >> 11) as f64 / (1u64 << 53) as f64);
            }
        }
        sc
    }

    fn team_sums(sc: &Scratch, teams: u32) -> (Vec<u32>, Vec<f64>) {
        let (mut players, mut sums) = (vec![0; teams as usize], vec![0.0; teams as usize]);
        for ((&t, &p), &e) in sc.sel_team.iter().zip(&sc.sel_party).zip(&sc.sel_eff) {
            players[t as usize] += p;
            sums[t as usize] += e * f64::from(p);
        }
        (players, sums)
    }

    #[test]
    fn balance_evens_out_the_teams_and_keeps_their_sizes() {
        let mut z = 23u64;
        for (teams, team_size) in [(2, 1), (2, 3), (2, 5), (2, 8), (3, 4), (4, 3), (2, 20), (17, 1)] {
            for _ in 0..300 {
                let mut sc = packing(&mut z, teams, team_size);
                let before = range(&team_sums(&sc, teams).1);
                let rs = ruleset(teams, team_size, 0.3);
                let (sel, party, eff, team) =
                    (sc.sel.clone(), sc.sel_party.clone(), sc.sel_eff.clone(), sc.sel_team.clone());
                let ok = balance(0.1, &mut sc, &rs);
                let (players, sums) = team_sums(&sc, teams);
                assert!(players.iter().all(|&p| p == team_size), "{players:?}");
                assert!(range(&sums) <= before);
                assert_eq!(ok, imbalance(&sums, team_size, 0.1) <= 0.3);
                // Whichever buffers `balance` picked, `balance_with` on the heap gives the same teams;
                // `balance2` is the same steps for two teams.
                let mut heap_team = team;
                assert_eq!(balance_vec(0.1, &rs, &sel, &party, &eff, &mut heap_team), ok);
                assert_eq!(heap_team, sc.sel_team);
            }
        }
    }

    #[test]
    fn balance_pairs_the_strongest_with_the_weakest() {
        let mut sc = Scratch::default();
        sc.sel.extend([0, 1, 2, 3]);
        sc.sel_party.extend([1, 1, 1, 1]);
        sc.sel_eff.extend([1.0, 0.9, 0.1, 0.0]);
        sc.sel_team.extend([0, 0, 1, 1]);
        assert!(balance(0.1, &mut sc, &ruleset(2, 2, 0.0)));
        assert_eq!(sc.sel_team, [0, 1, 1, 0]);
    }

    #[test]
    fn rank_sort_sorts_distinct_keys() {
        let mut z = 29u64;
        for len in 0..=16 {
            let mut keys: Vec<u128> = (0..len as u128)
                .map(|i| {
                    z = mix(z);
                    u128::from(z) << 8 | i
                })
                .collect();
            let mut want = keys.clone();
            want.sort_unstable();
            rank_sort(&mut keys);
            assert_eq!(keys, want);
        }
        // Bigger parties first, then stronger, then by skill position.
        assert!(greedy_key(3, 0.1, 9, 0) < greedy_key(2, 0.9, 0, 1));
        assert!(greedy_key(2, 0.9, 9, 0) < greedy_key(2, 0.1, 0, 1));
        assert!(greedy_key(2, 0.5, 1, 1) < greedy_key(2, 0.5, 2, 0));
    }
}
