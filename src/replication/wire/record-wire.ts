// A record of records.ts and its message in log.proto, both ways (record-codec.ts frames them into log
// entries). Each direction checks what the other relies on: the encoder refuses a value it cannot write
// exactly, the decoder refuses a missing, out-of-range or unknown field, naming it by its path in the entry
// (the checks are field-checks.ts, shared with checkpoint-codec.ts and checkpoint-decode.ts).
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { quote } from '../../errors.js';
import { RemovalReason, RemovalReasonSchema } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import {
  BackfillAtSchema,
  EvictionSchema,
  QueueRecordSchema,
  TicketAtSchema,
  type BackfillAt as WireBackfillAt,
  type Eviction as WireEviction,
  type QueueRecord as WireRecord,
  type TicketAt as WireTicketAt,
} from '../../gen/matchmaker/replication/v1/log_pb.js';
import type { BackfillAt, Eviction, QueueRecord, TicketAt } from '../../queue/records.js';
import { copy, known, LogDecodeError, LogEncodeError, num, present, text, ticketIdOf, whole } from './field-checks.js';

// ---- TypeScript record -> wire ----------------------------------------------------------------------------

type WireCase = NonNullable<MessageInitShape<typeof QueueRecordSchema>['record']>;

export function recordToWire(rec: QueueRecord, path: string): WireCase {
  switch (rec.type) {
    case 'ticket.create': {
      const p = `${path}.ticket_create.ticket`;
      const id = ticketIdOf(rec.ticket, (problem, cause) => new LogEncodeError(p, problem, { cause }));
      if (id !== rec.ticketId) throw new LogEncodeError(p, `holds ticket id ${quote(id)}, not the record's ${quote(rec.ticketId)}`);
      return { case: 'ticketCreate', value: { ticket: rec.ticket } };
    }
    case 'ticket.cancel':
      return { case: 'ticketCancel', value: { ticketId: text(rec.ticketId, `${path}.ticket_cancel.ticket_id`) } };
    case 'tickets.reactivate': {
      const p = `${path}.tickets_reactivate`;
      return {
        case: 'ticketsReactivate',
        value: {
          ticketIds: texts(rec.ticketIds, `${p}.ticket_ids`),
          resolvedSinceMs: whole(rec.resolvedSinceMs, `${p}.resolved_since_ms`),
        },
      };
    }
    case 'backfill.create':
      return { case: 'backfillCreate', value: { request: rec.request } };
    case 'backfills.cancel':
      return { case: 'backfillsCancel', value: { backfillIds: texts(rec.backfillIds, `${path}.backfills_cancel.backfill_ids`) } };
    case 'pool.clear': {
      const p = `${path}.pool_clear`;
      return { case: 'poolClear', value: { reason: reason(rec.reason, `${p}.reason`), ...chunked(rec, p) } };
    }
    case 'match.commit': {
      const p = `${path}.match_commit`;
      return {
        case: 'matchCommit',
        value: {
          matchId: text(rec.matchId, `${p}.match_id`),
          tickets: rec.tickets.map((t, i) => wireTicketAt(t, `${p}.tickets[${i}]`)),
          rulesetId: text(rec.rulesetId, `${p}.ruleset_id`),
          engineOutput: rec.engineOutput,
          atMs: whole(rec.atMs, `${p}.at_ms`),
        },
      };
    }
    case 'backfill.fill': {
      const p = `${path}.backfill_fill`;
      return {
        case: 'backfillFill',
        value: {
          backfill: wireBackfillAt(rec.backfill, `${p}.backfill`),
          fillId: text(rec.fillId, `${p}.fill_id`),
          tickets: rec.tickets.map((t, i) => wireTicketAt(t, `${p}.tickets[${i}]`)),
          atMs: whole(rec.atMs, `${p}.at_ms`),
        },
      };
    }
    case 'tickets.expire': {
      const p = `${path}.tickets_expire`;
      return {
        case: 'ticketsExpire',
        value: { tickets: rec.tickets.map((t, i) => wireTicketAt(t, `${p}.tickets[${i}]`)), ...chunked(rec, p) },
      };
    }
    case 'backfills.expire': {
      const p = `${path}.backfills_expire`;
      return {
        case: 'backfillsExpire',
        value: { backfills: rec.backfills.map((b, i) => wireBackfillAt(b, `${p}.backfills[${i}]`)), ...chunked(rec, p) },
      };
    }
    case 'tickets.evict': {
      const p = `${path}.tickets_evict`;
      const evictions = rec.evictions.map((e, i) => ({
        ticket: wireTicketAt(e, `${p}.evictions[${i}].ticket`),
        eviction: wireEviction(e.eviction, `${p}.evictions[${i}].eviction`),
      }));
      return { case: 'ticketsEvict', value: { evictions, ...chunked(rec, p) } };
    }
    case 'backfills.evict': {
      const p = `${path}.backfills_evict`;
      const evictions = rec.evictions.map((e, i) => ({
        backfill: wireBackfillAt(e, `${p}.evictions[${i}].backfill`),
        eviction: wireEviction(e.eviction, `${p}.evictions[${i}].eviction`),
      }));
      return { case: 'backfillsEvict', value: { evictions, ...chunked(rec, p) } };
    }
    case 'resolved.forget': {
      const p = `${path}.resolved_forget.tickets`;
      const tickets = rec.tickets.map((t, i) => ({
        ticketId: text(t.ticketId, `${p}[${i}].ticket_id`),
        matchId: text(t.matchId, `${p}[${i}].match_id`),
      }));
      return { case: 'resolvedForget', value: { tickets } };
    }
    case 'delivery.advance':
      return { case: 'deliveryAdvance', value: { sequence: rec.sequence } };
    case 'delivery.park': {
      const p = `${path}.delivery_park`;
      const { sequence, attempts, lastError, parkedAtMs } = rec.parked;
      if (!Number.isInteger(attempts) || attempts < 0 || attempts > 0xffff_ffff) {
        throw new LogEncodeError(`${p}.attempts`, `${attempts} is not an integer in 0..2^32-1`);
      }
      return {
        case: 'deliveryPark',
        value: { sequence, attempts, lastError: text(lastError, `${p}.last_error`), parkedAtMs: whole(parkedAtMs, `${p}.parked_at_ms`) },
      };
    }
    case 'delivery.release':
      return { case: 'deliveryRelease', value: {} };
    case 'consumer.advance':
      return {
        case: 'consumerAdvance',
        value: {
          consumer: text(rec.consumer, `${path}.consumer_advance.consumer`),
          sequence: rec.sequence,
          ...(rec.owner === undefined ? {} : { owner: text(rec.owner, `${path}.consumer_advance.owner`) }),
        },
      };
  }
}

const wireTicketAt = (t: TicketAt, path: string) =>
  create(TicketAtSchema, { ticketId: text(t.ticketId, `${path}.ticket_id`), position: whole(t.position, `${path}.position`, 0) });

const wireBackfillAt = (b: BackfillAt, path: string) =>
  create(BackfillAtSchema, { backfillId: text(b.backfillId, `${path}.backfill_id`), version: whole(b.version, `${path}.version`, 0) });

function wireEviction(e: Eviction, path: string): WireEviction {
  return create(
    EvictionSchema,
    e.kind === 'orphaned'
      ? { kind: { case: 'orphanedRulesetId', value: text(e.rulesetId, `${path}.orphaned_ruleset_id`) } }
      : { kind: { case: 'removedReason', value: reason(e.reason, `${path}.removed_reason`) } },
  );
}

function chunked(rec: { atMs: number; operationId: string; chunkSize: number }, path: string) {
  if (!Number.isInteger(rec.chunkSize) || rec.chunkSize < 1 || rec.chunkSize > 0xffff_ffff) {
    throw new LogEncodeError(`${path}.chunk_size`, `${rec.chunkSize} is not an integer in 1..2^32-1`);
  }
  return { atMs: whole(rec.atMs, `${path}.at_ms`), operationId: text(rec.operationId, `${path}.operation_id`), chunkSize: rec.chunkSize };
}

const texts = (values: readonly string[], path: string) => values.map((v, i) => text(v, `${path}[${i}]`));

function reason(value: RemovalReason, path: string): RemovalReason {
  if (value === RemovalReason.REMOVAL_REASON_UNSPECIFIED || RemovalReasonSchema.value[value] === undefined) {
    throw new LogEncodeError(path, `${value} is not a removal reason`);
  }
  return value;
}

// ---- wire -> TypeScript record ----------------------------------------------------------------------------

export function recordFromWire(wire: WireRecord, path: string): QueueRecord {
  known(wire, path);
  const { record } = wire;
  if (record.case === undefined) throw new LogDecodeError(path, 'has no record (an unknown record case, or none)');
  const p = `${path}.${CASE_NAMES.get(record.case)}`;
  const v = record.value;
  known(v, p);
  switch (record.case) {
    case 'ticketCreate': {
      const ticket = copy(present(record.value.ticket, `${p}.ticket`));
      const ticketId = ticketIdOf(ticket, (problem, cause) => new LogDecodeError(`${p}.ticket`, problem, { cause }));
      return { type: 'ticket.create', ticketId, ticket };
    }
    case 'ticketCancel':
      return { type: 'ticket.cancel', ticketId: present(record.value.ticketId, `${p}.ticket_id`) };
    case 'ticketsReactivate':
      return {
        type: 'tickets.reactivate',
        ticketIds: record.value.ticketIds,
        resolvedSinceMs: num(record.value.resolvedSinceMs, `${p}.resolved_since_ms`),
      };
    case 'backfillCreate':
      return { type: 'backfill.create', request: present(record.value.request, `${p}.request`) };
    case 'backfillsCancel':
      return { type: 'backfills.cancel', backfillIds: record.value.backfillIds };
    case 'poolClear':
      return { type: 'pool.clear', reason: tsReason(record.value.reason, `${p}.reason`), ...tsChunked(record.value, p) };
    case 'matchCommit': {
      const m = record.value;
      return {
        type: 'match.commit',
        matchId: present(m.matchId, `${p}.match_id`),
        tickets: m.tickets.map((t, i) => tsTicketAt(t, `${p}.tickets[${i}]`)),
        rulesetId: present(m.rulesetId, `${p}.ruleset_id`),
        engineOutput: copy(present(m.engineOutput, `${p}.engine_output`)),
        atMs: num(m.atMs, `${p}.at_ms`),
      };
    }
    case 'backfillFill': {
      const f = record.value;
      return {
        type: 'backfill.fill',
        backfill: tsBackfillAt(present(f.backfill, `${p}.backfill`), `${p}.backfill`),
        fillId: present(f.fillId, `${p}.fill_id`),
        tickets: f.tickets.map((t, i) => tsTicketAt(t, `${p}.tickets[${i}]`)),
        atMs: num(f.atMs, `${p}.at_ms`),
      };
    }
    case 'ticketsExpire':
      return {
        type: 'tickets.expire',
        tickets: record.value.tickets.map((t, i) => tsTicketAt(t, `${p}.tickets[${i}]`)),
        ...tsChunked(record.value, p),
      };
    case 'backfillsExpire':
      return {
        type: 'backfills.expire',
        backfills: record.value.backfills.map((b, i) => tsBackfillAt(b, `${p}.backfills[${i}]`)),
        ...tsChunked(record.value, p),
      };
    case 'ticketsEvict': {
      const evictions = record.value.evictions.map((e, i) => {
        const q = `${p}.evictions[${i}]`;
        known(e, q);
        return {
          ...tsTicketAt(present(e.ticket, `${q}.ticket`), `${q}.ticket`),
          eviction: tsEviction(present(e.eviction, `${q}.eviction`), `${q}.eviction`),
        };
      });
      return { type: 'tickets.evict', evictions, ...tsChunked(record.value, p) };
    }
    case 'backfillsEvict': {
      const evictions = record.value.evictions.map((e, i) => {
        const q = `${p}.evictions[${i}]`;
        known(e, q);
        return {
          ...tsBackfillAt(present(e.backfill, `${q}.backfill`), `${q}.backfill`),
          eviction: tsEviction(present(e.eviction, `${q}.eviction`), `${q}.eviction`),
        };
      });
      return { type: 'backfills.evict', evictions, ...tsChunked(record.value, p) };
    }
    case 'resolvedForget': {
      const tickets = record.value.tickets.map((t, i) => {
        const q = `${p}.tickets[${i}]`;
        known(t, q);
        return { ticketId: present(t.ticketId, `${q}.ticket_id`), matchId: present(t.matchId, `${q}.match_id`) };
      });
      return { type: 'resolved.forget', tickets };
    }
    case 'deliveryAdvance':
      return { type: 'delivery.advance', sequence: present(record.value.sequence, `${p}.sequence`) };
    case 'deliveryPark': {
      const v = record.value;
      return {
        type: 'delivery.park',
        parked: {
          sequence: present(v.sequence, `${p}.sequence`),
          attempts: present(v.attempts, `${p}.attempts`),
          lastError: present(v.lastError, `${p}.last_error`),
          parkedAtMs: num(v.parkedAtMs, `${p}.parked_at_ms`),
        },
      };
    }
    case 'deliveryRelease':
      return { type: 'delivery.release' };
    case 'consumerAdvance':
      return {
        type: 'consumer.advance',
        consumer: present(record.value.consumer, `${p}.consumer`),
        sequence: present(record.value.sequence, `${p}.sequence`),
        ...(record.value.owner === undefined ? {} : { owner: record.value.owner }),
      };
  }
}

function tsTicketAt(t: WireTicketAt, path: string): TicketAt {
  known(t, path);
  return { ticketId: present(t.ticketId, `${path}.ticket_id`), position: num(t.position, `${path}.position`, 0n) };
}

function tsBackfillAt(b: WireBackfillAt, path: string): BackfillAt {
  known(b, path);
  return { backfillId: present(b.backfillId, `${path}.backfill_id`), version: num(b.version, `${path}.version`, 0n) };
}

function tsEviction(e: WireEviction, path: string): Eviction {
  known(e, path);
  switch (e.kind.case) {
    case 'orphanedRulesetId':
      return { kind: 'orphaned', rulesetId: e.kind.value };
    case 'removedReason':
      return { kind: 'removed', reason: tsReason(e.kind.value, `${path}.removed_reason`) };
    default:
      throw new LogDecodeError(path, 'is missing its kind (orphaned_ruleset_id or removed_reason)');
  }
}

function tsChunked(w: { atMs?: bigint; operationId?: string; chunkSize?: number }, path: string) {
  const chunkSize = present(w.chunkSize, `${path}.chunk_size`);
  if (chunkSize < 1) throw new LogDecodeError(`${path}.chunk_size`, 'is 0 (at least 1)');
  return { atMs: num(w.atMs, `${path}.at_ms`), operationId: present(w.operationId, `${path}.operation_id`), chunkSize };
}

function tsReason(value: RemovalReason, path: string): RemovalReason {
  if (value === RemovalReason.REMOVAL_REASON_UNSPECIFIED) throw new LogDecodeError(path, 'is missing');
  if (RemovalReasonSchema.value[value] === undefined) throw new LogDecodeError(path, `${value} is not a known removal reason`);
  return value;
}

/** Each record case's field as the schema names it (ticketCreate: ticket_create), for the paths in errors. */
const CASE_NAMES: ReadonlyMap<string, string> = new Map(QueueRecordSchema.fields.map((f) => [f.localName, f.name]));
