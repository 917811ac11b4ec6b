// gRPC CreateTicket load generator, usable as a module (runLoad) and as a CLI:
//
//   node dist/bench/create-ticket-load.js --target 127.0.0.1:9001 --queue eu.ranked \
//        --mode closed --concurrency 64 --connections 4 --duration-secs 10
//   node dist/bench/create-ticket-load.js --target 127.0.0.1:9001 --queue eu.ranked \
//        --mode fixed --rate 3000 --connections 4 --duration-secs 10
//
// closed: `concurrency` requests always in flight, spread round-robin over `connections` channels (each
//         its own Client with a local subchannel pool and distinct channel args, so each opens its own TCP
//         connection). Latency is measured from the actual send.
// fixed:  open loop. Request k is due at start + k / rate; latency is measured from that *scheduled* time,
//         so a stalled server (or client) shows up in the percentiles instead of silently lowering the send
//         rate (no coordinated omission). At most `maxInFlight` requests are outstanding: a due request
//         that finds the cap reached waits in a client-side backlog (its latency still counts from its
//         scheduled time); backlog left at the end is reported as `unsent`.
//
// Requests whose (scheduled) start falls in the warm-up period are sent but not counted. Every request
// carries a fresh UUID ticket id; engine_input comes from a pool of pre-encoded realistic inputs (party of
// 1..5 players, mmr, latencies to a few hosts, the eu.ranked attribute filters), so the client spends its
// CPU on gRPC, not on building fixtures.
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { create, toBinary } from '@bufbuild/protobuf';
import { credentials, makeGenericClientConstructor, Metadata, status, type Client, type ServiceError } from '@grpc/grpc-js';
import { grpcServiceDefinition, MatchmakerService } from '../src/api/grpc-definitions.js';
import {
  CreateTicketRequestSchema,
  type CreateTicketRequest,
  type CreateTicketResponse,
} from '../src/gen/matchmaker/core/v1/service_pb.js';
import { EngineInputSchema } from '../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { grownColumn } from '../src/engine/growable-column.js';
// A seeded PRNG, so the input pool is the same from run to run.
import { prng } from './prng.js';

export type LoadMode = 'closed' | 'fixed';

export interface LoadOptions {
  /** host:port of the gRPC server. */
  target: string;
  queueId: string;
  /** Several queues: requests go to each in turn (queueId is then only the label). */
  queueIds?: readonly string[];
  mode: LoadMode;
  /** closed: requests in flight. */
  concurrency: number;
  /** Separate channels (TCP connections). */
  connections: number;
  durationSecs: number;
  /** Sent but not counted. */
  warmupSecs: number;
  /** fixed: requests per second. */
  rate: number;
  /** fixed: cap on outstanding requests. */
  maxInFlight: number;
  /** Per-call deadline. */
  deadlineMs: number;
  /** Size of the pool of pre-encoded engine inputs. */
  inputPool: number;
  /**
   * realistic: latencies 10..120 ms, so the real service's ticks match a good part of the tickets (and the
   * run includes that work). unmatchable: every latency 200..300 ms, above eu.ranked's max_latency_ms even
   * after relaxation, so no ticket is ever matched: CreateTicket alone.
   */
  inputs: 'realistic' | 'unmatchable';
}

export const DEFAULT_OPTIONS: LoadOptions = {
  target: '127.0.0.1:9001',
  queueId: 'eu.ranked',
  mode: 'closed',
  concurrency: 64,
  connections: 4,
  durationSecs: 10,
  warmupSecs: 2,
  rate: 3000,
  maxInFlight: 512,
  deadlineMs: 10_000,
  inputPool: 4096,
  inputs: 'realistic',
};

export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

export interface LoadResult {
  options: LoadOptions;
  /** Length of the measured window, seconds. */
  measuredSecs: number;
  /** Requests sent in the measured window. */
  sent: number;
  ok: number;
  /** By gRPC status name; BAD_RESPONSE when the answer's ticket id is not the one sent. */
  errors: Record<string, number>;
  /** ok responses that arrived within the measured window, per second (whenever they were sent). */
  throughput: number;
  /** Of ok responses, ms. */
  latencyMs: LatencySummary;
  /** fixed mode: due requests that were never sent (backlog at the end). */
  unsent: number;
  /** fixed mode: largest client-side backlog seen (requests due but held back by the in-flight cap). */
  maxBacklog: number;
  /** fixed mode: how far the send loop ran behind schedule at worst, ms. */
  maxScheduleLagMs: number;
  /** Requests still outstanding when the drain timeout ended (counted as errors: DRAIN_TIMEOUT). */
  abandoned: number;
  /** Client process CPU over the measured window, as a fraction of one core. */
  clientCpu: number;
  /** The client's own event-loop delay over the measured window, ms: client stalls inflate every latency. */
  clientLoopDelayMs: { p99: number; max: number };
}

// ---------------------------------------------------------------------------------------------------------
// Requests

const HOSTS = ['eu-west', 'eu-central', 'eu-north', 'eu-south'];
const LANGUAGES = ['en', 'de', 'fr', 'es', 'pl'];

/** One realistic serialized EngineInput: a party of 1..5 players with mmr and latencies to 2..4 hosts. */
export function realisticEngineInput(rand: () => number = Math.random, unmatchable = false): Uint8Array {
  const partySize = 1 + Math.floor(rand() * 5);
  const baseMmr = 1 + rand() * 3;
  const hostCount = 2 + Math.floor(rand() * 3);
  const language = LANGUAGES[Math.floor(rand() * LANGUAGES.length)]!;
  const players = Array.from({ length: partySize }, () => {
    const latencies: Record<string, number> = {};
    for (const host of HOSTS.slice(0, hostCount))
      latencies[host] = unmatchable ? Math.round(200 + rand() * 100) : Math.round(10 + rand() * 110);
    return { playerId: randomUUID(), mmr: baseMmr + (rand() - 0.5) * 0.4, latencies };
  });
  return toBinary(
    EngineInputSchema,
    create(EngineInputSchema, {
      players,
      attributes: {
        game_mode: { values: ['ranked'], accepts: ['ranked'] },
        language: { values: [language], accepts: [language, 'en'] },
      },
    }),
  );
}

export function engineInputPool(size: number, seed = 42, unmatchable = false): Uint8Array[] {
  const rand = prng(seed);
  return Array.from({ length: Math.max(1, size) }, () => realisticEngineInput(rand, unmatchable));
}

/** The ticket id written into request templates, for the native generator to overwrite (bench/loadgen). */
export const TEMPLATE_ID_PLACEHOLDER = '00000000-0000-4000-8000-000000000000';

export interface TemplateOptions {
  /** Templates for each queue in turn: input 0 for every queue, then input 1, ... */
  queueIds: readonly string[];
  inputs: LoadOptions['inputs'];
  /** Number of templates (one per pooled engine input). */
  inputPool: number;
}

/**
 * The requests of runLoad (same fields, same input pool) as templates for the native load generator
 * (bench/loadgen): u32 LE count, then per template u32 LE byte length, u32 LE offset of the 36-byte ticket
 * id inside the bytes, and the serialized CreateTicketRequest whose id is TEMPLATE_ID_PLACEHOLDER.
 */
export function encodeRequestTemplates(options: TemplateOptions): Buffer {
  const placeholder = Buffer.from(TEMPLATE_ID_PLACEHOLDER, 'ascii');
  const parts: Buffer[] = [];
  const count = Buffer.alloc(4);
  const inputs = engineInputPool(options.inputPool, 42, options.inputs === 'unmatchable');
  count.writeUInt32LE(inputs.length * options.queueIds.length);
  parts.push(count);
  for (const engineInput of inputs)
    for (const queueId of options.queueIds) {
      const bytes = Buffer.from(
        toBinary(
          CreateTicketRequestSchema,
          create(CreateTicketRequestSchema, { ticket: { id: TEMPLATE_ID_PLACEHOLDER, queueId, engineInput } }),
        ),
      );
      const offset = bytes.indexOf(placeholder);
      if (offset < 0 || bytes.indexOf(placeholder, offset + 1) >= 0)
        throw new Error('request template: the id placeholder is not in the encoded request exactly once');
      const header = Buffer.alloc(8);
      header.writeUInt32LE(bytes.length, 0);
      header.writeUInt32LE(offset, 4);
      parts.push(header, bytes);
    }
  return Buffer.concat(parts);
}

/** One CreateTicket of an unmatchable ticket to the service at 127.0.0.1:`grpcPort` (the catch-up benches' seed). */
export async function createOneTicket(grpcPort: number, queueId: string): Promise<void> {
  const [client] = await openClients(`127.0.0.1:${grpcPort}`, 1);
  const [engineInput] = engineInputPool(1, 7, true);
  try {
    await new Promise<void>((res, rej) =>
      client!.createTicket(
        create(CreateTicketRequestSchema, { ticket: { id: randomUUID(), queueId, engineInput: engineInput! } }),
        new Metadata(),
        { deadline: Date.now() + 10_000 },
        (err) => (err ? rej(err) : res()),
      ),
    );
  } finally {
    client!.close();
  }
}

export function writeRequestTemplates(file: string, options: TemplateOptions): void {
  writeFileSync(file, encodeRequestTemplates(options));
}

// ---------------------------------------------------------------------------------------------------------
// Clients

type UnaryCallback = (err: ServiceError | null, res?: CreateTicketResponse) => void;
type MatchmakerClient = Client & {
  createTicket(req: CreateTicketRequest, md: Metadata, opts: { deadline: number }, cb: UnaryCallback): unknown;
};

const ClientCtor = makeGenericClientConstructor(grpcServiceDefinition(MatchmakerService), 'MatchmakerService');

/**
 * `count` clients, each with its own channel: a local subchannel pool and a distinct channel argument, so
 * grpc-js cannot share one subchannel (one TCP connection) between them.
 */
export async function openClients(target: string, count: number, timeoutMs = 10_000): Promise<MatchmakerClient[]> {
  const clients = Array.from(
    { length: count },
    (_, i) =>
      new ClientCtor(target, credentials.createInsecure(), {
        'grpc.use_local_subchannel_pool': 1,
        'bench.channel_index': i,
      }) as unknown as MatchmakerClient,
  );
  await Promise.all(
    clients.map(
      (c) =>
        new Promise<void>((resolve, reject) =>
          c.waitForReady(Date.now() + timeoutMs, (err) =>
            err ? reject(new Error(`cannot connect to ${target}: ${err.message}`)) : resolve(),
          ),
        ),
    ),
  );
  return clients;
}

// ---------------------------------------------------------------------------------------------------------
// Statistics

/** All samples, sorted once at the end: exact percentiles, and cheap at benchmark sizes (<= a few 100k). */
export class LatencyRecorder {
  private samples = new Float64Array(1 << 16);
  private n = 0;

  record(ms: number): void {
    if (this.n === this.samples.length) this.samples = grownColumn(this.samples, Float64Array, this.samples.length * 2);
    this.samples[this.n++] = ms;
  }

  summary(): LatencySummary {
    const sorted = this.samples.slice(0, this.n).sort();
    const n = sorted.length;
    // Nearest rank: the smallest sample with at least p of the samples at or below it.
    const at = (p: number) => (n === 0 ? NaN : sorted[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]!);
    let sum = 0;
    for (let i = 0; i < n; i++) sum += sorted[i]!;
    return {
      count: n,
      p50: at(0.5),
      p90: at(0.9),
      p99: at(0.99),
      p999: at(0.999),
      max: n === 0 ? NaN : sorted[n - 1]!,
      mean: n === 0 ? NaN : sum / n,
    };
  }
}

// ---------------------------------------------------------------------------------------------------------
// The run

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Called when the measured window opens and closes (e.g. to sample the server's CPU over the same window). */
export interface LoadHooks {
  onMeasureStart?(): void;
  onMeasureEnd?(): void;
}

export async function runLoad(partial: Partial<LoadOptions>, hooks: LoadHooks = {}): Promise<LoadResult> {
  const options: LoadOptions = { ...DEFAULT_OPTIONS, ...partial };
  if (options.connections < 1) throw new Error('connections must be >= 1');
  if (options.mode === 'closed' && options.concurrency < 1) throw new Error('concurrency must be >= 1');
  if (options.mode === 'fixed' && !(options.rate > 0)) throw new Error('rate must be > 0');

  const clients = await openClients(options.target, options.connections);
  const inputs = engineInputPool(options.inputPool, 42, options.inputs === 'unmatchable');
  const recorder = new LatencyRecorder();
  const errors: Record<string, number> = {};
  let sent = 0;
  let ok = 0;
  let okInWindow = 0;
  let inFlight = 0;
  let finished = false;
  let nextClient = 0;
  let nextInput = 0;
  const queueIds = options.queueIds ?? [options.queueId];

  const t0 = performance.now();
  const measureFrom = t0 + options.warmupSecs * 1000;
  const measureTo = measureFrom + options.durationSecs * 1000;
  let cpuAtStart: NodeJS.CpuUsage | undefined;
  let cpuAtEnd: NodeJS.CpuUsage | undefined;
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  const cpuMarks = [
    setTimeout(
      () => {
        cpuAtStart = process.cpuUsage();
        loopDelay.enable();
        hooks.onMeasureStart?.();
      },
      Math.max(0, measureFrom - performance.now()),
    ),
    setTimeout(
      () => {
        cpuAtEnd = process.cpuUsage();
        loopDelay.disable();
        hooks.onMeasureEnd?.();
      },
      Math.max(0, measureTo - performance.now()),
    ),
  ];

  const addError = (name: string) => (errors[name] = (errors[name] ?? 0) + 1);

  /** Sends one CreateTicket; `startedAt` is when it counts from (actual send or scheduled time). */
  const send = (startedAt: number): Promise<void> => {
    const measured = startedAt >= measureFrom && startedAt < measureTo;
    const id = randomUUID();
    const request = create(CreateTicketRequestSchema, {
      ticket: { id, queueId: queueIds[nextInput % queueIds.length]!, engineInput: inputs[nextInput++ % inputs.length]! },
    });
    const client = clients[nextClient++ % clients.length]!;
    if (measured) sent++;
    inFlight++;
    return new Promise<void>((resolve) => {
      client.createTicket(request, new Metadata(), { deadline: Date.now() + options.deadlineMs }, (err, res) => {
        inFlight--;
        if (finished) return resolve(); // answered after the run was summed up (drain timeout): not counted again
        const now = performance.now();
        if (!err && res?.ticketId === id && now >= measureFrom && now < measureTo) okInWindow++;
        if (measured) {
          if (err) addError(status[err.code] ?? `CODE_${err.code}`);
          else if (res?.ticketId !== id) addError('BAD_RESPONSE');
          else {
            ok++;
            recorder.record(now - startedAt);
          }
        }
        resolve();
      });
    });
  };

  let unsent = 0;
  let maxBacklog = 0;
  let maxScheduleLagMs = 0;

  if (options.mode === 'closed') {
    const worker = async () => {
      while (performance.now() < measureTo) await send(performance.now());
    };
    await Promise.all(Array.from({ length: options.concurrency }, worker));
  } else {
    const intervalMs = 1000 / options.rate;
    const total = Math.floor(((measureTo - t0) / 1000) * options.rate);
    let k = 0; // next request to schedule
    const backlog: number[] = []; // scheduled times of due requests held back by the cap
    let backlogHead = 0;
    const outstanding = new Set<Promise<void>>();
    let draining = true;
    const launch = (scheduledAt: number) => {
      const p = send(scheduledAt).then(() => {
        outstanding.delete(p);
        // A slot is free: the oldest held-back request goes now (unless the drain has timed out).
        if (draining && backlogHead < backlog.length) launch(backlog[backlogHead++]!);
      });
      outstanding.add(p);
    };
    while (k < total) {
      const now = performance.now();
      while (k < total && t0 + k * intervalMs <= now) {
        const scheduledAt = t0 + k * intervalMs;
        maxScheduleLagMs = Math.max(maxScheduleLagMs, now - scheduledAt);
        if (inFlight < options.maxInFlight && backlogHead === backlog.length) launch(scheduledAt);
        else backlog.push(scheduledAt);
        k++;
      }
      maxBacklog = Math.max(maxBacklog, backlog.length - backlogHead);
      if (backlogHead > 4096 && backlogHead * 2 > backlog.length) {
        backlog.splice(0, backlogHead);
        backlogHead = 0;
      }
      if (k < total) await sleep(Math.max(0, Math.min(1, t0 + k * intervalMs - performance.now())));
    }
    // Let the held-back requests go out (they finish the run) until measureTo + deadline at the latest.
    const drainUntil = performance.now() + options.deadlineMs;
    while ((outstanding.size > 0 || backlogHead < backlog.length) && performance.now() < drainUntil) {
      await Promise.race([...outstanding, sleep(50)]);
    }
    draining = false;
    for (let i = backlogHead; i < backlog.length; i++) {
      const s = backlog[i]!;
      if (s >= measureFrom && s < measureTo) unsent++;
    }
  }

  finished = true;
  const abandoned = inFlight;
  if (abandoned > 0) errors.DRAIN_TIMEOUT = abandoned;
  for (const t of cpuMarks) clearTimeout(t);
  const cpuEnd = cpuAtEnd ?? process.cpuUsage();
  const cpuStart = cpuAtStart ?? cpuEnd;
  const measuredSecs = options.durationSecs;
  const clientCpu = (cpuEnd.user - cpuStart.user + cpuEnd.system - cpuStart.system) / 1e6 / measuredSecs;
  for (const c of clients) c.close();
  loopDelay.disable();
  const clientLoopDelayMs =
    loopDelay.count > 0 ? { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 } : { p99: NaN, max: NaN };

  return {
    options,
    measuredSecs,
    sent,
    ok,
    errors,
    throughput: okInWindow / measuredSecs,
    latencyMs: recorder.summary(),
    unsent,
    maxBacklog,
    maxScheduleLagMs,
    abandoned,
    clientCpu,
    clientLoopDelayMs,
  };
}

export function formatResult(label: string, r: LoadResult): string {
  const l = r.latencyMs;
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
  const errs = Object.entries(r.errors);
  const o = r.options;
  const shape =
    (o.mode === 'closed' ? `closed, ${o.concurrency} in flight` : `fixed ${o.rate}/s, cap ${o.maxInFlight} in flight`) +
    (o.inputs === 'unmatchable' ? ', unmatchable inputs' : '');
  return [
    `${label}: ${shape}, ${o.connections} connections, ${o.durationSecs}s measured after ${o.warmupSecs}s warm-up, queue ${o.queueId} @ ${o.target}`,
    `  sent ${r.sent}  ok ${r.ok}  errors ${errs.length === 0 ? 0 : errs.map(([k, v]) => `${k}=${v}`).join(' ')}` +
      (o.mode === 'fixed' ? `  unsent ${r.unsent}  max backlog ${r.maxBacklog}  max send lag ${f(r.maxScheduleLagMs)} ms` : ''),
    `  throughput ${r.throughput.toFixed(0)} ok/s   client cpu ${(r.clientCpu * 100).toFixed(0)}% of a core, client event-loop delay p99 ${f(r.clientLoopDelayMs.p99)} ms max ${f(r.clientLoopDelayMs.max)} ms`,
    `  latency ms  p50 ${f(l.p50)}  p90 ${f(l.p90)}  p99 ${f(l.p99)}  p99.9 ${f(l.p999)}  max ${f(l.max)}  mean ${f(l.mean)}`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------------------
// CLI

async function cli(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      target: { type: 'string' },
      queue: { type: 'string' },
      mode: { type: 'string' },
      concurrency: { type: 'string' },
      connections: { type: 'string' },
      'duration-secs': { type: 'string' },
      'warmup-secs': { type: 'string' },
      rate: { type: 'string' },
      'max-in-flight': { type: 'string' },
      'deadline-ms': { type: 'string' },
      'input-pool': { type: 'string' },
      inputs: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(`usage: create-ticket-load --target HOST:PORT [--queue ID] [--mode closed|fixed] [--concurrency N]
       [--connections N] [--duration-secs S] [--warmup-secs S] [--rate R] [--max-in-flight N]
       [--deadline-ms MS] [--input-pool N] [--inputs realistic|unmatchable] [--json]
defaults: ${JSON.stringify(DEFAULT_OPTIONS)}`);
    return 0;
  }
  const num = (v: string | undefined, name: string): number | undefined => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got "${v}"`);
    return n;
  };
  const mode = values.mode ?? 'closed';
  if (mode !== 'closed' && mode !== 'fixed') throw new Error(`--mode must be closed or fixed, got "${mode}"`);
  const partial: Partial<LoadOptions> = { mode };
  const set = <K extends keyof LoadOptions>(k: K, v: LoadOptions[K] | undefined) => {
    if (v !== undefined) partial[k] = v;
  };
  set('target', values.target);
  set('queueId', values.queue);
  set('concurrency', num(values.concurrency, 'concurrency'));
  set('connections', num(values.connections, 'connections'));
  set('durationSecs', num(values['duration-secs'], 'duration-secs'));
  set('warmupSecs', num(values['warmup-secs'], 'warmup-secs'));
  set('rate', num(values.rate, 'rate'));
  set('maxInFlight', num(values['max-in-flight'], 'max-in-flight'));
  set('deadlineMs', num(values['deadline-ms'], 'deadline-ms'));
  set('inputPool', num(values['input-pool'], 'input-pool'));
  if (values.inputs !== undefined) {
    if (values.inputs !== 'realistic' && values.inputs !== 'unmatchable')
      throw new Error(`--inputs must be realistic or unmatchable, got "${values.inputs}"`);
    partial.inputs = values.inputs;
  }
  const result = await runLoad(partial);
  console.log(values.json ? JSON.stringify(result) : formatResult('CreateTicket', result));
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  cli(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : err);
      process.exit(1);
    },
  );
}
