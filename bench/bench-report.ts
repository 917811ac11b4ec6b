// What the benchmark scripts share: settings from the environment, CPU time of processes and of the whole
// machine (Linux /proc), the machine's description, the build's fingerprint, and Markdown tables.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';

/** A non-negative number from the environment, or `fallback` when unset. */
export function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got "${raw}"`);
  return n;
}

let clockTicks = 100;
try {
  clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  /* keep 100 */
}

/** utime + stime of a process (all its threads), or of its main thread only, seconds; undefined off Linux. */
export function processCpuSecs(pid: number | undefined, mainThreadOnly = false): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(mainThreadOnly ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / clockTicks;
  } catch {
    return undefined;
  }
}

/** Busy CPU time of the whole machine (all cores, every process), seconds; undefined off Linux. */
export function machineBusySecs(): number | undefined {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...
    const busy = fields.reduce((a, b) => a + b, 0) - (fields[3] ?? 0) - (fields[4] ?? 0);
    return busy / clockTicks;
  } catch {
    return undefined;
  }
}

export function machine(): Record<string, string> {
  let model = cpus()[0]?.model ?? 'unknown';
  try {
    model = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? model;
  } catch {
    /* keep os.cpus() */
  }
  return {
    cpus: String(cpus().length),
    model,
    memory: `${(totalmem() / 2 ** 30).toFixed(1)} GiB`,
    node: process.version,
    loadavg: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
  };
}

/** A short hash of the built service (`<root>/dist/src/**.js`), to tell runs against different code apart. */
export function buildFingerprint(root: string): string {
  const hash = createHash('sha256');
  const dir = join(root, 'dist/src');
  try {
    const files = (readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith('.js')).sort();
    for (const f of files) hash.update(f).update(readFileSync(join(dir, f)));
    return `${hash.digest('hex').slice(0, 12)} (${files.length} files)`;
  } catch {
    return 'unknown';
  }
}

export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(headers), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
