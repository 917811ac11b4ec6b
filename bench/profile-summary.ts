// Summarizes a V8 .cpuprofile (from `node --cpu-prof`, e.g. BENCH_CPU_PROF=dir npm run bench): self time
// by function and by package/area, so "where does the time go" has a quick answer without DevTools.
//
//   node dist/bench/profile-summary.js FILE.cpuprofile [--top 30]
//   node dist/bench/profile-summary.js FILE.cpuprofile --runs 'queue/tick\.js|tick-runner\.js|pool-columns\.js'
//   node dist/bench/profile-summary.js FILE.cpuprofile --from-s 4.9 --to-s 11.2
//
// --runs: the longest runs of consecutive samples whose stack holds a frame from a script matching the pattern
// (a garbage-collector sample continues a run it falls in). A run is main-thread work nothing else interleaved
// with, so for the tick's scripts it bounds how long the tick's host side held the event loop at a stretch
// (issue 21, part 4), up to the sampling interval. --from-s/--to-s: only the samples taken that many seconds
// after the profile's start (a phase of a run: a restart's replay between two of its log lines).
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Which part of the stack a frame belongs to. */
export function areaOf(url: string, fn: string): string {
  if (url === '') return fn.startsWith('(') ? fn : '(native/builtin)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1]!;
  if (url.startsWith('node:'))
    return url
      .replace(/^node:(internal\/)?/, 'node:')
      .split('/')
      .slice(0, 2)
      .join('/');
  const src = /\/dist\/(src|bench)\/(.*)$/.exec(url);
  if (src) return `${src[1]}/${src[2]}`;
  return url;
}

export function summarize(profile: Profile, top = 30): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = profile.endTime - profile.startTime;
  const byFn = new Map<string, number>();
  const byArea = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const n = byId.get(id)!;
    const { functionName, url, lineNumber } = n.callFrame;
    const short = url.replace(/^.*\/(node_modules|dist)\//, '$1/');
    const fnKey = `${functionName || '(anonymous)'} ${short}${url ? `:${lineNumber + 1}` : ''}`;
    byFn.set(fnKey, (byFn.get(fnKey) ?? 0) + us);
    const area = areaOf(url, functionName);
    byArea.set(area, (byArea.get(area) ?? 0) + us);
  }
  // Inclusive ("total") time: each sample counts once for every distinct function on its stack.
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const keyOf = (n: ProfileNode) => {
    const { functionName, url, lineNumber } = n.callFrame;
    return `${functionName || '(anonymous)'} ${url.replace(/^.*\/(node_modules|dist)\//, '$1/')}${url ? `:${lineNumber + 1}` : ''}`;
  };
  const inclusive = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const n = byId.get(cur)!;
      if (n.callFrame.url === '' && n.callFrame.functionName.startsWith('(')) continue; // (root), (program), ...
      seen.add(keyOf(n));
    }
    for (const k of seen) inclusive.set(k, (inclusive.get(k) ?? 0) + us);
  }
  const fmt = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => `${((us / total) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`)
      .join('\n');
  return [
    `profile: ${(total / 1e6).toFixed(1)} s of main-thread wall time`,
    '',
    'self time by area:',
    fmt(byArea),
    '',
    'self time by function:',
    fmt(byFn),
    '',
    'total time (self + callees) by function:',
    fmt(inclusive),
  ].join('\n');
}

interface Run {
  atS: number;
  ms: number;
  gcMs: number;
  selfMs: Map<string, number>;
}

/** The runs of consecutive samples in scripts matching `pattern` (module comment), longest first. */
export function longestRuns(profile: Profile, pattern: RegExp, top = 10): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const kinds = new Map<number, 'in' | 'gc' | 'out'>();
  const kindOf = (id: number) => {
    let kind = kinds.get(id);
    if (kind) return kind;
    kind = byId.get(id)!.callFrame.functionName === '(garbage collector)' ? 'gc' : 'out';
    for (let cur: number | undefined = id; kind === 'out' && cur !== undefined; cur = parent.get(cur)) {
      if (pattern.test(byId.get(cur)!.callFrame.url)) kind = 'in';
    }
    kinds.set(id, kind);
    return kind;
  };
  const runs: Run[] = [];
  let run: Run | undefined;
  let us = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    us += profile.timeDeltas[i] ?? 0;
    // A sample's time is the gap to the next one.
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const id = profile.samples[i]!;
    const kind = kindOf(id);
    if (kind === 'out' || (kind === 'gc' && !run)) {
      if (run) runs.push(run);
      run = undefined;
      continue;
    }
    run ??= { atS: us / 1e6, ms: 0, gcMs: 0, selfMs: new Map() };
    run.ms += ms;
    if (kind === 'gc') run.gcMs += ms;
    else {
      const { functionName, url } = byId.get(id)!.callFrame;
      const key = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(node_modules|dist)\//, '$1/')}`;
      run.selfMs.set(key, (run.selfMs.get(key) ?? 0) + ms);
    }
  }
  if (run) runs.push(run);
  runs.sort((a, b) => b.ms - a.ms);
  const over = (ms: number) => runs.filter((r) => r.ms > ms).length;
  const overWithoutGc = (ms: number) => runs.filter((r) => r.ms - r.gcMs > ms).length;
  const lines = [
    `runs in /${pattern.source}/: ${runs.length}, ${runs.reduce((s, r) => s + r.ms, 0).toFixed(0)} ms in all; over 20 ms: ${over(20)} (${overWithoutGc(20)} without their GC), over 10 ms: ${over(10)} (${overWithoutGc(10)})`,
  ];
  for (const r of runs.slice(0, top)) {
    const fns = [...r.selfMs].sort((a, b) => b[1] - a[1]).slice(0, 4);
    lines.push(
      `${r.ms.toFixed(1).padStart(7)} ms (GC ${r.gcMs.toFixed(1)}) at ${r.atS.toFixed(2)} s: ${fns.map(([k, ms]) => `${k} ${ms.toFixed(1)}`).join(', ')}`,
    );
  }
  return lines.join('\n');
}

/** The profile's samples taken from `fromS` to `toS` seconds after its start, as a profile of its own. */
export function window(profile: Profile, fromS: number, toS: number): Profile {
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  let us = 0;
  let firstUs: number | undefined;
  for (let i = 0; i < profile.samples.length; i++) {
    us += profile.timeDeltas[i] ?? 0;
    if (us < fromS * 1e6 || us > toS * 1e6) continue;
    firstUs ??= us;
    samples.push(profile.samples[i]!);
    timeDeltas.push(samples.length === 1 ? 0 : (profile.timeDeltas[i] ?? 0));
  }
  const startTime = profile.startTime + (firstUs ?? 0);
  return { ...profile, samples, timeDeltas, startTime, endTime: startTime + timeDeltas.reduce((a, b) => a + b, 0) };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string' }, runs: { type: 'string' }, 'from-s': { type: 'string' }, 'to-s': { type: 'string' } },
  });
  if (positionals.length === 0) {
    console.error('usage: profile-summary FILE.cpuprofile [--top N] [--runs PATTERN] [--from-s S] [--to-s S]');
    process.exit(2);
  }
  for (const file of positionals) {
    console.log(`== ${file}`);
    const whole = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const profile = window(whole, Number(values['from-s'] ?? 0), Number(values['to-s'] ?? Number.POSITIVE_INFINITY));
    const top = Number(values.top ?? (values.runs ? 10 : 30));
    console.log(values.runs ? longestRuns(profile, new RegExp(values.runs), top) : summarize(profile, top));
  }
}
