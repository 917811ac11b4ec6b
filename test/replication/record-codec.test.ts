// The replicated log's wire form (src/replication/wire/record-codec.ts, proto/matchmaker/replication/v1/log.proto):
// every record survives the trip exactly, records applied after the trip change a queue byte for byte as
// the originals do, a corrupt entry is refused by name, and a batch of ticket creations costs about the
// tickets' own bytes. In process: no service.
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { WireType } from '@bufbuild/protobuf/wire';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BackfillRequestSchema, TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import { RemovalReason } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { LogEntrySchema, type LogEntry as WireLogEntry } from '../../src/gen/matchmaker/replication/v1/log_pb.js';
import {
  decodeLogEntry,
  decodeWhole,
  encodeLogEntry,
  LogDecodeError,
  LogEncodeError,
  ticketCreates,
  type LogEntry,
} from '../../src/replication/wire/record-codec.js';
import type { QueueRecord } from '../../src/queue/records.js';
import { party } from '../support/fixtures.js';
import { entryArb, recordArbs } from '../support/record-arbitraries.js';
import { applyRecord, freshRun, opArb, run, type Run } from '../support/queue-records.js';

/** A record with its BackfillRequest message as bytes: messages compare by their encoding. */
const comparable = (entry: LogEntry) =>
  entry.kind === 'records'
    ? {
        ...entry,
        records: entry.records.map((r) =>
          r.type === 'backfill.create' ? { ...r, request: toBinary(BackfillRequestSchema, r.request) } : r,
        ),
      }
    : entry;

// ---- wire builders for corrupt entries (through the generated schema, as a faulty writer would) ---------

type WireInit = MessageInitShape<typeof LogEntrySchema>;
const wire = (init: WireInit, change?: (entry: WireLogEntry) => void) => {
  const entry = create(LogEntrySchema, init);
  change?.(entry);
  return toBinary(LogEntrySchema, entry);
};
/** The first record of an entry, to give it fields this version does not know (as a newer writer would). */
const firstRecord = (entry: WireLogEntry) => (entry.body.case === 'records' ? entry.body.value.records[0]! : expect.fail('no records'));
type WireRecordInit = NonNullable<NonNullable<Extract<WireInit['body'], { case: 'records' }>>['value']['records']>[number];
const wireRecords = (term: bigint, ...records: WireRecordInit[]) =>
  wire({ replicaId: 'r1', term, body: { case: 'records', value: { records } } });
const unknownField = (no: number) => ({ no, wireType: WireType.LengthDelimited, data: new Uint8Array([1, 0]) });
const commit = (over: Record<string, unknown> = {}): WireRecordInit => ({
  record: {
    case: 'matchCommit',
    value: {
      matchId: 'm',
      tickets: [{ ticketId: 't', position: 3n }],
      rulesetId: 'r',
      engineOutput: new Uint8Array([1]),
      atMs: 5n,
      ...over,
    },
  },
});

function decodeError(bytes: Uint8Array): LogDecodeError {
  try {
    decodeLogEntry(bytes);
  } catch (err) {
    expect(err).toBeInstanceOf(LogDecodeError);
    return err as LogDecodeError;
  }
  throw new Error('decoded a corrupt entry');
}

function encodeError(entry: LogEntry): LogEncodeError {
  try {
    encodeLogEntry(entry);
  } catch (err) {
    expect(err).toBeInstanceOf(LogEncodeError);
    return err as LogEncodeError;
  }
  throw new Error('encoded an entry that cannot be written exactly');
}

/** What applying a run's records gave, compared byte for byte (changes as JSON, bytes as byte lists). */
const appliedBytes = (r: Run) =>
  r.applied.map(({ applied }) => ({
    ...applied,
    changes: JSON.stringify(applied.changes, (_k, v) => (typeof v === 'bigint' ? `${v}` : v instanceof Uint8Array ? [...v] : v)),
  }));

describe('the log codec', () => {
  it('gives back every record of every type exactly', () => {
    fc.assert(
      fc.property(entryArb, (entry) => {
        const decoded = decodeLogEntry(encodeLogEntry(entry));
        // toStrictEqual also tells a Buffer from a Uint8Array and a number from a bigint. The clone turns
        // fast-check's null-prototype records into plain objects like the decoder's.
        expect(comparable(decoded)).toStrictEqual(structuredClone(comparable(entry)));
      }),
      { numRuns: 300 },
    );
    // Every record type was drawn above (fast-check's oneof covers them); one of each, to be sure.
    for (const [type, arb] of Object.entries(recordArbs)) {
      const [record] = fc.sample(arb as fc.Arbitrary<QueueRecord>, { numRuns: 1, seed: 7 });
      const entry: LogEntry = { kind: 'records', replicaId: 'r1', term: 3, records: [record!] };
      expect(comparable(decodeLogEntry(encodeLogEntry(entry))), type).toStrictEqual(structuredClone(comparable(entry)));
    }
  });

  it('reads an entry of ticket creations without the generic decoder, as that decoder would, and leaves every other entry to it', () => {
    const creates = fc
      .tuple(fc.array(recordArbs['ticket.create'], { minLength: 1, maxLength: 8 }), fc.string({ minLength: 1, maxLength: 12 }))
      .map(([records, replicaId]): LogEntry => ({ kind: 'records', replicaId, term: 0, records }));
    const flip = fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }));
    fc.assert(
      fc.property(fc.oneof(creates, entryArb), fc.option(flip), (entry, flipped) => {
        const bytes = encodeLogEntry(entry);
        if (flipped) bytes[flipped[0] % bytes.length] = flipped[1];
        const quick = ticketCreates(bytes);
        let whole: LogEntry | undefined;
        try {
          whole = decodeWhole(bytes);
        } catch {
          expect(quick).toBeUndefined(); // what the decoder refuses is left to it, to refuse by name
          return;
        }
        if (quick) expect(quick).toStrictEqual(whole);
        expect(ticketCreates(bytes, 'entry')).toStrictEqual(quick);
        const onlyCreates =
          entry.kind === 'records' &&
          entry.term === 0 &&
          entry.records.length > 0 &&
          entry.records.every((r) => r.type === 'ticket.create');
        if (!flipped && onlyCreates) expect(quick).toBeDefined();
      }),
      { numRuns: 1000 },
    );
  });

  it('gives back a term claim', () => {
    const claim: LogEntry = { kind: 'claim', replicaId: 'replica-2', incarnation: '5d0c2f3e' };
    expect(decodeLogEntry(encodeLogEntry(claim))).toStrictEqual(claim);
  });

  it('decodes bytes into records of their own: plain Uint8Array, not views of the entry', () => {
    const ticket = toBinary(TicketSchema, create(TicketSchema, { id: 't1', queueId: 'q' }));
    const bytes = Buffer.from(
      encodeLogEntry({ kind: 'records', replicaId: 'r1', term: 0, records: [{ type: 'ticket.create', ticketId: 't1', ticket }] }),
    );
    const [decoded] = (decodeLogEntry(bytes) as Extract<LogEntry, { kind: 'records' }>).records;
    bytes.fill(0);
    expect(decoded).toStrictEqual({ type: 'ticket.create', ticketId: 't1', ticket });
  });

  it("decodes a replay's entry into views of one copy of it (TicketCopies 'entry'), not of the bytes given", () => {
    const tickets = ['t1', 't2', 't3'].map((id) => toBinary(TicketSchema, create(TicketSchema, { id, queueId: 'q' })));
    const records: QueueRecord[] = tickets.map((ticket, i) => ({ type: 'ticket.create', ticketId: `t${i + 1}`, ticket }));
    const bytes = Buffer.from(encodeLogEntry({ kind: 'records', replicaId: 'r1', term: 0, records }));
    const decoded = (decodeLogEntry(bytes, 'entry') as Extract<LogEntry, { kind: 'records' }>).records as Extract<
      QueueRecord,
      { type: 'ticket.create' }
    >[];
    bytes.fill(0);
    expect(decoded).toStrictEqual(records);
    const buffers = new Set(decoded.map((r) => r.ticket.buffer));
    expect(buffers.size).toBe(1);
    expect(buffers.has(bytes.buffer)).toBe(false);
  });

  it('records applied after the trip change a queue exactly as the originals do: store changes, outcomes, results', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 60 }), fc.integer({ min: 1, max: 5 }), async (ops, batches) => {
        const original = await run(ops);
        const records = original.applied.map((a) => a.record);
        // Split into `batches` entries, as a leader's appends would be.
        const replica = freshRun();
        const size = Math.ceil(records.length / batches) || 1;
        for (let i = 0; i < records.length; i += size) {
          const bytes = encodeLogEntry({ kind: 'records', replicaId: 'leader', term: 2, records: records.slice(i, i + size) });
          const decoded = decodeLogEntry(bytes) as Extract<LogEntry, { kind: 'records' }>;
          for (const record of decoded.records) await applyRecord(replica, record);
        }
        expect(appliedBytes(replica)).toEqual(appliedBytes(original));
        expect(replica.store.loadQueue('state.q')).toEqual(original.store.loadQueue('state.q'));
      }),
      { numRuns: 150 },
    );
  });

  describe('refuses a corrupt entry by name', () => {
    it('truncated: every strict prefix of an entry', () => {
      fc.assert(
        fc.property(entryArb, fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (entry, cut) => {
          const bytes = encodeLogEntry(entry);
          const err = decodeError(bytes.subarray(0, Math.floor(bytes.length * cut)));
          expect(err.field).toMatch(/^(entry|body|replica_id)$/);
        }),
        { numRuns: 300 },
      );
    });

    it.each<[string, Uint8Array, string, RegExp]>([
      ['a record without its case', wireRecords(1n, {}), 'records[0]', /has no record/],
      ['a match without its time', wireRecords(1n, commit({ atMs: undefined })), 'records[0].match_commit.at_ms', /is missing/],
      [
        'a match without its id (present but empty is a value)',
        wireRecords(1n, commit({ matchId: undefined })),
        'records[0].match_commit.match_id',
        /is missing/,
      ],
      [
        'a ticket seen without a position',
        wireRecords(1n, commit({ tickets: [{ ticketId: 't' }] })),
        'records[0].match_commit.tickets[0].position',
        /is missing/,
      ],
      [
        'a negative position',
        wireRecords(1n, commit({ tickets: [{ ticketId: 't', position: -1n }] })),
        'records[0].match_commit.tickets[0].position',
        /-1 is out of range/,
      ],
      [
        'a position beyond 2^53-1',
        wireRecords(1n, commit({ tickets: [{ ticketId: 't', position: 1n << 53n }] })),
        'records[0].match_commit.tickets[0].position',
        /out of range/,
      ],
      [
        'a chunk size of 0',
        wireRecords(0n, {
          record: { case: 'poolClear', value: { reason: RemovalReason.CLEAR_COMMAND, atMs: 1n, operationId: 'o', chunkSize: 0 } },
        }),
        'records[0].pool_clear.chunk_size',
        /is 0/,
      ],
      [
        'a clear without its reason',
        wireRecords(0n, { record: { case: 'poolClear', value: { atMs: 1n, operationId: 'o', chunkSize: 10 } } }),
        'records[0].pool_clear.reason',
        /is missing/,
      ],
      [
        'an unknown removal reason',
        wireRecords(1n, {
          record: {
            case: 'ticketsEvict',
            value: {
              evictions: [
                { ticket: { ticketId: 't', position: 1n }, eviction: { kind: { case: 'removedReason', value: 99 as RemovalReason } } },
              ],
              atMs: 1n,
              operationId: 'o',
              chunkSize: 1,
            },
          },
        }),
        'records[0].tickets_evict.evictions[0].eviction.removed_reason',
        /99 is not a known removal reason/,
      ],
      [
        'an eviction without its kind',
        wireRecords(1n, {
          record: {
            case: 'ticketsEvict',
            value: { evictions: [{ ticket: { ticketId: 't', position: 1n }, eviction: {} }], atMs: 1n, operationId: 'o', chunkSize: 1 },
          },
        }),
        'records[0].tickets_evict.evictions[0].eviction',
        /missing its kind/,
      ],
      [
        'a backfill post without its request',
        wireRecords(0n, { record: { case: 'backfillCreate', value: {} } }),
        'records[0].backfill_create.request',
        /is missing/,
      ],
      [
        'ticket bytes that are not a Ticket',
        wireRecords(0n, { record: { case: 'ticketCreate', value: { ticket: new Uint8Array([0xff, 0xff]) } } }),
        'records[0].ticket_create.ticket',
        /is not a Ticket/,
      ],
      [
        'a Ticket without an id',
        wireRecords(0n, {
          record: { case: 'ticketCreate', value: { ticket: toBinary(TicketSchema, create(TicketSchema, { queueId: 'q' })) } },
        }),
        'records[0].ticket_create.ticket',
        /without an id/,
      ],
      ['a leader record in an unfenced entry', wireRecords(0n, commit()), 'term', /is 0 but records\[0\] is match.commit/],
      ['a term beyond 2^53-1', wireRecords(1n << 60n, commit()), 'term', /out of range/],
      ['an entry without a body', wire({ replicaId: 'r1', term: 1n }), 'body', /is missing/],
      [
        'an entry without its replica',
        wire({ term: 1n, body: { case: 'records', value: { records: [commit()] } } }),
        'replica_id',
        /is missing/,
      ],
      ['no bytes at all', new Uint8Array(), 'replica_id', /is missing/],
      [
        'a claim with a term',
        wire({ replicaId: 'r1', term: 4n, body: { case: 'claim', value: { incarnation: 'i' } } }),
        'term',
        /on a claim/,
      ],
      ['a claim without its incarnation', wire({ replicaId: 'r1', body: { case: 'claim', value: {} } }), 'claim.incarnation', /is missing/],
      [
        'an unknown record case (a newer writer)',
        wire({ replicaId: 'r1', term: 1n, body: { case: 'records', value: { records: [{}] } } }, (e) => {
          firstRecord(e).$unknown = [unknownField(40)];
        }),
        'records[0]',
        /fields this version does not know \(numbers 40\)/,
      ],
      [
        'an unknown field in a known record',
        wire({ replicaId: 'r1', term: 1n, body: { case: 'records', value: { records: [commit()] } } }, (e) => {
          const { record } = firstRecord(e);
          if (record.case === 'matchCommit') record.value.$unknown = [unknownField(9)];
        }),
        'records[0].match_commit',
        /numbers 9/,
      ],
    ])('%s', (_name, bytes, field, problem) => {
      const err = decodeError(bytes);
      expect(err.field).toBe(field);
      expect(err.message).toMatch(problem);
    });
  });

  describe('refuses to write a record it cannot give back exactly', () => {
    const entry = (record: QueueRecord, term = 1): LogEntry => ({ kind: 'records', replicaId: 'r1', term, records: [record] });
    const seen = { matchId: 'm', rulesetId: 'r', engineOutput: new Uint8Array(), atMs: 5 };

    it.each<[string, LogEntry, string]>([
      ['a fractional time', entry({ type: 'match.commit', ...seen, tickets: [], atMs: 1.5 }), 'records[0].match_commit.at_ms'],
      [
        'a negative position',
        entry({ type: 'match.commit', ...seen, tickets: [{ ticketId: 't', position: -1 }] }),
        'records[0].match_commit.tickets[0].position',
      ],
      [
        'ticket bytes of another ticket',
        entry({ type: 'ticket.create', ticketId: 'a', ticket: toBinary(TicketSchema, create(TicketSchema, { id: 'b' })) }),
        'records[0].ticket_create.ticket',
      ],
      ['a lone surrogate', entry({ type: 'ticket.cancel', ticketId: 'x\uD800' }), 'records[0].ticket_cancel.ticket_id'],
      ['a leader record at term 0', entry({ type: 'resolved.forget', tickets: [] }, 0), 'term'],
      [
        'an unspecified removal reason',
        entry({ type: 'pool.clear', reason: RemovalReason.REMOVAL_REASON_UNSPECIFIED, atMs: 1, operationId: 'o', chunkSize: 1 }),
        'records[0].pool_clear.reason',
      ],
    ])('%s', (_name, bad, field) => {
      expect(encodeError(bad).field).toBe(field);
    });
  });

  it('writes 1,000 ticket creations in about the tickets own bytes', () => {
    const records: QueueRecord[] = Array.from({ length: 1000 }, (_, i) => {
      const id = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      const init = { id, queueId: 'ranked-eu', createdAt: { seconds: 1_750_000_000n, nanos: 123_000_000 }, engineInput: party(1) };
      const bare = toBinary(TicketSchema, create(TicketSchema, init)).length;
      // Metadata pads every ticket to 200 bytes (its tag and length take 2).
      const ticket = toBinary(TicketSchema, create(TicketSchema, { ...init, metadata: new Uint8Array(200 - bare - 2) }));
      return { type: 'ticket.create', ticketId: id, ticket };
    });
    const ticketBytes = records.reduce((sum, r) => sum + (r.type === 'ticket.create' ? r.ticket.length : 0), 0);
    expect(ticketBytes).toBe(200_000);

    const entry: LogEntry = { kind: 'records', replicaId: 'replica-1', term: 0, records };
    decodeLogEntry(encodeLogEntry(entry)); // warm up: the timing printed is a batch's in a running replica
    const t0 = performance.now();
    const bytes = encodeLogEntry(entry);
    const t1 = performance.now();
    const decoded = decodeLogEntry(bytes);
    const t2 = performance.now();
    expect(comparable(decoded)).toStrictEqual(comparable(entry));
    const overhead = bytes.length / ticketBytes - 1;
    console.log(
      `log entry of 1,000 ticket.create: ${bytes.length} bytes for ${ticketBytes} ticket bytes (+${(overhead * 100).toFixed(1)}%); ` +
        `encode ${(t1 - t0).toFixed(1)} ms, decode ${(t2 - t1).toFixed(1)} ms`,
    );
    expect(overhead).toBeLessThan(0.05);
  });
});
