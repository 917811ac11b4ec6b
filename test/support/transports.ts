// The six operations over either transport, with one result shape, so a behaviour is asserted the same
// way over gRPC and HTTP/JSON.
import { create, fromJson, toJson, type DescMessage, type JsonValue, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import { credentials, makeGenericClientConstructor, Metadata, type Client, type ServiceError as GrpcError } from '@grpc/grpc-js';
import { grpcServiceDefinition, MatchmakerAdminService } from '../../src/api/grpc-definitions.js';
import { ERROR_CODES } from '../../src/api/error-map.js';
import type { ErrorCode } from '../../src/errors.js';
import { BackfillRequestSchema, TicketSchema } from '../../src/gen/matchmaker/core/v1/resources_pb.js';
import {
  CancelBackfillRequestsRequestSchema,
  CancelTicketRequestSchema,
  ClearQueuePoolRequestSchema,
  CreateBackfillRequestRequestSchema,
  CreateTicketRequestSchema,
  MatchmakerService,
  ReactivateTicketsRequestSchema,
  type CancelBackfillRequestsResponse,
  type CancelTicketResponse,
  type ClearQueuePoolResponse,
  type CreateBackfillRequestResponse,
  type CreateTicketResponse,
  type ReactivateTicketsResponse,
} from '../../src/gen/matchmaker/core/v1/service_pb.js';
import type { TestService } from './service.js';

/** A method of a dynamically built grpc-js client. */
export type GrpcMethod = (...args: unknown[]) => unknown;

/** `retryAfter`: the `retry-after` of a rate-limited call (gRPC trailing metadata or HTTP header), in seconds. */
export type Failure = { ok: false; code: ErrorCode; message: string; reason?: string; retryAfter?: string; httpStatus?: number };
export type Result<T> = { ok: true; value: T } | Failure;

export type TicketInit = MessageInitShape<typeof TicketSchema>;
export type BackfillInit = MessageInitShape<typeof BackfillRequestSchema>;

export interface Transport {
  readonly name: 'grpc' | 'http';
  createTicket(ticket: TicketInit): Promise<Result<CreateTicketResponse>>;
  cancelTicket(queueId: string, ticketId: string): Promise<Result<CancelTicketResponse>>;
  reactivateTickets(queueId: string, ticketIds: string[]): Promise<Result<ReactivateTicketsResponse>>;
  createBackfillRequest(request: BackfillInit): Promise<Result<CreateBackfillRequestResponse>>;
  cancelBackfillRequests(queueId: string, backfillIds: string[]): Promise<Result<CancelBackfillRequestsResponse>>;
  clearQueuePool(queueId: string): Promise<Result<ClearQueuePoolResponse>>;
  close(): void;
}

const codeByGrpcStatus = new Map(Object.entries(ERROR_CODES).map(([name, c]) => [c.grpc as number, name as ErrorCode]));

export const MatchmakerClient = makeGenericClientConstructor(grpcServiceDefinition(MatchmakerService), 'MatchmakerService');
const AdminClient = makeGenericClientConstructor(grpcServiceDefinition(MatchmakerAdminService), 'MatchmakerAdminService');

export function grpcClient(service: Pick<TestService, 'grpcPort'>): Client & Record<string, (...args: unknown[]) => unknown> {
  return new MatchmakerClient(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure()) as never;
}

/** A client of matchmaker.admin.v1.MatchmakerAdminService (ExplainTicket, GetQueueStatistics), for grpcUnary. */
export function grpcAdminClient(service: Pick<TestService, 'grpcPort'>): Client {
  return new AdminClient(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure());
}

/** One unary call; resolves with the response or the failure (code name, message, x-svc-reason). */
export function grpcUnary<T>(client: Client, method: string, request: unknown, token?: string): Promise<Result<T>> {
  const metadata = new Metadata();
  if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
  return new Promise((resolve) => {
    (client as unknown as Record<string, GrpcMethod>)[method]!(request, metadata, (err: GrpcError | null, res: T) => {
      if (!err) return resolve({ ok: true, value: res });
      const reason = err.metadata?.get('x-svc-reason')[0];
      const retryAfter = err.metadata?.get('retry-after')[0];
      resolve({
        ok: false,
        code: codeByGrpcStatus.get(err.code) ?? ('UNKNOWN' as ErrorCode),
        message: err.details,
        ...(reason ? { reason: String(reason) } : {}),
        ...(retryAfter ? { retryAfter: String(retryAfter) } : {}),
      });
    });
  });
}

/** `token`: sent as `authorization: Bearer <token>` metadata. */
export function grpcTransport(service: Pick<TestService, 'grpcPort'>, token?: string): Transport {
  const client = grpcClient(service);
  const call = <T>(method: string, schema: DescMessage, init: Record<string, unknown>) =>
    grpcUnary<T>(client, method, create(schema, init as never), token);
  return {
    name: 'grpc',
    createTicket: (ticket) => call('CreateTicket', CreateTicketRequestSchema, { ticket }),
    cancelTicket: (queueId, ticketId) => call('CancelTicket', CancelTicketRequestSchema, { queueId, ticketId }),
    reactivateTickets: (queueId, ticketIds) => call('ReactivateTickets', ReactivateTicketsRequestSchema, { queueId, ticketIds }),
    createBackfillRequest: (backfillRequest) => call('CreateBackfillRequest', CreateBackfillRequestRequestSchema, { backfillRequest }),
    cancelBackfillRequests: (queueId, backfillIds) =>
      call('CancelBackfillRequests', CancelBackfillRequestsRequestSchema, { queueId, backfillIds }),
    clearQueuePool: (queueId) => call('ClearQueuePool', ClearQueuePoolRequestSchema, { queueId }),
    close: () => client.close(),
  };
}

export interface HttpResult {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

export async function httpRequest(
  service: Pick<TestService, 'baseUrl'>,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<HttpResult> {
  const res = await fetch(`${service.baseUrl}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** An HTTP answer as a Result: the JSON body on 200, else the error its body and x-svc-reason header carry. */
export function httpResult(res: HttpResult): Result<Record<string, unknown>> {
  if (res.status === 200) return { ok: true, value: res.body };
  const reason = res.headers.get('x-svc-reason');
  const retryAfter = res.headers.get('retry-after');
  return {
    ok: false,
    code: res.body.code as ErrorCode,
    message: res.body.message as string,
    httpStatus: res.status,
    ...(reason ? { reason } : {}),
    ...(retryAfter ? { retryAfter } : {}),
  };
}

/** `token`: sent as `Authorization: Bearer <token>`. */
export function httpTransport(service: TestService, token?: string): Transport {
  const q = (queueId: string) => encodeURIComponent(queueId);
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  async function call<S extends DescMessage>(method: string, path: string, output: S, body?: JsonValue): Promise<Result<MessageShape<S>>> {
    const result = httpResult(await httpRequest(service, method, path, body, headers));
    return result.ok ? { ok: true, value: fromJson(output, result.value as JsonValue) } : result;
  }
  const out = MatchmakerService.method;
  return {
    name: 'http',
    createTicket: (ticket) =>
      call('POST', `/v1/queues/${q(ticket.queueId ?? '')}/tickets`, out.createTicket.output, {
        ticket: toJson(TicketSchema, create(TicketSchema, ticket)),
      }),
    cancelTicket: (queueId, ticketId) =>
      call('DELETE', `/v1/queues/${q(queueId)}/tickets/${encodeURIComponent(ticketId)}`, out.cancelTicket.output),
    reactivateTickets: (queueId, ticketIds) =>
      call('POST', `/v1/queues/${q(queueId)}/tickets:reactivate`, out.reactivateTickets.output, { ticketIds }),
    createBackfillRequest: (request) =>
      call('POST', `/v1/queues/${q(request.queueId ?? '')}/backfills`, out.createBackfillRequest.output, {
        backfillRequest: toJson(BackfillRequestSchema, create(BackfillRequestSchema, request)),
      }),
    cancelBackfillRequests: (queueId, backfillIds) =>
      call('POST', `/v1/queues/${q(queueId)}/backfills:cancel`, out.cancelBackfillRequests.output, { backfillIds }),
    clearQueuePool: (queueId) => call('POST', `/v1/queues/${q(queueId)}:clear`, out.clearQueuePool.output),
    close: () => undefined,
  };
}

export const TRANSPORTS = [
  ['grpc', grpcTransport],
  ['http', httpTransport],
] as const;
