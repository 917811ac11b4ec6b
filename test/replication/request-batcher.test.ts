// The replicated mode's group commit of request records (src/replication/request-batcher.ts): how many entries
// requests go out in, and what each request is answered.
import { describe, expect, it } from 'vitest';
import type { Applied } from '../../src/queue/queue-state.js';
import type { QueueRecord } from '../../src/queue/records.js';
import { MAX_ENTRY_BYTES, REQUEST_APPENDS_IN_FLIGHT, RequestBatcher } from '../../src/replication/request-batcher.js';

const cancel = (ticketId: string): QueueRecord => ({ type: 'ticket.cancel', ticketId });
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** A log that holds every append until `settle` and answers each record with its ticket id. */
function heldLog(entryBytes: (records: readonly QueueRecord[]) => number = (r) => r.length) {
  const entries: { records: readonly QueueRecord[]; settle: (ok: boolean) => void }[] = [];
  const encoded = new Map<Uint8Array, readonly QueueRecord[]>();
  const batcher = new RequestBatcher(
    (records) => {
      const bytes = new Uint8Array(entryBytes(records));
      encoded.set(bytes, records);
      return bytes;
    },
    (records, entry) =>
      new Promise<Applied[]>((resolve, reject) => {
        // The bytes appended are those records' encoding.
        expect(encoded.get(entry)).toBe(records);
        entries.push({
          records,
          settle: (ok) =>
            ok
              ? resolve(records.map((r) => ({ result: { id: (r as { ticketId: string }).ticketId } }) as unknown as Applied))
              : reject(new Error('append failed')),
        });
      }),
  );
  return { batcher, entries };
}

describe('request batcher (group commit of request records)', () => {
  it('sends the requests of one event turn as one entry and answers each its own records', async () => {
    const { batcher, entries } = heldLog();
    const answers = ['a', 'b', 'c'].map((id) => batcher.propose([cancel(id)]));
    await turn();
    expect(entries.map((e) => e.records.length)).toEqual([3]);
    entries[0]!.settle(true);
    const results = await Promise.all(answers);
    expect(results.map((r) => (r[0] as unknown as { result: { id: string } }).result.id)).toEqual(['a', 'b', 'c']);
  });

  it(`holds new requests while ${REQUEST_APPENDS_IN_FLIGHT} entries are in flight, then sends them together`, async () => {
    const { batcher, entries } = heldLog();
    const first = batcher.propose([cancel('1')]);
    await turn();
    const second = batcher.propose([cancel('2')]);
    await turn();
    expect(entries).toHaveLength(REQUEST_APPENDS_IN_FLIGHT);
    const waiting = ['3', '4', '5'].map((id) => batcher.propose([cancel(id)]));
    await turn();
    await turn();
    expect(entries).toHaveLength(REQUEST_APPENDS_IN_FLIGHT);
    entries[0]!.settle(true);
    await first;
    await turn();
    await turn();
    expect(entries.map((e) => e.records.map((r) => (r as { ticketId: string }).ticketId))).toEqual([['1'], ['2'], ['3', '4', '5']]);
    entries[1]!.settle(true);
    entries[2]!.settle(true);
    await Promise.all([second, ...waiting]);
  });

  it('splits a batch whose entry would be over the size limit, and fails only the requests of a failed entry', async () => {
    // Each record encodes to half the limit: two of them overflow it.
    const { batcher, entries } = heldLog((records) => (records.length * MAX_ENTRY_BYTES) / 2 + 1);
    const answers = ['a', 'b', 'c', 'd'].map((id) => batcher.propose([cancel(id)]));
    await turn();
    expect(entries.map((e) => e.records.length)).toEqual([1, 1, 1, 1]);
    entries[1]!.settle(false);
    for (const i of [0, 2, 3]) entries[i]!.settle(true);
    const settled = await Promise.allSettled(answers);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
  });

  it('fails the requests not yet sent when the history stops', async () => {
    const { batcher, entries } = heldLog();
    batcher.propose([cancel('1')]).catch(() => undefined);
    batcher.propose([cancel('2')]).catch(() => undefined);
    await turn();
    batcher.propose([cancel('3')]).catch(() => undefined);
    await turn();
    const late = batcher.propose([cancel('4')]);
    batcher.rejectWaiting(new Error('stopping'));
    await expect(late).rejects.toThrow('stopping');
    expect(entries.flatMap((e) => e.records)).toHaveLength(3);
  });
});
