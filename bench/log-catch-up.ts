// Catch-up from the log alone, measured: a replica starting against a queue whose log holds N CreateTicket
// entries and no checkpoint, timed from its process start to the queue's state `running` with N active
// tickets (bench/catch-up.ts measures the start from a checkpoint instead).
//
// Filling the log: a seeding replica creates the queue's stream and claims a term, and stops; the bench then
// appends N request entries itself, each one `ticket.create` record as a replica's CreateTicket appends it
// (term 0, a message id per entry), through JetStream with a window of publishes in flight. Filling it
// through CreateTicket would take minutes at these sizes on this machine, and the entries are the same.
//
//   node dist/bench/log-catch-up.js [--entries 10000,100000]
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { jetstream } from '@nats-io/jetstream';
import { TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { encodeLogEntry } from '../src/queue/record-codec.js';
import { replicationStreamName, replicationSubject } from '../src/store/replicated/names.js';
import { machine, table } from './bench-report.js';
import { assertBuildFresh } from './build-freshness.js';
import { engineInputPool } from './create-ticket-load.js';
import { startNatsCluster, type BenchNatsCluster } from './nats-cluster.js';
import {
  errorLines,
  removeReplicaDirs,
  replicaSpecs,
  replicatedEnv,
  startReplica,
  untilRunning,
  writeQueueDir,
} from './replica-processes.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** The defaults of BROKER_STREAM_REPLICATION_PREFIX and BROKER_SUBJECT_PREFIX_REPLICATION. */
const STREAM_PREFIX = 'SVC_MATCH_REPLICATION';
const SUBJECT_PREFIX = 'svc.match.replication';
const LEASE_MS = 6000;
/** Publishes in flight while filling the log. */
const WINDOW = 512;

interface LogCatchUpResult {
  entries: number;
  fillMs: number;
  runningMs: number;
  entriesPerSec: number;
  errorLines: number;
}

async function fillLog(cluster: BenchNatsCluster, queueId: string, entries: number): Promise<number> {
  const nc = await cluster.client();
  try {
    const js = jetstream(nc);
    const subject = replicationSubject(SUBJECT_PREFIX, 'req', queueId);
    const stream = replicationStreamName(STREAM_PREFIX, queueId);
    const inputs = engineInputPool(4096, 13, true);
    const createdAt = timestampFromMs(Date.now());
    const started = performance.now();
    const inFlight = new Set<Promise<unknown>>();
    for (let i = 0; i < entries; i++) {
      const ticketId = randomUUID();
      const ticket = toBinary(
        TicketSchema,
        create(TicketSchema, { id: ticketId, queueId, createdAt, engineInput: inputs[i % inputs.length]! }),
      );
      const entry = encodeLogEntry({
        kind: 'records',
        replicaId: 'bench-filler',
        term: 0,
        records: [{ type: 'ticket.create', ticketId, ticket }],
      });
      const published = js.publish(subject, entry, { msgID: randomUUID(), expect: { streamName: stream } });
      inFlight.add(published);
      void published.finally(() => inFlight.delete(published));
      if (inFlight.size >= WINDOW) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    return performance.now() - started;
  } finally {
    await nc.close();
  }
}

async function runLogCatchUp(cluster: BenchNatsCluster, entries: number): Promise<LogCatchUpResult> {
  const queueId = `bench.logcatchup.n${entries}`;
  const queueDir = writeQueueDir({ [queueId]: readFileSync(join(ROOT, 'queues/eu.ranked.yaml'), 'utf8') });
  // No checkpoint is ever taken: the fresh replica reads the whole log.
  const env = {
    ...replicatedEnv(cluster.urls, LEASE_MS, 'BENCH_COORD_LOGCATCHUP'),
    CHECKPOINT_INTERVAL_RECORDS: '1000000000',
    CHECKPOINT_INTERVAL_SECS: '86400',
  };
  const [seed, fresh] = await replicaSpecs(`lc${entries}`, 2, queueDir, env);
  let problems = 0;
  try {
    const seeder = await startReplica(seed!);
    try {
      await untilRunning(seed!.httpPort, queueId);
    } finally {
      await seeder.stop();
      problems += errorLines(seeder).length;
    }
    const fillMs = await fillLog(cluster, queueId, entries);
    const startMs = Date.now();
    const child = await startReplica(fresh!);
    try {
      const running = await untilRunning(fresh!.httpPort, queueId, 10 * 60_000);
      const runningMs = Date.now() - startMs;
      if (running.activeTickets !== entries)
        throw new Error(`the replica holds ${running.activeTickets} active tickets, the log ${entries}`);
      return { entries, fillMs, runningMs, entriesPerSec: entries / (runningMs / 1000), errorLines: problems + errorLines(child).length };
    } finally {
      await child.stop();
    }
  } finally {
    removeReplicaDirs([seed!, fresh!]);
    rmSync(queueDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  assertBuildFresh(ROOT);
  const { values } = parseArgs({ options: { entries: { type: 'string', default: '10000,100000' } } });
  const sizes = values.entries.split(',').map(Number);
  const info = machine();
  console.log(`catch-up from the log alone; machine: ${info.cpus} cpus (${info.model}), node ${info.node}, loadavg ${info.loadavg}`);
  const cluster = await startNatsCluster(3);
  const results: LogCatchUpResult[] = [];
  try {
    for (const n of sizes) {
      console.log(`${n} CreateTicket entries ...`);
      results.push(await runLogCatchUp(cluster, n));
    }
  } finally {
    await cluster.dispose();
  }
  console.log(
    table(
      ['log entries', 'bench: fill ms', 'process start -> running ms', 'entries/s applied', 'error lines'],
      results.map((r) => [
        String(r.entries),
        String(Math.round(r.fillMs)),
        String(r.runningMs),
        String(Math.round(r.entriesPerSec)),
        String(r.errorLines),
      ]),
    ),
  );
}

await main();
