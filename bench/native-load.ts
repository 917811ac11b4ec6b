// The native CreateTicket load generator (bench/loadgen, Rust) behind the same interface as runLoad in
// create-ticket-load.ts: same options, same hooks, same LoadResult.
//
// Why: the Node generator shares the machine's 2 cores with the server and costs ~130-200 us of CPU per
// request, with event-loop stalls of tens of ms, so its percentiles cannot show "p99 < 10 ms". The native
// one speaks raw gRPC over h2 on one thread; the requests are the ones runLoad sends (same fields, same
// input pool), encoded here once as templates (encodeRequestTemplates) and given a fresh ticket id each.
//
// The binary is built on first use, and again when its sources are newer than it:
//   cargo build --release --manifest-path bench/loadgen/Cargo.toml
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import {
  DEFAULT_OPTIONS,
  encodeRequestTemplates,
  type LatencySummary,
  type LoadHooks,
  type LoadOptions,
  type LoadResult,
} from './create-ticket-load.js';

const ROOT = resolve(import.meta.dirname, '../..');
const CRATE = join(ROOT, 'bench/loadgen');
export const LOADGEN_BINARY = join(CRATE, 'target/release/loadgen');

function newestSourceMtime(): number {
  const files = [
    'Cargo.toml',
    'Cargo.lock',
    ...(readdirSync(join(CRATE, 'src'), { recursive: true }) as string[]).map((f) => join('src', f)),
  ];
  return Math.max(...files.map((f) => statSync(join(CRATE, f)).mtimeMs));
}

let built = false;

/** Builds bench/loadgen in release mode if the binary is missing or older than its sources. */
export function ensureLoadgenBuilt(): string {
  if (built) return LOADGEN_BINARY;
  let binaryMtime = -1;
  try {
    binaryMtime = statSync(LOADGEN_BINARY).mtimeMs;
  } catch {
    /* not built yet */
  }
  if (binaryMtime < newestSourceMtime()) {
    console.log('building the native load generator (cargo build --release --manifest-path bench/loadgen/Cargo.toml) ...');
    const out = spawnSync('cargo', ['build', '--release', '--manifest-path', join(CRATE, 'Cargo.toml')], { encoding: 'utf8' });
    if (out.status !== 0) {
      throw new Error(
        `building bench/loadgen failed (${out.error?.message ?? `exit ${out.status}`}):\n${out.stdout ?? ''}${out.stderr ?? ''}`,
      );
    }
  }
  built = true;
  return LOADGEN_BINARY;
}

/** Encoded templates by queue, inputs and pool size: encoding 4096 requests takes a few hundred ms. */
const templateCache = new Map<string, Buffer>();

function requestTemplates(options: LoadOptions): Buffer {
  const queueIds = options.queueIds ?? [options.queueId];
  const key = `${queueIds.join(',')}|${options.inputs}|${options.inputPool}`;
  let templates = templateCache.get(key);
  if (!templates) {
    templates = encodeRequestTemplates({ queueIds, inputs: options.inputs, inputPool: options.inputPool });
    templateCache.set(key, templates);
  }
  return templates;
}

/** JSON has no NaN: the binary writes null for an empty summary. */
const num = (x: unknown): number => (typeof x === 'number' ? x : NaN);

export async function runNativeLoad(partial: Partial<LoadOptions>, hooks: LoadHooks = {}): Promise<LoadResult> {
  const options: LoadOptions = { ...DEFAULT_OPTIONS, ...partial };
  const binary = ensureLoadgenBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'mm-loadgen-'));
  try {
    const requests = join(dir, 'requests.bin');
    writeFileSync(requests, requestTemplates(options));
    const args = [
      '--requests',
      requests,
      '--target',
      options.target,
      '--mode',
      options.mode,
      '--concurrency',
      String(options.concurrency),
      '--connections',
      String(options.connections),
      '--rate',
      String(options.rate),
      '--max-in-flight',
      String(options.maxInFlight),
      '--warmup-secs',
      String(options.warmupSecs),
      '--duration-secs',
      String(options.durationSecs),
      '--deadline-ms',
      String(options.deadlineMs),
    ];
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    const stderr: string[] = [];
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    createInterface({ input: child.stderr }).on('line', (line) => {
      if (line === 'measure-start') hooks.onMeasureStart?.();
      else if (line === 'measure-end') hooks.onMeasureEnd?.();
      else if (stderr.length < 200) stderr.push(line);
    });
    const code = await new Promise<number | null>((res, rej) => {
      child.once('error', rej);
      child.once('close', (c) => res(c));
    });
    if (code !== 0) throw new Error(`native load generator exited with ${code}: ${stderr.join('\n')}`);
    let raw: Record<string, unknown>;
    try {
      raw = JSON.parse(stdout) as Record<string, unknown>;
    } catch {
      throw new Error(`native load generator printed no JSON result: ${stdout.slice(0, 500)}\n${stderr.join('\n')}`);
    }
    const l = raw.latencyMs as Record<string, unknown>;
    const latencyMs: LatencySummary = {
      count: num(l.count),
      p50: num(l.p50),
      p90: num(l.p90),
      p99: num(l.p99),
      p999: num(l.p999),
      max: num(l.max),
      mean: num(l.mean),
    };
    const delay = raw.clientLoopDelayMs as Record<string, unknown>;
    return {
      options,
      measuredSecs: num(raw.measuredSecs),
      sent: num(raw.sent),
      ok: num(raw.ok),
      errors: raw.errors as Record<string, number>,
      throughput: num(raw.throughput),
      latencyMs,
      unsent: num(raw.unsent),
      maxBacklog: num(raw.maxBacklog),
      maxScheduleLagMs: num(raw.maxScheduleLagMs),
      abandoned: num(raw.abandoned),
      clientCpu: num(raw.clientCpu),
      clientLoopDelayMs: { p99: num(delay.p99), max: num(delay.max) },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
