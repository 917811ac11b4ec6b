// The replication log's reader on a real nats-server: it applies every entry once, in order, from any
// position; and when its consumers stall without ending or failing (seen after a NATS node loss, for many
// seconds, while the stream still answered requests), it reads the entries directly by position meanwhile,
// and a consumer that wakes up later does not apply them a second time.
import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager, type ConsumerMessages, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { LOG_REGRESSED, ReplicationLog, type LogReader } from '../../src/replication/jetstream/replication-log.js';
import { natsClient, startNatsServer, type TestNatsServer } from '../support/nats.js';
import { until } from '../support/replicas.js';

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

const log = createLogger('silent');

/** A fresh log with `entries` entries appended (entry i holds the text `e<i>`); `direct`: with direct gets. */
async function logWith(entries: number, js: JetStreamClient = jetstream(nc), options: { direct?: boolean } = {}) {
  const n = randomUUID().slice(0, 8);
  const subjects = { req: `test.log.req.${n}`, lead: `test.log.lead.${n}`, term: `test.log.term.${n}` };
  const stream = `TEST_LOG_${n}`;
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: stream, subjects: [`test.log.*.${n}`], allow_direct: options.direct === true });
  const writer = new ReplicationLog(jetstream(nc), jsm, stream, subjects, log);
  for (let i = 1; i <= entries; i++) await writer.append('req', new TextEncoder().encode(`e${i}`), `id-${n}-${i}`);
  const reader = new ReplicationLog(js, jsm, stream, subjects, log);
  reader.useDirectGets(options.direct === true);
  return { writer, reader, n, jsm, stream };
}

/** A JetStream client whose publishes are stored but whose first acknowledgement of each id is lost. */
function ackLosingClient(): JetStreamClient {
  const real = jetstream(nc);
  const lost = new Set<string>();
  return new Proxy(real, {
    get(target, prop, receiver) {
      if (prop !== 'publish') return Reflect.get(target, prop, receiver);
      return async (...args: Parameters<JetStreamClient['publish']>) => {
        const ack = await target.publish(...args);
        const id = args[2]?.msgID;
        if (id !== undefined && !lost.has(id)) {
          lost.add(id);
          throw new Error('timeout (the acknowledgement was lost)');
        }
        return ack;
      };
    },
  });
}

/** A JetStream client whose consumers never deliver until `release()`, then deliver as usual. */
function stallingClient(): { js: JetStreamClient; release(): void } {
  const real = jetstream(nc);
  let released!: () => void;
  const releasedAt = new Promise<void>((resolve) => (released = resolve));
  const consumers = new Proxy(real.consumers, {
    get(target, prop, receiver) {
      if (prop !== 'get') return Reflect.get(target, prop, receiver);
      return async (...args: Parameters<typeof target.get>) => {
        const consumer = await target.get(...args);
        return new Proxy(consumer, {
          get(c, p, r) {
            if (p !== 'consume') return Reflect.get(c, p, r);
            return async (...consumeArgs: Parameters<typeof c.consume>) => {
              const messages = (await c.consume(...consumeArgs)) as ConsumerMessages;
              // Holds every message back until released: the stall, as seen. The reader uses only these.
              const held: Pick<ConsumerMessages, 'stop' | 'closed' | typeof Symbol.asyncIterator> = {
                stop: (err) => messages.stop(err),
                closed: () => messages.closed(),
                async *[Symbol.asyncIterator]() {
                  await Promise.race([releasedAt, messages.closed()]);
                  yield* messages;
                },
              };
              return held as ConsumerMessages;
            };
          },
        });
      };
    },
  });
  const js = new Proxy(real, { get: (t, p, r) => (p === 'consumers' ? consumers : Reflect.get(t, p, r)) });
  return { js, release: released };
}

describe('replication log reader', () => {
  it('applies every entry once, in order, from the position asked for, with the id it was appended with', async () => {
    const { reader, writer, n } = await logWith(5);
    const seen: [number, string, string | undefined][] = [];
    const reading: LogReader = await reader.read(3, (seq, data, msgId) => {
      seen.push([seq, new TextDecoder().decode(data), msgId]);
    });
    await writer.append('lead', new TextEncoder().encode('e6'), `id-${n}-6`);
    await until('six entries', () => seen.length === 4);
    await reading.stop();
    expect(seen).toEqual([3, 4, 5, 6].map((i) => [i, `e${i}`, `id-${n}-${i}`]));
  });

  it('appends once when an acknowledgement is lost: the try sent again with the same id answers the same position', async () => {
    const { jsm, stream, n } = await logWith(2);
    const losing = new ReplicationLog(
      ackLosingClient(),
      jsm,
      stream,
      { req: `test.log.req.${n}`, lead: `test.log.lead.${n}`, term: `test.log.term.${n}` },
      log,
    );
    expect(await losing.append('req', new TextEncoder().encode('e3'), `id-${n}-3`)).toBe(3);
    expect(await losing.append('lead', new TextEncoder().encode('e4'), `id-${n}-4`)).toBe(4);
    expect((await jsm.streams.info(stream)).state.messages).toBe(4);
  });

  it.each([
    ['through the stream leader', false],
    ['by direct gets too', true],
  ])(
    'reads directly (%s) while its consumers stall, and a consumer that wakes up later repeats nothing',
    async (_, direct) => {
      const stalling = stallingClient();
      const { reader, writer, n } = await logWith(20, stalling.js, { direct });
      const seen: number[] = [];
      const reading = await reader.read(1, (seq) => {
        seen.push(seq);
      });
      // Nothing comes through the consumer; the watchdog notices within a few seconds and reads directly.
      await until('20 entries read directly', () => seen.length === 20, 10_000);
      await writer.append('req', new TextEncoder().encode('e21'), `id-${n}-21`);
      await until('the entry appended meanwhile', () => seen.length === 21, 10_000);
      stalling.release();
      await writer.append('req', new TextEncoder().encode('e22'), `id-${n}-22`);
      await until('the next entry, through whichever path', () => seen.length === 22, 10_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      await reading.stop();
      expect(seen).toEqual(Array.from({ length: 22 }, (_, i) => i + 1));
    },
    30_000,
  );

  it('says so at error level when the log holds fewer entries than it applied (the broker lost them), and only then', async () => {
    const { jsm, stream, n } = await logWith(3);
    const lines: { level: number; msg: string; applied?: number; last?: number }[] = [];
    const recording = new ReplicationLog(
      jetstream(nc),
      jsm,
      stream,
      { req: `test.log.req.${n}`, lead: `test.log.lead.${n}`, term: `test.log.term.${n}` },
      createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) }),
    );
    const seen: number[] = [];
    const reading = await recording.read(1, (seq) => {
      seen.push(seq);
    });
    await until('three entries', () => seen.length === 3);
    // Caught up and idle for a few checks: nothing to say.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const lost = () => lines.filter((l) => l.msg === LOG_REGRESSED);
    expect(lost()).toEqual([]);
    // The stream made anew under the same name: its last position (0) is below the 3 entries applied, as when the
    // broker loses entries it had delivered.
    const config = (await jsm.streams.info(stream)).config;
    await jsm.streams.delete(stream);
    await jsm.streams.add(config);
    await until('the loss reported', () => lost().length > 0, 15_000);
    await reading.stop();
    expect(lost()[0]).toMatchObject({ level: 50, applied: 3, last: 0 });
  }, 30_000);
});
