// The client's WebSocket consumer turns gap detection on by itself when the stream's `ready` frame says
// the offsets are the queue's own numbering (the replicated mode), and leaves it off for the service's
// numbering, where a stream of one queue skips the other queues' numbers. A WebSocket server on a real
// socket plays the stream: ready, then offsets 1 and 3 of one producer.
import { create, toJson } from '@bufbuild/protobuf';
import { websocketConsumer } from '@matchmaker/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { OutcomeSchema } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { uuid } from '../support/fixtures.js';

/** How the played stream numbers its offsets: what its `ready` frame says. */
let offsets: 'service' | 'queue' = 'service';
let server: WebSocketServer;
let url: string;

beforeAll(async () => {
  server = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v1/outcomes/stream' });
  await new Promise((resolve) => server.once('listening', resolve));
  url = `ws://127.0.0.1:${(server.address() as { port: number }).port}`;
  server.on('connection', (ws) => {
    ws.send(JSON.stringify({ type: 'ready', after: '0', offsets }));
    for (const sequence of [1n, 3n]) {
      const outcome = create(OutcomeSchema, {
        id: uuid(),
        queueId: 'q',
        producerId: 'p',
        producerSequence: sequence,
        kind: 'ticket.removed',
      });
      ws.send(JSON.stringify({ type: 'outcome', offset: String(sequence), outcome: toJson(OutcomeSchema, outcome) }));
    }
  });
});

afterAll(async () => {
  for (const client of server?.clients ?? []) client.terminate();
  await new Promise((resolve) => server?.close(resolve));
});

/** The gaps a consumer of queue q reports once it has received both outcomes. */
async function gapsSeen(detectGaps?: boolean): Promise<number> {
  const reported: unknown[] = [];
  const consumer = websocketConsumer({
    url,
    queueId: 'q',
    onGap: (g) => reported.push(g),
    ...(detectGaps === undefined ? {} : { detectGaps }),
  });
  try {
    const iterator = consumer[Symbol.asyncIterator]();
    const offsetsSeen: bigint[] = [];
    for (let i = 0; i < 2; i++) offsetsSeen.push((await iterator.next()).value!.outcome.producerSequence);
    expect(offsetsSeen).toEqual([1n, 3n]);
    expect(consumer.gaps).toBe(reported.length);
    return consumer.gaps;
  } finally {
    await consumer.close();
  }
}

describe('gap detection of a queue’s WebSocket consumer', () => {
  it('is off when the offsets are the service’s numbering (other queues take numbers between)', async () => {
    offsets = 'service';
    expect(await gapsSeen()).toBe(0);
  });

  it('is on when the offsets are the queue’s own numbering, and reports the missing offset', async () => {
    offsets = 'queue';
    expect(await gapsSeen()).toBe(1);
  });

  it('follows the caller’s choice over the stream’s', async () => {
    offsets = 'queue';
    expect(await gapsSeen(false)).toBe(0);
    offsets = 'service';
    expect(await gapsSeen(true)).toBe(1);
  });
});
