#!/usr/bin/env node
// matchmaker serve --config queues --data ./data   (every setting also from the environment: docs/configuration.md)
// matchmaker check --config queues                 (validates queue files and exits non-zero on an invalid one)
// matchmaker engine-input '{"players":[...]}'       (prints the base64 of a serialized EngineInput, for HTTP clients)
import { format, parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { fromJsonString, toBinary } from '@bufbuild/protobuf';
import { EngineInputSchema } from './gen/matchmaker/engines/standard/v1/engine_pb.js';
import { scanQueueDirectory } from './config/queue-files.js';
import { loadServiceConfig } from './config/service-config.js';
import { createLogger } from './log.js';
import { storeFailed } from './modes/embedded.js';
import { startService } from './server.js';
import { DataDirError } from './store/data-dir.js';
import { commitFailureCause, isCommitFailure } from './store/lmdb-store.js';

const USAGE = `usage:
  matchmaker serve [--config DIR] [--data DIR] [--grpc-port N] [--http-port N]
  matchmaker check [--config DIR]
  matchmaker engine-input JSON     (EngineInput in canonical JSON -> base64 of its binary form)`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      data: { type: 'string' },
      'grpc-port': { type: 'string' },
      'http-port': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const command = positionals[0];
  if (values.help || !command) {
    console.log(USAGE);
    // Asked for help: success. No command at all: a usage error.
    return values.help ? 0 : 2;
  }
  const config = loadServiceConfig({
    queue_config_dir: values.config,
    data_dir: values.data,
    grpc_port: values['grpc-port'],
    http_port: values['http-port'],
  });

  if (command === 'engine-input') {
    const json = positionals[1];
    if (!json) throw new Error('engine-input needs the EngineInput as JSON');
    console.log(Buffer.from(toBinary(EngineInputSchema, fromJsonString(EngineInputSchema, json))).toString('base64'));
    return 0;
  }
  if (command === 'check') {
    const scan = scanQueueDirectory(config.queue_config_dir);
    for (const e of scan.errors) console.error(e.message);
    for (const q of scan.queues.values()) console.log(`ok ${q.queueId} (${q.file})`);
    return scan.errors.length > 0 ? 1 : 0;
  }
  if (command !== 'serve') {
    console.error(`unknown command "${command}"\n${USAGE}`);
    return 2;
  }

  const log = createLogger(config.log_level);
  // Libraries that print to the console instead (lmdb-js prints a failed commit's error with its stack)
  // still log JSON lines.
  console.error = console.warn = (first?: unknown, ...rest: unknown[]) =>
    first instanceof Error
      ? log.error({ err: first, source: 'console' }, first.message)
      : log.error({ source: 'console' }, format(first, ...rest));
  // V8 moves objects from allocation sites whose objects often survive a scavenge straight to the old
  // generation. Under load a request's objects are often alive at a scavenge (they wait ~1 ms for the disk
  // flush), so V8 sometimes starts doing that for them, and from then on every request fills the old
  // generation and major GCs come every second or two. Measured at 3,000 CreateTicket/s: p99 18-53 ms
  // (median 27) with this off against 34-66 ms (median 44) with it on (bench/RESULTS.md). V8 reads the flag
  // when it processes that feedback, so setting it here, before any request, takes effect.
  setFlagsFromString('--no-allocation-site-pretenuring');
  // A failed commit rejects every promise lmdb-js made for its transaction, some of them its own: one that
  // nobody observes must still end the process with the commit's fatal line (before, Node printed it raw,
  // and did so before the store reported the failure in about one run in four of disk-full.test.ts).
  process.on('unhandledRejection', (reason) => {
    if (isCommitFailure(reason)) {
      void commitFailureCause(reason).then((cause) => storeFailed(log, config.data_dir, cause));
      return;
    }
    log.fatal({ err: reason }, 'unhandled rejection: stopping');
    process.exit(1);
  });
  let service: Awaited<ReturnType<typeof startService>>;
  try {
    service = await startService(config, log);
  } catch (err) {
    // One structured line that says what to fix, not a stack trace from inside a library.
    if (err instanceof DataDirError) {
      const { dataDir, reason, details } = err;
      log.fatal({ dataDir, reason, ...details }, err.message);
    } else log.fatal({ err }, 'start-up failed');
    return 1;
  }
  const onSignal = (signal: string) => {
    log.info({ signal }, 'signal received');
    service.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
  return -1; // keep running
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exit(code);
  },
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
