// Native engine vs the TypeScript reference engine, on the same seeded pools (bench/pool-generator.ts):
// 2x5, parties 1..5, 3 filters, 8 hosts. Prints ms per tick for each and the speed ratio, and checks on
// the way that both produced the same output.
//
//   npx tsc -p tsconfig.build.json && node dist/bench/engine-reference.js [--sizes 10000,100000] [--million]
//
// --million adds a 1M-ticket pool for the native engine only. Iteration counts are small on purpose (the
// machine is shared); the first tick of each engine is a warm-up and is not counted. Median ms per tick.
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { TickEngine, type MatchArrays, type PoolArrays, type QueueParams } from '../src/engine/native.js';
import { referenceTick } from '../test/support/reference-engine/reference-engine.js';
import { generatePool, generatedQueueParams, matchArrays } from './pool-generator.js';

export interface EngineBenchRow {
  tickets: number;
  matches: number;
  /** Median and fastest ms per tick. */
  nativeMs: { median: number; min: number; samples: number };
  referenceMs: { median: number; min: number; samples: number } | undefined;
  /** Median reference / median native. */
  ratio: number | undefined;
  identical: boolean | undefined;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const summary = (xs: number[]) => ({ median: median(xs), min: Math.min(...xs), samples: xs.length });

async function timeOne(tick: () => Promise<number> | number): Promise<{ ms: number; matches: number }> {
  const start = performance.now();
  const matches = await tick();
  return { ms: performance.now() - start, matches };
}

/** Same count and same bytes in every output array up to that count. */
function sameOutput(a: MatchArrays, b: MatchArrays, count: number, filters: number): boolean {
  const tickets = a.matchOffsets[count]!;
  const eq = <T extends ArrayLike<number | bigint>>(x: T, y: T, len: number) => {
    for (let i = 0; i < len; i++) if (x[i] !== y[i]) return false;
    return true;
  };
  return (
    eq(a.matchRuleset, b.matchRuleset, count) &&
    eq(a.matchOffsets, b.matchOffsets, count + 1) &&
    eq(a.matchTickets, b.matchTickets, tickets) &&
    eq(a.ticketTeam, b.ticketTeam, tickets) &&
    eq(a.matchPreferredHost, b.matchPreferredHost, count) &&
    eq(a.matchAcceptableHosts, b.matchAcceptableHosts, count) &&
    eq(a.matchAccepts, b.matchAccepts, count * filters)
  );
}

/**
 * For each size: one warm-up tick per engine, then rounds of (several native ticks, one reference tick),
 * interleaved so that load from other processes hits both engines alike. Medians are reported.
 */
export async function runEngineReferenceBench(sizes: number[], million: boolean): Promise<EngineBenchRow[]> {
  const params: QueueParams = generatedQueueParams();
  const rows: EngineBenchRow[] = [];
  const cases = sizes.map((n) => ({ n, reference: true }));
  if (million) cases.push({ n: 1_000_000, reference: false });
  for (const { n, reference } of cases) {
    const { columns, nowMs } = generatePool({ tickets: n, seed: n });
    const pool: PoolArrays = columns;
    const seed = 42;
    const engine = new TickEngine(params);
    const nativeOut = matchArrays(n, pool.filterCount);
    const refOut = matchArrays(n, pool.filterCount);
    const nativeTick = () => engine.run(pool, nativeOut, nowMs, seed);
    const referenceTick_ = () => referenceTick(pool, params, refOut, nowMs, seed);
    const rounds = n >= 1_000_000 ? 3 : n >= 100_000 ? 3 : 5;
    const nativePerRound = n >= 1_000_000 ? 1 : 3;

    const { matches } = await timeOne(nativeTick); // warm-up
    let refMatches: number | undefined;
    if (reference) refMatches = (await timeOne(referenceTick_)).matches;
    const nativeSamples: number[] = [];
    const refSamples: number[] = [];
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < nativePerRound; k++) nativeSamples.push((await timeOne(nativeTick)).ms);
      if (reference) refSamples.push((await timeOne(referenceTick_)).ms);
    }
    const nativeMs = summary(nativeSamples);
    const referenceMs = reference ? summary(refSamples) : undefined;
    const row: EngineBenchRow = {
      tickets: n,
      matches,
      nativeMs,
      referenceMs,
      ratio: referenceMs && referenceMs.median / nativeMs.median,
      identical: reference ? refMatches === matches && sameOutput(nativeOut, refOut, matches, pool.filterCount) : undefined,
    };
    rows.push(row);
    const f = (x: number | undefined, d = 1) => (x === undefined ? '-' : x.toFixed(d));
    console.log(
      `${String(n).padStart(9)} tickets ${String(matches).padStart(7)} matches | native ${f(nativeMs.median).padStart(8)} ms/tick ` +
        `(min ${f(nativeMs.min)}, n=${nativeMs.samples}) | reference ${f(referenceMs?.median).padStart(8)} ms/tick ` +
        `(min ${f(referenceMs?.min)}, n=${referenceMs?.samples ?? 0}) | ratio ${f(row.ratio).padStart(5)}x` +
        (row.identical === undefined ? '' : row.identical ? ' | identical output' : ' | OUTPUT DIFFERS'),
    );
  }
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: { sizes: { type: 'string', default: '10000,100000' }, million: { type: 'boolean', default: false } },
  });
  const sizes = values.sizes.split(',').map((s) => Number.parseInt(s, 10));
  console.log('engine tick: 2x5 (require_host, 2 relaxation steps), parties 1..5, 3 filters, 8 hosts');
  const rows = await runEngineReferenceBench(sizes, values.million);
  if (rows.some((r) => r.identical === false)) process.exitCode = 1;
}
