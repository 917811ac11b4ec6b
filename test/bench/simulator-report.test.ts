// The simulator's report (bench/simulate.ts, bench/simulator/html-report.ts): the built simulator writes one
// self-contained index.html and an SVG per chart, each chart drawn from the run's data, and --sweep adds a
// wait-against-quality chart with one point per setting. Short simulated runs keep this quick.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../support/browser.js';

const SIMULATE = resolve(import.meta.dirname, '../../dist/bench/simulate.js');
const run = promisify(execFile);

async function simulate(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(process.execPath, [SIMULATE, '--duration-secs', '120', ...args], { maxBuffer: 64 << 20 });
}

interface DataMark {
  type: string;
  /** The drawn items (paths, lines, texts) of the mark; Vega labels each with its datum in aria-label. */
  items: string[];
}

/** The marks Vega drew from data (role-mark), as opposed to axes, legends and titles. */
function dataMarks(svg: string): DataMark[] {
  const marks: DataMark[] = [];
  for (const m of svg.matchAll(/<g class="mark-(\w+) role-mark[^"]*"[^>]*>([\s\S]*?)<\/g>/g)) {
    marks.push({ type: m[1]!, items: [...m[2]!.matchAll(/<(path|text|line)\b[^>]*(?:\/>|>[^<]*<\/\1>)/g)].map((i) => i[0]) });
  }
  return marks;
}

const axisTitles = (svg: string) => [...svg.matchAll(/role-axis-title[^>]*><text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
const items = (svg: string, type: string) => dataMarks(svg).flatMap((m) => (m.type === type ? m.items : []));
const CHARTS = ['wait', 'skill-spread', 'team-imbalance', 'host-latency', 'pool-size', 'segments'];

describe('simulator report', () => {
  let dir: string;
  let html: string;
  let svgs: Record<string, string>;
  let result: {
    engine: { skillSpread: { mean: number }; waitSecs: unknown; matches: number };
    sweep: { key: string; points: { value: number; summary: { skillSpread: { mean: number }; waitSecs: unknown; matches: number } }[] };
    report: string;
  };
  let stderr: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'simulator-report-'));
    const out = await simulate(['--seed', '7', '--report-dir', dir, '--sweep', 'max_skill_spread=1,2,4', '--json']);
    result = JSON.parse(out.stdout);
    stderr = out.stderr;
    html = await readFile(join(dir, 'index.html'), 'utf8');
    svgs = {};
    for (const f of await readdir(dir)) if (f.endsWith('.svg')) svgs[f.replace(/\.svg$/, '')] = await readFile(join(dir, f), 'utf8');
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes index.html and one SVG per chart, and prints where', () => {
    expect(Object.keys(svgs).sort()).toEqual([...CHARTS, 'sweep'].sort());
    expect(result.report).toBe(join(dir, 'index.html'));
    expect(stderr).toContain(`report: ${join(dir, 'index.html')}`);
    // Every chart is inlined, not linked.
    for (const svg of Object.values(svgs)) expect(html).toContain(svg);
  });

  it('is self-contained: no script, no stylesheet link, nothing fetched from anywhere', () => {
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import/i);
    expect(html).not.toMatch(/\b(src|href)\s*=\s*["']?(?!#)/i);
    // CSS and SVG references stay inside the page (clip paths are url(#clipN)).
    expect(html).not.toMatch(/url\(\s*["']?(?!#)/i);
  });

  it('draws every chart from the data of every system, with titled axes', () => {
    for (const name of ['skill-spread', 'team-imbalance', 'host-latency']) {
      const bars = items(svgs[name]!, 'rect');
      expect(bars.filter((b) => b.includes('system: engine')).length, name).toBeGreaterThan(3);
      expect(bars.filter((b) => b.includes('system: naive FCFS')).length, name).toBeGreaterThan(3);
      expect(bars.filter((b) => b.includes('system: latency-aware FCFS')).length, name).toBeGreaterThan(3);
      expect(axisTitles(svgs[name]!)).toContain('share of matches');
      // The bounds drawn as rules.
      expect(items(svgs[name]!, 'rule').length, name).toBeGreaterThan(0);
    }
    // The built-in queue: max_skill_spread 2 relaxed to 3 and 5, mmr_normalization_ref 0.1; imbalance 1; 80 -> 100 -> 140 ms.
    const rules = (name: string) => items(svgs[name]!, 'rule').map((r) => r.match(/aria-label="at: ([\d.]+)"/)?.[1]);
    expect(rules('skill-spread')).toEqual(['0.2', '0.3', '0.5']);
    expect(rules('team-imbalance')).toEqual(['0.1']);
    expect(rules('host-latency')).toEqual(['80', '100', '140']);
    expect(axisTitles(svgs['skill-spread']!)).toContain('skill spread (raw mmr)');
    expect(axisTitles(svgs['host-latency']!)).toContain('worst player latency to the host (ms)');

    for (const name of ['wait', 'pool-size']) {
      const lines = items(svgs[name]!, 'line');
      // The engine and the two baselines.
      expect(lines, name).toHaveLength(3);
      for (const line of lines) expect(line.match(/L/g)?.length ?? 0, name).toBeGreaterThan(100);
    }
    expect(axisTitles(svgs.wait!)).toEqual(['wait (s, log scale)', 'players who waited at most x']);
    expect(axisTitles(svgs['pool-size']!)).toEqual(['simulated time (s)', 'tickets waiting']);

    // The three systems for each of the 15 segments (all have arrivals in 120 s at 50 players/s).
    expect(items(svgs.segments!, 'rect').filter((b) => /role="graphics-symbol"/.test(b)).length).toBe(3 * 15 * 2);
  });

  it('sweep: one point per setting and one per baseline, labelled, in every panel', () => {
    expect(result.sweep.key).toBe('max_skill_spread');
    expect(result.sweep.points.map((p) => p.value)).toEqual([1, 2, 4]);
    const sweep = svgs.sweep!;
    const points = items(sweep, 'symbol');
    // 3 panels x (3 settings + 2 baselines) x (p50, p95).
    expect(points).toHaveLength(3 * 5 * 2);
    expect(points.filter((p) => p.includes('system: naive FCFS'))).toHaveLength(3 * 2);
    expect(points.filter((p) => p.includes('system: latency-aware FCFS'))).toHaveLength(3 * 2);
    const labels = items(sweep, 'text').map((t) => t.replace(/^.*>([^<]*)<\/text>$/, '$1'));
    const count = (label: string) => labels.filter((l) => l === label).length;
    expect(['1', '2', '4', 'FCFS', 'LA-FCFS'].map(count)).toEqual([6, 6, 6, 6, 6]);
    expect(axisTitles(sweep)).toContain('mean skill spread (raw mmr)');
    expect(axisTitles(sweep)).toContain('wait (s, log scale)');
  });

  it('sweep: runs the engine on the same arrivals, so the default setting reproduces the main run', () => {
    const [tight, same, loose] = result.sweep.points.map((p) => p.summary);
    expect(same!.matches).toBe(result.engine.matches);
    expect(same!.waitSecs).toEqual(result.engine.waitSecs);
    expect(same!.skillSpread).toEqual(result.engine.skillSpread);
    expect(tight!.skillSpread.mean).toBeLessThan(same!.skillSpread.mean);
    expect(same!.skillSpread.mean).toBeLessThan(loose!.skillSpread.mean);
  });

  it('opens offline in a browser and shows every chart', async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const requests: string[] = [];
      page.on('request', (r) => requests.push(r.url()));
      await page.route(/^(?!file:)/, (route) => route.abort());
      await page.goto(`file://${join(dir, 'index.html')}`);
      const figures = await page.$$eval('figure', (figs) =>
        figs.map((f) => {
          const box = f.querySelector('svg')!.getBoundingClientRect();
          return { id: f.id, width: box.width, height: box.height, marks: f.querySelectorAll('[role="graphics-symbol"]').length };
        }),
      );
      expect(figures.map((f) => f.id)).toEqual([...CHARTS, 'sweep']);
      for (const f of figures) {
        expect(f.width, f.id).toBeGreaterThan(200);
        expect(f.height, f.id).toBeGreaterThan(100);
        expect(f.marks, f.id).toBeGreaterThan(0);
      }
      expect(requests).toEqual([`file://${join(dir, 'index.html')}`]);
    } finally {
      await browser.close();
    }
  });

  it('a run without --sweep rewrites the report and drops the old sweep chart', async () => {
    const { stdout } = await simulate(['--report-dir', dir]);
    expect(stdout.trimEnd().split('\n').at(-1)).toBe(`report: ${join(dir, 'index.html')}`);
    expect((await readdir(dir)).filter((f) => f.endsWith('.svg')).sort()).toEqual(CHARTS.map((c) => `${c}.svg`).sort());
    expect(await readFile(join(dir, 'index.html'), 'utf8')).not.toContain('Sweep of');
  });

  it('refuses a sweep of an unknown setting', async () => {
    const err = await simulate(['--report-dir', dir, '--sweep', 'ticket_ttl_secs=60,120']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(err).toMatchObject({ code: 2 });
    expect((err as { stderr: string }).stderr).toContain('--sweep must be KEY=v1,v2,... with KEY one of max_skill_spread');
  });
});
