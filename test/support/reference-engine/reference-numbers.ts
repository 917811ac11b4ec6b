// The reference engine's (reference-engine.ts) numeric helpers: Rust's float comparisons and min/max, and
// the seeded hash of tick/sort.rs, so the port compares exactly what the Rust code compares.

/** SplitMix64 finaliser (tick/sort.rs `mix`), on u64 as bigint. */
export function mix(z: bigint): bigint {
  z = BigInt.asUintN(64, z + 0x9e37_79b9_7f4a_7c15n);
  z = BigInt.asUintN(64, (z ^ (z >> 30n)) * 0xbf58_476d_1ce4_e5b9n);
  z = BigInt.asUintN(64, (z ^ (z >> 27n)) * 0x94d0_49bb_1331_11ebn);
  return z ^ (z >> 31n);
}

/** Three-way comparison of numbers that are never NaN (safe for infinities, unlike `a - b`). */
export function cmp(a: number, b: number): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Rust's f64::min / f64::max: a NaN argument is ignored (Math.min/max would return NaN). */
export function fmin(a: number, b: number): number {
  return Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.min(a, b);
}
export function fmax(a: number, b: number): number {
  return Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.max(a, b);
}

/** Rust's f64::total_cmp restricted to finite numbers: like `a - b`, but -0 sorts before +0. */
export function totalCmp(a: number, b: number): number {
  if (a !== b) return a < b ? -1 : 1;
  if (a === 0) return (Object.is(a, -0) ? 0 : 1) - (Object.is(b, -0) ? 0 : 1);
  return 0;
}

/** max - min of `sums` (tick/balance.rs `range`): team skill sums, or a candidate's skills. */
export function range(sums: readonly number[]): number {
  let lo = Infinity;
  let hi = -Infinity;
  for (const x of sums) {
    lo = fmin(lo, x);
    hi = fmax(hi, x);
  }
  return hi - lo;
}
