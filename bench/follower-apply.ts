// What applying a queue's replication log costs a replica that only follows (issue 20's A): in this process,
// without NATS, so the figure is the apply alone and steady from run to run, where the replication bench's
// `apply` phase reads it off whole processes sharing the machine with the broker and the load.
//
// A leader queue (a QueueRuntime on a memory store, ticking) takes CreateTickets in bursts, as a replica under
// load does: its request records go out through the replicated mode's RequestBatcher, and every entry, its
// ticks' match commits included, is kept as encoded. Then fresh follower queues apply that log entry by entry
// with the steps ReplicatedHistory.onEntry takes for another replica's entry: decode, apply each record,
// commit the changes to the replica's own memory store, and tell the queue once they are committed.
// Printed: the log's make-up, and per replay the CPU time per ticket created and per record.
//
// --save FILE writes the recorded log, --load FILE replays one written before instead of recording: two
// builds compared on the same entries.
//
//   node --expose-gc dist/bench/follower-apply.js [--tickets 40000] [--replays 5] [--burst 64] [--save F | --load F]
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { parse } from 'yaml';
import { queueFileSchema, type QueueConfig } from '../src/config/queue-config.js';
import { parseTicketEngineInput } from '../src/engine/engine-input.js';
import { TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { createLogger } from '../src/log.js';
import type { QueueApplier, QueueHistory } from '../src/queue/queue-history.js';
import { QueueRuntime } from '../src/queue/queue-runtime.js';
import type { Applied } from '../src/queue/queue-state.js';
import type { QueueRecord } from '../src/queue/records.js';
import { RequestBatcher } from '../src/replication/request-batcher.js';
import { decodeLogEntry, encodeLogEntry, LEADER_RECORD_TYPES } from '../src/replication/wire/record-codec.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { realisticEngineInput } from './create-ticket-load.js';
import { prng } from './prng.js';

const ROOT = join(import.meta.dirname, '..', '..');
const QUEUE_ID = 'bench.follower';
const log = createLogger('silent');

/** The leader's history: applies at once on its store, and keeps every entry as the log would hold it. */
class RecordingHistory implements QueueHistory {
  readonly leading = true;
  readonly entries: Uint8Array[] = [encodeLogEntry({ kind: 'claim', replicaId: 'leader', incarnation: randomUUID() })];
  private readonly requests: RequestBatcher;

  constructor(
    private readonly applier: QueueApplier,
    private readonly store: MemoryStore,
  ) {
    const requestEntry = (records: readonly QueueRecord[]) => encodeLogEntry({ kind: 'records', replicaId: 'leader', term: 0, records });
    this.requests = new RequestBatcher(requestEntry, (records, bytes) => this.append(records, bytes));
  }

  begin(caughtUp: () => void): void {
    this.applier.load({ tickets: [], backfills: [] });
    caughtUp();
  }

  propose<R extends QueueRecord>(records: readonly R[]): Promise<Applied<R['type']>[]> {
    if (!records.some((r) => LEADER_RECORD_TYPES.has(r.type))) return this.requests.propose(records) as Promise<Applied<R['type']>[]>;
    return this.append(records, encodeLogEntry({ kind: 'records', replicaId: 'leader', term: 1, records })) as Promise<
      Applied<R['type']>[]
    >;
  }

  private async append(records: readonly QueueRecord[], bytes: Uint8Array): Promise<Applied[]> {
    this.entries.push(bytes);
    const applied = records.map((record) => this.applier.apply(record));
    await this.store.commit(applied.flatMap((a) => a.changes));
    this.applier.committed(records);
    return applied;
  }

  async stop(): Promise<void> {}
}

/** A follower's history: it never proposes; `replay` applies entries as ReplicatedHistory.onEntry does. */
class ReplayHistory implements QueueHistory {
  readonly leading = false;
  private term = 0;

  constructor(
    private readonly applier: QueueApplier,
    private readonly store: MemoryStore,
  ) {}

  begin(caughtUp: () => void): void {
    caughtUp();
  }

  propose(): Promise<never> {
    return Promise.reject(new Error('a follower in this bench proposes nothing'));
  }

  replay(seq: number, bytes: Uint8Array): void {
    const entry = decodeLogEntry(bytes);
    if (entry.kind === 'claim') {
      this.term = seq;
      return;
    }
    if (entry.term !== 0 && entry.term !== this.term) return;
    const applied = entry.records.map((record) => this.applier.apply(record));
    const changes = applied.flatMap((a) => a.changes);
    if (changes.length > 0) {
      const records = entry.records;
      void this.store.commit(changes).then(() => this.applier.committed(records));
    }
  }

  async stop(): Promise<void> {}
}

function queueConfig(): QueueConfig {
  const config = queueFileSchema.parse(parse(readFileSync(join(ROOT, 'queues/eu.ranked.yaml'), 'utf8'))).config;
  // Ticks ten times as often as the file says, so that a few seconds of load see many ticks.
  return { ...config, tick_interval_ms: 100 };
}

/** A started queue on a memory store of its own, over the history `make` gives it. */
function startQueue<H extends QueueHistory>(
  make: (applier: QueueApplier, store: MemoryStore) => H,
): { queue: QueueRuntime; history: H; store: MemoryStore } {
  const store = new MemoryStore({ producerId: 'bench-producer' });
  let history: H | undefined;
  const queue = new QueueRuntime(QUEUE_ID, queueConfig(), store, log, (_queueId, applier) => {
    history = make(applier, store);
    return history;
  });
  queue.start();
  return { queue, history: history!, store };
}

async function recordLog(tickets: number, burst: number): Promise<Uint8Array[]> {
  const { queue: leader, history } = startQueue((applier, store) => new RecordingHistory(applier, store));
  const rand = prng(7);
  for (let made = 0; made < tickets; ) {
    const creates: Promise<void>[] = [];
    for (let i = 0; i < burst && made < tickets; i++, made++) {
      const id = randomUUID();
      const ticket = create(TicketSchema, { id, queueId: QUEUE_ID, createdAt: timestampNow(), engineInput: realisticEngineInput(rand) });
      creates.push(
        leader.createTicket(ticket, toBinary(TicketSchema, ticket), parseTicketEngineInput(ticket.engineInput, id, 'engine_input')),
      );
    }
    await Promise.all(creates);
    // Lets the tick timer in now and then, as the event loop of a replica under load does.
    if ((made / burst) % 8 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  // The last tickets' ticks.
  await new Promise((resolve) => setTimeout(resolve, 500));
  await leader.stop();
  return history.entries;
}

/** Entries one after another, each after its length (u32, little-endian). */
function saveLog(file: string, entries: readonly Uint8Array[]): void {
  const out = Buffer.alloc(entries.reduce((n, e) => n + 4 + e.byteLength, 0));
  let at = 0;
  for (const e of entries) {
    at = out.writeUInt32LE(e.byteLength, at);
    out.set(e, at);
    at += e.byteLength;
  }
  writeFileSync(file, out);
}

function loadLog(file: string): Uint8Array[] {
  const bytes = readFileSync(file);
  const entries: Uint8Array[] = [];
  for (let at = 0; at < bytes.length; ) {
    const length = bytes.readUInt32LE(at);
    entries.push(new Uint8Array(bytes.subarray(at + 4, at + 4 + length)));
    at += 4 + length;
  }
  return entries;
}

function describeLog(entries: Uint8Array[]): { creates: number; records: number; lines: string[] } {
  const byType = new Map<string, number>();
  let bytes = 0;
  for (const e of entries) {
    bytes += e.byteLength;
    const entry = decodeLogEntry(e);
    if (entry.kind === 'records') for (const r of entry.records) byType.set(r.type, (byType.get(r.type) ?? 0) + 1);
  }
  const records = [...byType.values()].reduce((a, b) => a + b, 0);
  return {
    creates: byType.get('ticket.create') ?? 0,
    records,
    lines: [
      `log: ${entries.length} entries, ${records} records, ${(bytes / 2 ** 20).toFixed(1)} MiB`,
      `records: ${[...byType].map(([type, n]) => `${type} ${n}`).join(', ')}`,
    ],
  };
}

/** One fresh follower applying the whole log; its CPU time in microseconds, and the closing read's share of it. */
async function replayOnce(entries: Uint8Array[]): Promise<{ cpuUs: number; readUs: number; wallMs: number; active: number }> {
  const { queue: follower, history, store } = startQueue((applier, own) => new ReplayHistory(applier, own));
  const started = performance.now();
  const cpu = process.cpuUsage();
  for (const [i, bytes] of entries.entries()) {
    history.replay(i + 1, bytes);
    // The log delivers entries in separate event turns; commits settle between them.
    if (i % 16 === 15) await new Promise((resolve) => setImmediate(resolve));
  }
  // The rows a follower has not made yet (src/queue/waiting-rows.ts) are made too, as the next explain,
  // statistics or tick of a replica taking the lead would make them: their cost counts, and is shown apart.
  const read = process.cpuUsage();
  await follower.insight.statistics(Date.now());
  const readCpu = process.cpuUsage(read);
  await store.whenDurable();
  const used = process.cpuUsage(cpu);
  const wallMs = performance.now() - started;
  const active = follower.activeTicketCount;
  await follower.stop();
  return { cpuUs: used.user + used.system, readUs: readCpu.user + readCpu.system, wallMs, active };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tickets: { type: 'string', default: '40000' },
      replays: { type: 'string', default: '5' },
      burst: { type: 'string', default: '64' },
      save: { type: 'string' },
      load: { type: 'string' },
    },
  });
  const entries = values.load ? loadLog(values.load) : await recordLog(Number(values.tickets), Number(values.burst));
  if (values.save) saveLog(values.save, entries);
  const made = describeLog(entries);
  for (const line of made.lines) console.log(line);
  const perTicket: number[] = [];
  for (let r = 1; r <= Number(values.replays); r++) {
    global.gc?.();
    const { cpuUs, readUs, wallMs, active } = await replayOnce(entries);
    perTicket.push(cpuUs / made.creates);
    console.log(
      `replay ${r}: ${(cpuUs / 1000).toFixed(0)} ms cpu (${(readUs / 1000).toFixed(0)} of them the closing read's rows), ${wallMs.toFixed(0)} ms wall, ${(cpuUs / made.creates).toFixed(1)} us per ticket created, ${(cpuUs / made.records).toFixed(1)} us per record; ${active} tickets left active`,
    );
  }
  const sorted = [...perTicket].sort((a, b) => a - b);
  console.log(`follower apply: median ${sorted[sorted.length >> 1]!.toFixed(1)} us per ticket created, best ${sorted[0]!.toFixed(1)}`);
}

await main();
