//! Sort keys and the radix sort behind the skill order and the seed order.

use rayon::prelude::*;

use super::speculate::Threads;

/// Maps an f64 to a u64 with the same total order (for finite values), so sorts compare
/// integers instead of calling `partial_cmp`.
#[inline]
pub(super) fn order_key(x: f64) -> u64 {
    // `+ 0.0` turns -0.0 into +0.0 so both zeros sort together.
    let bits = (x + 0.0).to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// The value whose `order_key` is `k` (-0.0 comes back as +0.0, which `order_key` does not tell
/// apart).
#[inline]
pub(super) fn from_order_key(k: u64) -> f64 {
    if k >> 63 == 1 {
        f64::from_bits(k & !(1 << 63))
    } else {
        f64::from_bits(!k)
    }
}

/// SplitMix64 finaliser: a cheap, well-mixed hash of (seed, ticket) for arrival tie-breaks.
#[inline]
pub(super) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Turns `v` (full sort keys of the tickets `index(0)`, `index(1)`, ..., which ascend) into the
/// skill or seed order: `prefix << 32 | index`, sorted. The prefix is the top 32 of the key bits that
/// differ between tickets, which orders like the full key except within runs of equal prefixes;
/// the caller re-sorts those runs (rare unless keys tie). LSD radix sort, at most 11 bits per
/// pass, on 8-byte elements: O(n) per pass with no data-dependent branches, and stable, so runs
/// come out in index order. With `threads` (and enough keys), each pass is counted and scattered by
/// all of them, a run of keys each; the order is the same.
pub(super) fn sort_by_prefix(
    v: &mut Vec<u64>,
    index: impl Fn(usize) -> u32 + Sync,
    tmp: &mut Vec<u64>,
    hist: &mut Vec<u32>,
    threads: Option<&Threads>,
) {
    let n = v.len();
    let threads = threads.filter(|t| t.worth_it(n));
    let first = v.first().copied().unwrap_or(0);
    let differ = match threads {
        Some(t) => t.run(|| v.par_iter().fold(|| 0, |acc, &k| acc | (k ^ first)).reduce(|| 0, |a, b| a | b)),
        None => v.iter().fold(0, |acc, &k| acc | (k ^ first)),
    };
    let shift = (u64::BITS - differ.leading_zeros()).saturating_sub(32);
    let prefix = |(j, k): (usize, &mut u64)| *k = (*k >> shift) << 32 | u64::from(index(j));
    match threads {
        Some(t) => t.run(|| v.par_iter_mut().enumerate().for_each(prefix)),
        None => v.iter_mut().enumerate().for_each(prefix),
    }
    let bits = u64::BITS - (differ >> shift).leading_zeros();
    if bits == 0 {
        return;
    }
    // Narrower digits once the arrays outgrow the caches: a pass scatters into `2^width` places
    // at once, and 2048 of them miss L1 and the TLB on every write (measured at 1M keys: 10 ms
    // with 11 bits, 7.5 ms with 8; at 100k the extra pass costs more than it saves).
    let max_width = if n > 1 << 18 { 8 } else { 11 };
    let passes = bits.div_ceil(max_width) as usize;
    let width = bits.div_ceil(passes as u32);
    // Fully overwritten by the first pass.
    tmp.resize(n, 0);
    match threads {
        Some(t) => t.run(|| spread_passes(v, tmp, hist, passes, width, t.count())),
        None => passes_alone(v, tmp, hist, passes, width),
    }
}

/// The radix passes on one thread: every pass's digits counted in one read, then each scattered.
fn passes_alone(v: &mut Vec<u64>, tmp: &mut Vec<u64>, hist: &mut Vec<u32>, passes: usize, width: u32) {
    let n = v.len();
    let digits = 1usize << width;
    let mask = (digits - 1) as u64;
    hist.clear();
    hist.resize(passes * digits, 0);
    for &k in v.iter() {
        let k = k >> 32;
        for (pass, counts) in hist.chunks_exact_mut(digits).enumerate() {
            counts[((k >> (pass as u32 * width)) & mask) as usize] += 1;
        }
    }
    for (pass, counts) in hist.chunks_exact_mut(digits).enumerate() {
        if counts.contains(&(n as u32)) {
            continue;
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let x = *c;
            *c = sum;
            sum += x;
        }
        let shift = 32 + pass as u32 * width;
        for &e in v.iter() {
            let d = ((e >> shift) & mask) as usize;
            tmp[counts[d] as usize] = e;
            counts[d] += 1;
        }
        std::mem::swap(v, tmp);
    }
}

/// Where the threads of a pass scatter to: `tmp`'s elements, written at places no two threads share.
#[derive(Clone, Copy)]
struct Scatter(*mut u64);

// SAFETY: a `Scatter` is only written through in `spread_passes`, at places its counting makes
// disjoint between the threads, and read by none of them until every thread is done.
unsafe impl Send for Scatter {}
// SAFETY: as for `Send`.
unsafe impl Sync for Scatter {}

impl Scatter {
    /// Writes `e` at place `at` of `tmp`.
    ///
    /// # Safety
    /// `at` is below `tmp`'s length, and no other thread reads or writes place `at` meanwhile.
    unsafe fn write(&self, at: usize, e: u64) {
        // SAFETY: the caller's duty, above.
        unsafe { self.0.add(at).write(e) };
    }
}

/// The radix passes on the calling pool's threads (from `Threads::run`), `runs` equal runs of keys:
/// per pass, each run's digits are counted, every run gets, per digit, the places after the same
/// digit's earlier runs (so the scatter is as stable as on one thread), and each run scatters its keys.
fn spread_passes(v: &mut Vec<u64>, tmp: &mut Vec<u64>, hist: &mut Vec<u32>, passes: usize, width: u32, runs: usize) {
    let n = v.len();
    let digits = 1usize << width;
    let mask = (digits - 1) as u64;
    let run = n.div_ceil(runs.max(1));
    hist.clear();
    hist.resize(n.div_ceil(run) * digits, 0);
    for pass in 0..passes {
        let shift = 32 + pass as u32 * width;
        hist.fill(0);
        v.par_chunks(run).zip(hist.par_chunks_mut(digits)).for_each(|(keys, counts)| {
            for &e in keys {
                counts[((e >> shift) & mask) as usize] += 1;
            }
        });
        // Every key has one digit: the pass would not move any.
        if (0..digits).any(|d| hist.iter().skip(d).step_by(digits).map(|&c| c as usize).sum::<usize>() == n) {
            continue;
        }
        let mut sum = 0u32;
        for d in 0..digits {
            for counts in hist.chunks_exact_mut(digits) {
                let x = counts[d];
                counts[d] = sum;
                sum += x;
            }
        }
        let dst = Scatter(tmp.as_mut_ptr());
        v.par_chunks(run).zip(hist.par_chunks_mut(digits)).for_each(|(keys, places)| {
            for &e in keys {
                let d = ((e >> shift) & mask) as usize;
                // SAFETY: this run writes its keys of digit d at `places[d]` onward: the places
                // counted above, after the keys of lower digits and of this digit's earlier runs, and
                // before the next run's, so they are below n == tmp.len() and no other run writes
                // them; `tmp` is read only after the for_each, which returns once every run is done.
                unsafe { dst.write(places[d] as usize, e) };
                places[d] += 1;
            }
        });
        std::mem::swap(v, tmp);
    }
}

/// Re-sorts each run of equal prefixes in `v` (the output of `sort_by_prefix`) by `key` of the
/// pool index, which must be unique (so an unstable sort is deterministic; it also does not
/// allocate).
pub(super) fn fix_prefix_runs<K: Ord + Copy>(v: &mut [u64], mut key: impl FnMut(usize) -> K) {
    // Each element's key once, not once per comparison (a key may hash, or read the pool at random).
    let mut keyed: Vec<(K, u64)> = Vec::new();
    let mut start = 0;
    for k in 1..=v.len() {
        if k == v.len() || v[k] >> 32 != v[start] >> 32 {
            if k - start > 1 {
                keyed.clear();
                keyed.extend(v[start..k].iter().map(|&e| (key(e as u32 as usize), e)));
                keyed.sort_unstable_by_key(|&(key, _)| key);
                for (e, &(_, sorted)) in v[start..k].iter_mut().zip(&keyed) {
                    *e = sorted;
                }
            }
            start = k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_key_orders_like_the_values() {
        let mut xs = vec![0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-320, -1e-320, f64::MAX, f64::MIN, 1e300, -1e300];
        xs.extend([f64::INFINITY, f64::NEG_INFINITY, f64::MIN_POSITIVE, -f64::MIN_POSITIVE]);
        let mut z = 5u64;
        for _ in 0..500 {
            z = mix(z);
            xs.push(f64::from_bits(z >> 1) * if z & 1 == 0 { 1.0 } else { -1.0 });
        }
        xs.retain(|x| !x.is_nan());
        for &a in &xs {
            for &b in &xs {
                assert_eq!(order_key(a).cmp(&order_key(b)), a.partial_cmp(&b).unwrap(), "a={a:e} b={b:e}");
                assert_eq!(from_order_key(order_key(a)), a + 0.0);
            }
        }
        // Both zeros sort together.
        assert_eq!(order_key(0.0), order_key(-0.0));
    }

    #[test]
    fn mix_spreads_consecutive_inputs() {
        // Seeds and pool indices are small consecutive numbers: their hashes must not collide or
        // keep their order, or tie-breaks would follow the pool order.
        let hashes: Vec<u64> = (0..10_000u64).map(mix).collect();
        let mut distinct = hashes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), hashes.len());
        let ascending = hashes.windows(2).filter(|w| w[0] < w[1]).count();
        assert!((4_000..6_000).contains(&ascending), "{ascending} of 9999 steps ascend");
        assert_eq!(mix(0), 0xE220_A839_7B1D_CDAF, "SplitMix64 of 0, as in docs/engine.md");
    }

    /// `n` sort keys of `bits` random low bits (all equal when 0) under a common top nibble.
    fn test_keys(n: usize, bits: u32, z: &mut u64) -> Vec<u64> {
        (0..n)
            .map(|_| {
                *z = mix(*z);
                if bits == 0 {
                    5
                } else {
                    (*z >> (64 - bits)) | 0xF000_0000_0000_0000
                }
            })
            .collect()
    }

    #[test]
    fn sort_by_prefix_orders_by_key_then_index() {
        let mut z = 3u64;
        // 300k keys: above the size where digits narrow.
        for (n, bits) in [(1000usize, 64u32), (1000, 20), (5000, 40), (300, 0), (300_000, 64)] {
            let keys = test_keys(n, bits, &mut z);
            let (mut v, mut tmp, mut hist) = (keys.clone(), Vec::new(), Vec::new());
            let index: Vec<u32> = (0..n as u32).collect();
            sort_by_prefix(&mut v, |j| index[j], &mut tmp, &mut hist, None);
            fix_prefix_runs(&mut v, |i| (keys[i], i));
            let mut want: Vec<usize> = (0..n).collect();
            want.sort_by_key(|&i| (keys[i], i));
            let got: Vec<usize> = v.iter().map(|&e| e as u32 as usize).collect();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn sort_by_prefix_on_threads_gives_the_same_order() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let mut threads = Threads::new(std::sync::Arc::new(pool));
        threads.min_live = 0;
        let mut z = 11u64;
        for (n, bits) in [(1000usize, 64u32), (1000, 20), (7, 40), (300, 0), (300_000, 64), (300_001, 12)] {
            let keys = test_keys(n, bits, &mut z);
            let index: Vec<u32> = (0..n as u32).map(|j| j ^ 0x55).collect();
            let (mut alone, mut spread) = (keys.clone(), keys);
            sort_by_prefix(&mut alone, |j| index[j], &mut Vec::new(), &mut Vec::new(), None);
            sort_by_prefix(&mut spread, |j| index[j], &mut Vec::new(), &mut Vec::new(), Some(&threads));
            assert_eq!(spread, alone, "{n} keys of {bits} bits");
        }
    }

    #[test]
    fn sort_by_prefix_carries_the_given_index() {
        // The seed order sorts keys of skill positions: the low half is `index(j)`, not `j`.
        let keys = vec![30u64, 10, 20];
        let (mut v, mut tmp, mut hist) = (keys, Vec::new(), Vec::new());
        sort_by_prefix(&mut v, |j| [7, 8, 9][j], &mut tmp, &mut hist, None);
        let got: Vec<u32> = v.iter().map(|&e| e as u32).collect();
        assert_eq!(got, [8, 9, 7]);
    }
}
