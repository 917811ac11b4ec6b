// The canonical protobuf JSON of an outcome (matchmaker.outcomes.v1.Outcome), as the admin API, the webhook
// sink's JSON encoding and the WebSocket stream write it. Written by hand: the generated code carries no JSON
// types (protoc-gen-es runs without `json_types`). Proto3 JSON leaves out a field at its default (0, '', an
// empty list, an unset optional), so such fields are optional here; uint64 and bytes are strings (decimal,
// base64), timestamps RFC 3339 strings, enums their names.

export interface TicketJson {
  id: string;
  queueId: string;
  createdAt: string;
  engineInput?: string;
  rulesetIds?: string[];
  metadata?: string;
}

export interface BackfillRequestJson {
  id: string;
  queueId: string;
  createdAt: string;
  matchId: string;
  rulesetId?: string;
  slotsRequested: number;
  engineInput?: string;
  metadata?: string;
}

export interface MatchJson {
  id: string;
  tickets: TicketJson[];
  engineOutput?: string;
  createdAt: string;
  rulesetId: string;
}

export interface BackfillJson {
  id: string;
  request: BackfillRequestJson;
  assignedTickets: TicketJson[];
  createdAt: string;
}

/** Which chunk of one operation's outcomes this is (`chunkIndex` 0 is left out). */
export interface OutcomeBatchJson {
  operationId: string;
  chunkIndex?: number;
  chunkCount: number;
}

export interface OutcomeJson {
  id: string;
  kind: string;
  queueId: string;
  occurredAt: string;
  producerId: string;
  producerSequence: string;
  // The payload (a oneof): exactly one of these, named after `kind`.
  matchCreated?: { match: MatchJson };
  backfillCreated?: { backfill: BackfillJson };
  ticketsExpired?: { ticketIds: string[]; batch: OutcomeBatchJson };
  ticketsRemoved?: { ticketIds: string[]; batch: OutcomeBatchJson; reason: string };
  backfillRequestsExpired?: { backfillRequestIds: string[]; batch: OutcomeBatchJson };
  backfillRequestsRemoved?: { backfillRequestIds: string[]; batch: OutcomeBatchJson; reason: string };
  ticketOrphaned?: { ticket: TicketJson; rulesetId: string };
  backfillRequestOrphaned?: { backfillRequest: BackfillRequestJson; rulesetId: string };
}

/** A frame of the WebSocket outcome stream, as a client reads it (docs/outcomes-websocket.md). */
export type StreamFrame =
  | { type: 'ready'; after: string; consumer?: string; offsets: 'service' | 'queue' }
  | { type: 'outcome'; offset: string; outcome: OutcomeJson }
  | { type: 'acked'; offset: string; consumer?: string }
  | { type: 'heartbeat' }
  | { type: 'error'; code: string; message: string };
