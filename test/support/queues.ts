// Helpers for the tests: queue files (1v1 with options, small limits, several rulesets), polling, raw gRPC calls
// (bytes in, status out), the gRPC health check, and engine inputs of an exact serialized size.
import { create, toBinary } from '@bufbuild/protobuf';
import { credentials, makeGenericClientConstructor, Metadata, type Client, type ServiceError as GrpcError } from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { stringify } from 'yaml';
import { EngineInputSchema } from '../../src/gen/matchmaker/engines/standard/v1/engine_pb.js';
import { httpRequest, type GrpcMethod, type HttpResult } from './transports.js';
import type { TestService } from './service.js';

export interface DuelQueueOptions {
  /** A match needs a host within this latency of both players (require_host + max_latency_ms). */
  hostWithinMs?: number;
  /** More keys of the duel ruleset, in the file's own names (e.g. `{ max_latency_ms: 100 }`). */
  ruleset?: Record<string, unknown>;
  /** The `outcomes` section (e.g. `{ sink: 'webhook', batch_chunk_size: 1, webhook: {...} }`). */
  outcomes?: Record<string, unknown>;
  /** More keys of `config` (e.g. `{ terminal_retention_ttl_secs: 600 }` or an `engine` section). */
  config?: Record<string, unknown>;
}

/**
 * A 1v1 queue file (ruleset "duel"). The second argument is either the options or, alone, `hostWithinMs`:
 * with it a match needs a host that close to both players.
 */
export function duelQueue(tickIntervalMs: number, options: number | DuelQueueOptions = {}): string {
  const o = typeof options === 'number' ? { hostWithinMs: options } : options;
  const host = o.hostWithinMs === undefined ? {} : { require_host: true, max_latency_ms: o.hostWithinMs };
  return stringify({
    config: {
      tick_interval_ms: tickIntervalMs,
      ...o.config,
      ...(o.outcomes ? { outcomes: o.outcomes } : {}),
      rulesets: [{ id: 'duel', teams: 2, team_size: 1, ...host, ...o.ruleset }],
    },
  });
}

/** A queue with one 2x5 ruleset and 64-byte limits on engine_input and metadata. */
export const SMALL_LIMITS_QUEUE = `
config:
  tick_interval_ms: 3600000
  limits:
    max_engine_input_bytes: 64
    max_metadata_bytes: 64
  rulesets:
    - id: 5v5
      teams: 2
      team_size: 5
`;
export const SMALL_LIMIT_BYTES = 64;

/** A queue with two rulesets: duel (teams of 1) and squads (teams of 3). */
export const MULTI_RULESET_QUEUE = `
config:
  tick_interval_ms: 3600000
  rulesets:
    - id: duel
      teams: 2
      team_size: 1
    - id: squads
      teams: 4
      team_size: 3
`;

/**
 * Calls `attempt` until `done` accepts its result (or the time is up: then the last result is returned, so
 * the caller's assertion fails with what was actually seen).
 */
export async function pollUntil<T>(
  attempt: () => Promise<T>,
  done: (value: T) => boolean,
  timeoutMs = 10_000,
  intervalMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await attempt();
    if (done(value) || Date.now() >= deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The admin view of one ticket (200 with its state, or 404). */
export function adminTicket(service: TestService, queueId: string, ticketId: string): Promise<HttpResult> {
  return httpRequest(service, 'GET', `/admin/v1/queues/${encodeURIComponent(queueId)}/tickets/${encodeURIComponent(ticketId)}`);
}

export interface RawGrpcResult {
  /** Numeric gRPC status code; 0 on success. */
  code: number;
  details: string;
  metadata: Metadata | undefined;
  response: Buffer | undefined;
}

const identity = (b: Buffer) => b;

/**
 * A client that sends the given bytes as the request of `method` (full path, e.g.
 * `/matchmaker.core.v1.MatchmakerService/CreateTicket`) without any encoding of its own.
 */
export function rawGrpcClient(service: TestService): { call(path: string, bytes: Uint8Array): Promise<RawGrpcResult>; close(): void } {
  const clients = new Map<string, Client & Record<string, GrpcMethod>>();
  const clientFor = (path: string) => {
    let client = clients.get(path);
    if (!client) {
      const Ctor = makeGenericClientConstructor(
        {
          Raw: {
            path,
            requestStream: false,
            responseStream: false,
            requestSerialize: identity,
            requestDeserialize: identity,
            responseSerialize: identity,
            responseDeserialize: identity,
          },
        },
        'Raw',
      );
      client = new Ctor(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure()) as Client & Record<string, GrpcMethod>;
      clients.set(path, client);
    }
    return client;
  };
  return {
    call(path, bytes) {
      return new Promise((resolve) => {
        clientFor(path).Raw!(Buffer.from(bytes), new Metadata(), (err: GrpcError | null, res: Buffer | undefined) => {
          if (err) resolve({ code: err.code, details: err.details, metadata: err.metadata, response: undefined });
          else resolve({ code: 0, details: '', metadata: undefined, response: res });
        });
      });
    },
    close() {
      for (const c of clients.values()) c.close();
    },
  };
}

/** grpc.health.v1.Health/Check against the service; resolves with the serving status name. */
export function healthClient(service: TestService): { check(name: string): Promise<string>; close(): void } {
  const Health = makeGenericClientConstructor(healthService, 'Health');
  const client = new Health(`127.0.0.1:${service.grpcPort}`, credentials.createInsecure()) as unknown as Client &
    Record<string, GrpcMethod>;
  return {
    check: (name) =>
      new Promise((resolve, reject) =>
        client.Check!({ service: name }, (err: Error | null, r: { status: string }) => (err ? reject(err) : resolve(r.status))),
      ),
    close: () => client.close(),
  };
}

/** A serialized EngineInput of one player that is exactly `size` bytes long (16 <= size, not at a varint boundary). */
export function engineInputOfSize(size: number, mmr = 0.5): Uint8Array {
  const encode = (idLength: number) =>
    toBinary(EngineInputSchema, create(EngineInputSchema, { players: [{ playerId: 'p'.repeat(idLength), mmr }] }));
  // The encoded length grows with the player id's length: search for the id length that hits `size`.
  let lo = 1;
  let hi = size;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const bytes = encode(mid);
    if (bytes.length === size) return bytes;
    if (bytes.length < size) lo = mid + 1;
    else hi = mid - 1;
  }
  throw new Error(`no single-player EngineInput of exactly ${size} bytes`);
}
