// The core beneath @matchmaker/client's three outcome consumers, fed directly: dedupe by Outcome.id (bounded,
// with copies that arrive while the first is being handled joined to it), reassembly of batched outcomes by
// OutcomeBatch, and a gap in producer_sequence reported. The sinks feed it the same way (client-outcomes.test.ts).
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { OutcomeCore, OutcomeSchema, RemovalReason, type Outcome, type OutcomeDelivery, type SequenceGap } from '@matchmaker/client';
import { describe, expect, it } from 'vitest';

let sequence = 0n;
const outcome = (init: MessageInitShape<typeof OutcomeSchema> = {}): Outcome =>
  create(OutcomeSchema, {
    id: `o-${++sequence}`,
    kind: 'match.created',
    queueId: 'q',
    producerId: 'p1',
    producerSequence: sequence,
    payload: { case: 'matchCreated', value: { match: { id: `m-${sequence}` } } },
    ...init,
  });

const removedChunk = (operationId: string, chunkIndex: number, chunkCount: number, ticketIds: string[]): Outcome =>
  outcome({
    kind: 'ticket.removed',
    payload: {
      case: 'ticketsRemoved',
      value: { ticketIds, reason: RemovalReason.CLEAR_COMMAND, batch: { operationId, chunkIndex, chunkCount } },
    },
  });

/** A sink acknowledgement that counts its calls. */
function sinkAck(): { ack: () => Promise<void>; calls: () => number } {
  let n = 0;
  return { ack: async () => void n++, calls: () => n };
}

describe('outcome core', () => {
  it('hands out an outcome once: a copy while it is handled joins it, a copy after its ack is dropped and acknowledged', async () => {
    const core = new OutcomeCore();
    const o = outcome();
    const first = sinkAck();
    const [delivery] = core.receive(o, first.ack);
    expect(delivery!.outcome).toBe(o);

    const whileHandled = sinkAck();
    expect(core.receive(o, whileHandled.ack)).toEqual([]);
    expect(whileHandled.calls()).toBe(0);
    await delivery!.ack();
    expect([first.calls(), whileHandled.calls()]).toEqual([1, 1]);

    const afterwards = sinkAck();
    expect(core.receive(o, afterwards.ack)).toEqual([]);
    expect(afterwards.calls()).toBe(1);
    expect(core.duplicates).toBe(2);
  });

  it('hands an outcome out again when the sink could not confirm its acknowledgement', async () => {
    const core = new OutcomeCore();
    const o = outcome();
    const [first] = core.receive(o, () => Promise.reject(new Error('no confirmation')));
    await expect(first!.ack()).rejects.toThrow('no confirmation');
    const again = sinkAck();
    const [redelivered] = core.receive(o, again.ack);
    expect(redelivered!.outcome).toBe(o);
    await redelivered!.ack();
    expect(again.calls()).toBe(1);
    expect(core.receive(o, sinkAck().ack)).toEqual([]);
  });

  it('remembers a bounded number of ids, the least recently seen forgotten first', async () => {
    const core = new OutcomeCore({ dedupeSize: 2 });
    const [a, b, c] = [outcome(), outcome(), outcome()];
    for (const o of [a, b]) await core.receive(o, sinkAck().ack)[0]!.ack();
    expect(core.receive(a, sinkAck().ack)).toEqual([]); // a is now the most recent
    await core.receive(c, sinkAck().ack)[0]!.ack(); // b is forgotten
    expect(core.receive(a, sinkAck().ack)).toEqual([]);
    expect(core.receive(b, sinkAck().ack)).toHaveLength(1);
  });

  it('reassembles a batched removal from chunks in any order, once, and acknowledges every chunk', async () => {
    const core = new OutcomeCore();
    const chunks = [removedChunk('op-1', 0, 3, ['t1', 't2']), removedChunk('op-1', 1, 3, ['t3', 't4']), removedChunk('op-1', 2, 3, ['t5'])];
    const acks = chunks.map(() => sinkAck());
    expect(core.receive(chunks[2]!, acks[2]!.ack)).toEqual([]);
    expect(core.receive(chunks[0]!, acks[0]!.ack)).toEqual([]);
    expect(core.receive(chunks[0]!, sinkAck().ack)).toEqual([]); // a redelivered chunk
    const [delivery] = core.receive(chunks[1]!, acks[1]!.ack) as [OutcomeDelivery];
    expect(delivery.complete).toBe(true);
    expect(delivery.chunks).toEqual(chunks);
    expect(delivery.outcome.id).toBe(chunks[0]!.id);
    expect(delivery.outcome.payload).toMatchObject({
      case: 'ticketsRemoved',
      value: {
        ticketIds: ['t1', 't2', 't3', 't4', 't5'],
        reason: RemovalReason.CLEAR_COMMAND,
        batch: { operationId: 'op-1', chunkCount: 3 },
      },
    });
    expect(chunks[0]!.payload.case === 'ticketsRemoved' && chunks[0]!.payload.value.ticketIds).toEqual(['t1', 't2']); // not changed
    await delivery.ack();
    expect(acks.map((a) => a.calls())).toEqual([1, 1, 1]);
    expect(core.receive(chunks[1]!, sinkAck().ack)).toEqual([]);
  });

  it('hands out the oldest incomplete batch, marked incomplete, when too many wait for chunks', () => {
    const core = new OutcomeCore({ maxPendingBatches: 1 });
    const first = removedChunk('op-a', 0, 2, ['t1']);
    expect(core.receive(first, sinkAck().ack)).toEqual([]);
    const [given] = core.receive(removedChunk('op-b', 0, 2, ['t2']), sinkAck().ack);
    expect(given).toMatchObject({ complete: false, chunks: [first] });
  });

  it('reports a gap in producer_sequence per producer, and only when asked to', () => {
    const gaps: SequenceGap[] = [];
    const core = new OutcomeCore({ detectGaps: true, onGap: (g) => gaps.push(g) });
    const at = (producerId: string, producerSequence: bigint) => core.receive(outcome({ producerId, producerSequence }), sinkAck().ack);
    at('p1', 10n);
    at('p1', 11n);
    at('p2', 3n); // another producer counts on its own
    at('p1', 14n); // 12 and 13 are missing
    at('p1', 12n); // late, lower: not a gap
    at('p2', 4n);
    expect(gaps).toEqual([{ producerId: 'p1', after: 11n, next: 14n, missing: 2n, queueId: 'q' }]);
    expect(core.gaps).toBe(1);

    const quiet = new OutcomeCore({ onGap: (g) => gaps.push(g) });
    quiet.receive(outcome({ producerSequence: 1n }), sinkAck().ack);
    quiet.receive(outcome({ producerSequence: 5n }), sinkAck().ack);
    expect(gaps).toHaveLength(1);
  });
});
