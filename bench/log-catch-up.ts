// A replica's restart against the log it must replay, measured: a replica starting against a queue whose log
// holds N request entries (of K CreateTicket records each) after its newest checkpoint, or with no
// checkpoint at all, timed from its process start to the queue's state `running` (it serves from then on;
// bench/catch-up.ts measures the start from a large checkpoint instead), and to its pool's rows built (they
// are made once the replay is done, so the engine matches from then on).
//
// Filling the log: a seeding replica creates the queue's stream and claims a term; the bench then appends N
// request entries itself, each K `ticket.create` records as a replica's CreateTicket appends them (term 0, a
// message id per entry; a replica under load puts the records of many requests in one entry), through
// JetStream with a window of publishes in flight. Filling it through CreateTicket would take minutes at these
// sizes on this machine, and the entries are the same. Three ways:
//
//   (default)          no checkpoint: the seeder stops before the fill, and the fresh replica reads the log from
//                      its start.
//   --after-checkpoint the seeder takes one ticket and saves a checkpoint of it (CHECKPOINT_INTERVAL_RECORDS=1),
//                      then stops: the N entries are all after the newest checkpoint. With --checkpoint-tickets
//                      C, that checkpoint holds C tickets more (bench/catch-up.ts makes it so): the restart
//                      restores a large checkpoint and then replays the log after it.
//   --leader           the seeder keeps leading while the log fills, with the checkpoint settings of this
//                      process's environment (the service's defaults unless CHECKPOINT_INTERVAL_* are set), so
//                      it takes checkpoints by its own triggers; the fresh replica restores the newest and replays
//                      what came after it. This shows what the triggers leave to replay.
//
// The fresh replica never checkpoints. Printed per run: entries, records and bytes of the log after the
// checkpoint it restored (from its log line), when it restored, and when it served.
//
// --rate R appends at most R records a second (a plausible ingest, so that the leader's checkpoints keep
// pace as they would; by default as fast as JetStream takes them).
//
//   node dist/bench/log-catch-up.js [--entries 10000,100000] [--records-per-entry 1] [--rate 0]
//     [--after-checkpoint [--checkpoint-tickets 0] | --leader]
import { randomUUID } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { serviceConfigSchema } from '../src/config/service-config.js';
import { TicketSchema } from '../src/gen/matchmaker/core/v1/resources_pb.js';
import { encodeLogEntry } from '../src/replication/wire/record-codec.js';
import type { QueueRecord } from '../src/queue/records.js';
import { checkpointSequences } from '../src/replication/jetstream/checkpoint-objects.js';
import { replicationStreamName, replicationSubject } from '../src/replication/jetstream/names.js';
import { machine, table } from './bench-report.js';
import { assertBuildFresh } from './build-freshness.js';
import type { Child } from './child-process.js';
import { enlargeCheckpoint } from './catch-up.js';
import { createOneTicket, engineInputPool } from './create-ticket-load.js';
import { startNatsCluster, type BenchNatsCluster } from './nats-cluster.js';
import {
  errorLines,
  pollFor,
  queueSummary,
  removeReplicaDirs,
  replicaSpecs,
  replicatedEnv,
  sleep,
  startReplica,
  untilRunning,
  writeQueueDir,
} from './replica-processes.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** The defaults of BROKER_STREAM_REPLICATION_PREFIX, BROKER_SUBJECT_PREFIX_REPLICATION and BROKER_OBJECT_STORE_CHECKPOINTS. */
const STREAM_PREFIX = 'SVC_MATCH_REPLICATION';
const SUBJECT_PREFIX = 'svc.match.replication';
const CHECKPOINT_STORE = 'SVC_MATCH_CHECKPOINTS';
const LEASE_MS = 6000;
/** Publishes in flight while filling the log. */
const WINDOW = 512;
/** Checkpoint settings that take none: the fresh replica's (and the seeder's when it must not). */
const NO_CHECKPOINTS = {
  CHECKPOINT_INTERVAL_RECORDS: '1000000000',
  CHECKPOINT_INTERVAL_BYTES: '1000000000000',
  CHECKPOINT_INTERVAL_SECS: '86400',
};

type Mode = 'log' | 'after-checkpoint' | 'leader';

interface RestartResult {
  mode: Mode;
  entriesAppended: number;
  recordsPerEntry: number;
  fillMs: number;
  /** The log position of the checkpoint the fresh replica restored (0: none) and the log's last position. */
  restoredSeq: number;
  lastSeq: number;
  /** What the fresh replica read after its checkpoint: entries, records (a claim counts one), bytes. */
  entriesSince: number;
  recordsSince: number;
  bytesSince: number;
  /** Checkpoints the seeder saved while the log filled (--leader). */
  checkpointsSaved: number;
  /** Active tickets in the checkpoint the fresh replica restored, as the bench made it (--after-checkpoint). */
  checkpointTickets: number;
  /** Process start -> "queue restored from a checkpoint" (undefined without one) -> state `running`, ms. */
  restoredMs: number | undefined;
  runningMs: number;
  /** Process start -> the pool's rows built (they are made after `running`, so its engine can match). */
  rowsMs: number | undefined;
  activeTickets: number;
  errorLines: number;
}

/** Sizes and record counts of the entries the bench appended, by log position. */
type Appended = Map<number, { bytes: number; records: number }>;

async function fillLog(
  nc: NatsConnection,
  queueId: string,
  entries: number,
  perEntry: number,
  ratePerSec: number,
  appended: Appended,
): Promise<number> {
  const js = jetstream(nc);
  const subject = replicationSubject(SUBJECT_PREFIX, 'req', queueId);
  const stream = replicationStreamName(STREAM_PREFIX, queueId);
  const inputs = engineInputPool(4096, 13, true);
  const createdAt = timestampFromMs(Date.now());
  const started = performance.now();
  const inFlight = new Set<Promise<unknown>>();
  let n = 0;
  for (let i = 0; i < entries; i++) {
    // At most `ratePerSec` records a second (0: as fast as JetStream takes them).
    if (ratePerSec > 0) {
      const dueMs = started + (n / ratePerSec) * 1000 - performance.now();
      if (dueMs > 1) await sleep(dueMs);
    }
    const records: QueueRecord[] = [];
    for (let r = 0; r < perEntry; r++) {
      const ticketId = randomUUID();
      const ticket = toBinary(
        TicketSchema,
        create(TicketSchema, { id: ticketId, queueId, createdAt, engineInput: inputs[n++ % inputs.length]! }),
      );
      records.push({ type: 'ticket.create', ticketId, ticket });
    }
    const entry = encodeLogEntry({ kind: 'records', replicaId: 'bench-filler', term: 0, records });
    const published = js
      .publish(subject, entry, { msgID: randomUUID(), expect: { streamName: stream } })
      .then((ack) => appended.set(ack.seq, { bytes: entry.length, records: perEntry }));
    inFlight.add(published);
    void published.finally(() => inFlight.delete(published));
    if (inFlight.size >= WINDOW) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return performance.now() - started;
}

/** Entries, records and bytes of the log after `afterSeq` through `lastSeq` (entries the bench did not append are read). */
async function logAfter(jsm: JetStreamManager, stream: string, appended: Appended, afterSeq: number, lastSeq: number) {
  let records = 0;
  let bytes = 0;
  for (let seq = afterSeq + 1; seq <= lastSeq; seq++) {
    const known = appended.get(seq);
    if (known) {
      records += known.records;
      bytes += known.bytes;
      continue;
    }
    // The seeder's own entries (its claim, its one ticket): few, read one by one.
    const stored = await jsm.streams.getMessage(stream, { seq });
    bytes += stored?.data.length ?? 0;
    records += 1;
  }
  return { entries: lastSeq - afterSeq, records, bytes };
}

/** The first log line of the child with this message. */
function lineOf(child: Child, msg: string): Record<string, unknown> | undefined {
  return child.lines.find((l) => l.msg === msg);
}

async function runRestart(
  cluster: BenchNatsCluster,
  mode: Mode,
  entries: number,
  perEntry: number,
  ratePerSec: number,
  extraCheckpointTickets: number,
): Promise<RestartResult> {
  const queueId = `bench.restart.${mode}.n${entries}x${perEntry}.${randomUUID().slice(0, 4)}`;
  const stream = replicationStreamName(STREAM_PREFIX, queueId);
  const queueDir = writeQueueDir({ [queueId]: readFileSync(join(ROOT, 'queues/eu.ranked.yaml'), 'utf8') });
  const env = replicatedEnv(cluster.urls, LEASE_MS, 'BENCH_COORD_RESTART');
  const [seed, fresh] = await replicaSpecs(`rs${entries}`, 2, queueDir, env);
  const seederEnv =
    mode === 'log'
      ? { ...env, ...NO_CHECKPOINTS }
      : mode === 'after-checkpoint'
        ? { ...env, ...NO_CHECKPOINTS, CHECKPOINT_INTERVAL_RECORDS: '1' }
        : // --leader: the CHECKPOINT_INTERVAL_* of this process's environment, which the child inherits.
          env;
  const nc = await cluster.client();
  const jsm = await jetstreamManager(nc);
  const appended: Appended = new Map();
  let problems = 0;
  try {
    const seeder = await startReplica({ ...seed!, env: seederEnv });
    let fillMs = 0;
    let leaderTickets: number | undefined;
    let checkpointsSaved = 0;
    let checkpointTickets = 0;
    try {
      await untilRunning(seed!.httpPort, queueId);
      if (mode !== 'log') {
        await pollFor(
          'the seeder leads',
          async () => ((await queueSummary(seed!.httpPort, queueId))?.leading ? true : undefined),
          30_000,
          100,
        );
      }
      if (mode === 'after-checkpoint') {
        await createOneTicket(seed!.grpcPort, queueId);
        await pollFor('the seeder saved a checkpoint', async () => lineOf(seeder, 'checkpoint saved'), 60_000, 100);
      }
      if (mode !== 'leader') {
        await seeder.stop();
        problems += errorLines(seeder).length;
      }
      if (mode === 'after-checkpoint') checkpointTickets = (await enlargeCheckpoint(nc, queueId, extraCheckpointTickets)).tickets;
      fillMs = await fillLog(nc, queueId, entries, perEntry, ratePerSec, appended);
      if (mode === 'leader') {
        // The leader applies the whole log, and the last checkpoint it takes is saved, before it stops.
        const last = (await jsm.streams.info(stream)).state.last_seq;
        const objects = await new Objm(jetstream(nc)).open(CHECKPOINT_STORE, false);
        let seen = '';
        let steady = 0;
        await pollFor(
          'the leader caught up and its checkpoints settled',
          async () => {
            const q = await queueSummary(seed!.httpPort, queueId);
            const now = JSON.stringify(await checkpointSequences(objects, queueId));
            steady = now === seen ? steady + 1 : 0;
            seen = now;
            return q && q.activeTickets >= entries * perEntry && steady >= 4 ? q : undefined;
          },
          5 * 60_000,
          500,
        ).then((q) => (leaderTickets = q.activeTickets));
        if ((await jsm.streams.info(stream)).state.last_seq !== last) throw new Error('the log grew after the fill');
        checkpointsSaved = seeder.lines.filter((l) => l.msg === 'checkpoint saved').length;
        await seeder.stop();
        problems += errorLines(seeder).length;
      }
    } finally {
      if (seeder.process.exitCode === null && seeder.process.signalCode === null) await seeder.stop();
    }
    const lastSeq = (await jsm.streams.info(stream)).state.last_seq;

    const startMs = Date.now();
    const child = await startReplica({ ...fresh!, env: { ...env, ...NO_CHECKPOINTS } });
    try {
      const running = await untilRunning(fresh!.httpPort, queueId, 10 * 60_000);
      const runningMs = Date.now() - startMs;
      const restored = lineOf(child, 'queue restored from a checkpoint');
      const restoredSeq = typeof restored?.seq === 'number' ? restored.seq : 0;
      const expected = leaderTickets ?? entries * perEntry + checkpointTickets;
      if (running.activeTickets !== expected)
        throw new Error(`the replica holds ${running.activeTickets} active tickets, expected ${expected}`);
      if (mode === 'after-checkpoint' && !restored) throw new Error('the fresh replica restored no checkpoint');
      const since = await logAfter(jsm, stream, appended, restoredSeq, lastSeq);
      const rowsLine = restored ? 'pool restored from a checkpoint' : 'pool built from the replication log';
      const rows = await pollFor('the pool rows built', async () => lineOf(child, rowsLine), 10 * 60_000, 50);
      return {
        mode,
        entriesAppended: entries,
        recordsPerEntry: perEntry,
        fillMs,
        restoredSeq,
        lastSeq,
        entriesSince: since.entries,
        recordsSince: since.records,
        bytesSince: since.bytes,
        checkpointsSaved,
        checkpointTickets,
        restoredMs: typeof restored?.time === 'number' ? restored.time - startMs : undefined,
        runningMs,
        rowsMs: typeof rows.time === 'number' ? rows.time - startMs : undefined,
        activeTickets: running.activeTickets,
        errorLines: problems + errorLines(child).length,
      };
    } finally {
      await child.stop();
    }
  } finally {
    await nc.close();
    removeReplicaDirs([seed!, fresh!]);
    rmSync(queueDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  assertBuildFresh(ROOT);
  const { values } = parseArgs({
    options: {
      entries: { type: 'string', default: '10000,100000' },
      'records-per-entry': { type: 'string', default: '1' },
      rate: { type: 'string', default: '0' },
      'after-checkpoint': { type: 'boolean', default: false },
      'checkpoint-tickets': { type: 'string', default: '0' },
      leader: { type: 'boolean', default: false },
    },
  });
  const sizes = values.entries.split(',').map(Number);
  const perEntry = Number(values['records-per-entry']);
  const rate = Number(values.rate);
  const mode: Mode = values.leader ? 'leader' : values['after-checkpoint'] ? 'after-checkpoint' : 'log';
  const info = machine();
  const checkpointEnv = Object.entries(process.env)
    .filter(([k]) => k.startsWith('CHECKPOINT_INTERVAL_'))
    .map(([k, v]) => `${k}=${v}`);
  console.log(`replica restart against its log; machine: ${info.cpus} cpus (${info.model}), node ${info.node}, loadavg ${info.loadavg}`);
  console.log(
    `mode ${mode}; checkpoints stored ${serviceConfigSchema.shape.checkpoint_compression.parse(process.env.CHECKPOINT_COMPRESSION)} (CHECKPOINT_COMPRESSION); ${perEntry} CreateTicket record(s) per entry; fill ${rate > 0 ? `at ${rate} records/s` : 'as fast as it goes'}${mode === 'leader' ? `; leader's checkpoint settings: ${checkpointEnv.join(' ') || 'the defaults'}` : ''}`,
  );
  const cluster = await startNatsCluster(3);
  const results: RestartResult[] = [];
  try {
    for (const n of sizes) {
      console.log(`${n} entries of ${perEntry} ...`);
      const r = await runRestart(cluster, mode, n, perEntry, rate, Number(values['checkpoint-tickets']));
      console.log(`  ${JSON.stringify(r)}`);
      results.push(r);
      await sleep(500);
    }
  } finally {
    await cluster.dispose();
  }
  const at = (x: number | undefined) => (x === undefined ? 'n/a' : String(Math.round(x)));
  console.log(
    table(
      [
        'entries appended',
        'checkpoints the leader saved',
        'tickets in the checkpoint',
        'entries since checkpoint',
        'records',
        'bytes',
        'restored ms',
        'time to serve ms',
        'records/s replayed',
        'rows built ms',
        'bench: fill ms',
        'error lines',
      ],
      results.map((r) => [
        `${r.entriesAppended} x ${r.recordsPerEntry}`,
        r.mode === 'leader' ? String(r.checkpointsSaved) : '-',
        r.mode === 'after-checkpoint' ? String(r.checkpointTickets) : '-',
        String(r.entriesSince),
        String(r.recordsSince),
        `${r.bytesSince} (${(r.bytesSince / 2 ** 20).toFixed(1)} MiB)`,
        at(r.restoredMs),
        String(r.runningMs),
        String(Math.round(r.recordsSince / ((r.runningMs - (r.restoredMs ?? 0)) / 1000))),
        at(r.rowsMs),
        String(Math.round(r.fillMs)),
        String(r.errorLines),
      ]),
    ),
  );
}

await main();
