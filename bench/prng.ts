// One seeded PRNG for the benchmarks and the tests that use their generators, so a pool or a load is the
// same from run to run. Its own module: the load generator must not load the engine (pool-generator.ts does).

/** Small, fast, seeded PRNG (mulberry32): uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
