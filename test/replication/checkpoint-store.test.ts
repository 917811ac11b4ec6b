// Checkpoints in the JetStream object store (src/replication/jetstream/checkpoint-objects.ts), on a real nats-server:
// saved as `<queue_id>@<seq>` with a sha256, compressed (zstd) or not, the newest that verifies is read back,
// a corrupt one is skipped (with a log line) for the next older, other queues' objects are left alone, and
// pruning keeps the newest. In process: no service.
import { createHash, randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compressCheckpoint } from '../../src/engine/native.js';
import {
  type CheckpointCompression,
  latestCheckpoint,
  pruneCheckpoints,
  saveCheckpoint as saveAs,
} from '../../src/replication/jetstream/checkpoint-objects.js';
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
/** Saved as a leader does by default. */
const saveCheckpoint = (os: ObjectStore, queueId: string, seq: number, bytes: Uint8Array) => saveAs(os, queueId, seq, bytes, 'zstd');
/** Bytes that compress about as a checkpoint does: text with repeats, and noise. */
function checkpointLike(size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  let state = 12345;
  for (let i = 0; i < size; i++) {
    state = (state * 1103515245 + 12345) >>> 0;
    bytes[i] = i % 8 === 0 ? state >>> 24 : 97 + ((i >> 5) % 26);
  }
  return bytes;
}

/** A logger whose warnings the test reads. */
function capturingLogger() {
  const lines: { msg: string; object?: string; err?: { message: string } }[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { log, lines };
}

describe('checkpoints in the object store', () => {
  it.each<CheckpointCompression>(['none', 'zstd'])(
    'with compression %s, compresses and hashes a large checkpoint letting the event loop run meanwhile, and reads it back',
    async (compression) => {
      const os = await bucket();
      const { log } = capturingLogger();
      const bytes = checkpointLike(96 << 20);
      // Counts the event loop's turns until the save puts the object, that is while it compresses (on the libuv
      // thread pool) and hashes (in slices): a single hash of 96 MiB would allow none.
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
      const info = await saveAs(putting, 'big', 3, bytes, compression);
      const stored = compression === 'zstd' ? await compressCheckpoint(bytes) : bytes;
      expect(info.metadata?.sha256).toBe(createHash('sha256').update(stored).digest('hex'));
      expect(info.size).toBe(stored.length);
      if (compression === 'zstd') {
        expect(info.size).toBeLessThan(bytes.length / 2);
        expect(info.metadata).toMatchObject({ encoding: 'zstd', raw_bytes: String(bytes.length) });
      } else expect(info.metadata?.encoding).toBeUndefined();
      expect(turns).toBeGreaterThan(5);
      const latest = await latestCheckpoint(os, 'big', log);
      expect(latest?.seq).toBe(3);
      expect(Buffer.compare(latest!.bytes, bytes)).toBe(0);
    },
  );

  it('reads a checkpoint stored uncompressed (as older leaders, or CHECKPOINT_COMPRESSION none, store them) beside compressed ones', async () => {
    const os = await bucket();
    const { log } = capturingLogger();
    await saveAs(os, 'eu', 10, bytesOf('plain at 10'), 'none');
    await saveAs(os, 'eu', 20, bytesOf('compressed at 20'), 'zstd');
    expect(textOf((await latestCheckpoint(os, 'eu', log))?.bytes)).toBe('compressed at 20');
    await saveAs(os, 'eu', 30, bytesOf('plain at 30'), 'none');
    expect(textOf((await latestCheckpoint(os, 'eu', log))?.bytes)).toBe('plain at 30');
    // No encoding in an uncompressed one's metadata: what replicas before compression wrote and read.
    expect((await os.info('eu@30'))?.metadata).toEqual({ seq: '30', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  it('skips a compressed checkpoint whose frames are corrupt, cut short, hold another length than named, or have an unknown encoding', async () => {
    const os = await bucket();
    const { log, lines } = capturingLogger();
    await saveCheckpoint(os, 'eu', 10, bytesOf('good'));
    // Each newer one verifies against its sha256 (its writer hashed what it stored) but cannot be read back.
    const frame = await compressCheckpoint(bytesOf('a frame of 19 bytes'));
    const flipped = Uint8Array.from(frame);
    flipped[flipped.length - 2]! ^= 0xff;
    const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
    const put = (seq: number, bytes: Uint8Array, metadata: Record<string, string>) =>
      os.putBlob({ name: `eu@${seq}`, metadata: { seq: String(seq), sha256: sha(bytes), ...metadata } }, bytes);
    await put(20, flipped, { encoding: 'zstd', raw_bytes: '19' });
    await put(30, frame, { encoding: 'zstd', raw_bytes: '18' });
    await put(40, frame, { encoding: 'zstd', raw_bytes: '20' });
    await put(50, frame, { encoding: 'zstd', raw_bytes: 'many' });
    await put(60, frame, { encoding: 'lz4', raw_bytes: '19' });
    await put(70, bytesOf('not a frame'), { encoding: 'zstd', raw_bytes: '11' });
    await put(80, frame.subarray(0, frame.length - 3), { encoding: 'zstd', raw_bytes: '19' });
    // Many frames (4 MiB of checkpoint each), one in the middle altered.
    const big = checkpointLike(20 << 20);
    const frames = Uint8Array.from(await compressCheckpoint(big));
    frames[Math.floor(frames.length / 2)]! ^= 0x55;
    await put(90, frames, { encoding: 'zstd', raw_bytes: String(big.length) });
    const latest = await latestCheckpoint(os, 'eu', log);
    expect(latest?.seq).toBe(10);
    expect(textOf(latest?.bytes)).toBe('good');
    expect(lines.map((l) => l.object)).toEqual(['eu@90', 'eu@80', 'eu@70', 'eu@60', 'eu@50', 'eu@40', 'eu@30', 'eu@20']);
    expect(lines.every((l) => /cannot be decompressed/.test(l.msg))).toBe(true);
    const why = Object.fromEntries(lines.map((l) => [l.object, l.err?.message]));
    expect(why).toMatchObject({
      'eu@80': expect.stringMatching(/last frame ends at byte 0 of/),
      'eu@60': expect.stringMatching(/encoding "lz4"/),
      'eu@50': expect.stringMatching(/raw_bytes "many" is not a length/),
      'eu@40': expect.stringMatching(/frames hold 19 of the 20 bytes/),
      'eu@30': expect.stringMatching(/more than the 18 bytes/),
    });
    // And the frame itself reads back when named rightly.
    await put(100, frame, { encoding: 'zstd', raw_bytes: '19' });
    expect(textOf((await latestCheckpoint(os, 'eu', log))?.bytes)).toBe('a frame of 19 bytes');
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
    expect(info?.metadata).toEqual({ seq: '120', encoding: 'zstd', raw_bytes: '6', sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
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
