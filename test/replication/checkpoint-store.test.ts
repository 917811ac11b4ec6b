// Checkpoints in the JetStream object store (src/replication/jetstream/checkpoint-objects.ts), on a real nats-server:
// saved as `<queue_id>@<seq>` with a sha256, the newest that verifies is read back, a corrupt one is
// skipped (with a log line) for the next older, other queues' objects are left alone, and pruning keeps
// the newest. In process: no service.
import { createHash, randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestCheckpoint, pruneCheckpoints, saveCheckpoint } from '../../src/replication/jetstream/checkpoint-objects.js';
import { natsClient, startNatsServer, type TestNatsServer } from '../support/nats.js';

let server: TestNatsServer;
let nc: NatsConnection;
beforeAll(async () => {
  server = await startNatsServer();
  nc = await natsClient(server);
});
afterAll(async () => {
  await nc?.close();
  await server?.dispose();
});

const bucket = (): Promise<ObjectStore> => new Objm(nc).create(`TEST_CHECKPOINTS_${randomUUID().slice(0, 8)}`);
const bytesOf = (text: string) => new TextEncoder().encode(text);
const textOf = (bytes: Uint8Array | undefined) => (bytes ? new TextDecoder().decode(bytes) : undefined);

/** A logger whose warnings the test reads. */
function capturingLogger() {
  const lines: { msg: string; object?: string }[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { log, lines };
}

describe('checkpoints in the object store', () => {
  it('hashes a large checkpoint in time slices, letting the event loop run meanwhile, and reads it back', async () => {
    const os = await bucket();
    const { log } = capturingLogger();
    const bytes = new Uint8Array(96 << 20).map((_, i) => i % 251);
    // Counts the event loop's turns until the save puts the object, that is while it hashes: a single hash
    // of 96 MiB would allow none.
    let turns = 0;
    let hashing = true;
    const spin = () => {
      turns++;
      if (hashing) setImmediate(spin);
    };
    setImmediate(spin);
    const putting = new Proxy(os, {
      get: (target, key) =>
        key === 'putBlob'
          ? (...args: Parameters<ObjectStore['putBlob']>) => {
              hashing = false;
              return target.putBlob(...args);
            }
          : Reflect.get(target, key),
    });
    const info = await saveCheckpoint(putting, 'big', 3, bytes);
    expect(info.metadata?.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    expect(turns).toBeGreaterThan(5);
    expect((await latestCheckpoint(os, 'big', log))?.seq).toBe(3);
  });

  it('reads back the newest checkpoint of the queue, and none for a queue without one', async () => {
    const os = await bucket();
    const { log } = capturingLogger();
    expect(await latestCheckpoint(os, 'eu', log)).toBeUndefined();
    await saveCheckpoint(os, 'eu', 9, bytesOf('at 9'));
    await saveCheckpoint(os, 'eu', 120, bytesOf('at 120'));
    await saveCheckpoint(os, 'eu', 40, bytesOf('at 40'));
    // Other queues' checkpoints, one of them newer, and one whose id starts like this one's.
    await saveCheckpoint(os, 'eu.ranked', 500, bytesOf('ranked'));
    await saveCheckpoint(os, 'e', 600, bytesOf('e'));
    const latest = await latestCheckpoint(os, 'eu', log);
    expect(latest?.seq).toBe(120);
    expect(textOf(latest?.bytes)).toBe('at 120');
    const info = await os.info('eu@120');
    expect(info?.metadata).toEqual({ seq: '120', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  it('skips a checkpoint whose bytes do not verify, with a log line, for the next older one', async () => {
    const os = await bucket();
    const { log, lines } = capturingLogger();
    await saveCheckpoint(os, 'eu', 10, bytesOf('good'));
    // A newer object whose bytes are not the ones its sha256 was taken of (a faulty or torn writer).
    const good = await os.info('eu@10');
    await os.putBlob({ name: 'eu@20', metadata: { seq: '20', sha256: good!.metadata!.sha256! } }, bytesOf('garbage'));
    // And one whose metadata names another sequence.
    await os.putBlob({ name: 'eu@30', metadata: { seq: '31', sha256: good!.metadata!.sha256! } }, bytesOf('good'));
    const latest = await latestCheckpoint(os, 'eu', log);
    expect(latest?.seq).toBe(10);
    expect(textOf(latest?.bytes)).toBe('good');
    expect(lines.map((l) => l.object)).toEqual(['eu@30', 'eu@20']);
    expect(lines[1]!.msg).toMatch(/do not match their sha256/);
  });

  it('skips a checkpoint whose stored chunks changed after it was saved, whether of the same length or longer', async () => {
    const name = `TEST_CHECKPOINTS_${randomUUID().slice(0, 8)}`;
    const os = await new Objm(nc).create(name);
    const { log, lines } = capturingLogger();
    await saveCheckpoint(os, 'eu', 10, bytesOf('good'));
    await saveCheckpoint(os, 'eu', 20, bytesOf('newer'));
    await saveCheckpoint(os, 'eu', 30, bytesOf('newest'));
    // Each object's one chunk replaced under the store: its digest (and, for the longer one, its size) no
    // longer match what the object's info says.
    const jsm = await jetstreamManager(nc);
    for (const [object, replacement] of [
      ['eu@20', 'NEWER'],
      ['eu@30', 'newest, and longer'],
    ] as const) {
      const subject = `$O.${name}.C.${(await os.info(object))!.nuid}`;
      await jsm.streams.purge(`OBJ_${name}`, { filter: subject });
      await jetstream(nc).publish(subject, bytesOf(replacement));
    }
    const latest = await latestCheckpoint(os, 'eu', log);
    expect(latest?.seq).toBe(10);
    expect(textOf(latest?.bytes)).toBe('good');
    expect(lines.map((l) => l.object)).toEqual(['eu@30', 'eu@20']);
    expect(lines.every((l) => /could not be read/.test(l.msg))).toBe(true);
  });

  it('prunes all but the newest checkpoints of the queue', async () => {
    const os = await bucket();
    const { log } = capturingLogger();
    for (const seq of [5, 50, 15, 500, 150]) await saveCheckpoint(os, 'eu', seq, bytesOf(`at ${seq}`));
    await saveCheckpoint(os, 'eu.ranked', 1, bytesOf('ranked'));
    expect((await pruneCheckpoints(os, 'eu')).sort((a, b) => a - b)).toEqual([5, 15, 50]);
    const names = (await os.list()).filter((i) => !i.deleted).map((i) => i.name);
    expect(names.sort()).toEqual(['eu.ranked@1', 'eu@150', 'eu@500']);
    expect((await latestCheckpoint(os, 'eu', log))?.seq).toBe(500);
    expect(await pruneCheckpoints(os, 'eu', 1)).toEqual([150]);
    expect((await latestCheckpoint(os, 'eu.ranked', log))?.seq).toBe(1);
  });
});
