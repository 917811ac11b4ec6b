// A client that knows nothing but the reflection protocol lists the services, fetches the descriptors
// and calls every method of MatchmakerService and of MatchmakerAdminService (served on the same port), as
// grpcurl does.
import { createRequire } from 'node:module';
import { create, createFileRegistry, fromBinary, toBinary, type DescMessage, type DescService } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, FileDescriptorSetSchema, type FileDescriptorProto } from '@bufbuild/protobuf/wkt';
import { credentials, loadPackageDefinition, makeGenericClientConstructor, type Client } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { service as healthService } from 'grpc-health-check';
import { describe, expect, it } from 'vitest';
import { uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';
import type { GrpcMethod } from '../support/transports.js';

const require = createRequire(import.meta.url);
const reflectionProto = require.resolve('@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto');

const env = useService();

interface ReflectionResponse {
  listServicesResponse?: { service: { name: string }[] };
  fileDescriptorResponse?: { fileDescriptorProto: Buffer[] };
  errorResponse?: { errorCode: number; errorMessage: string };
}

/** One request/response exchange on the ServerReflectionInfo stream. */
function reflect(request: Record<string, unknown>): Promise<ReflectionResponse> {
  const pkg = loadPackageDefinition(loadSync(reflectionProto, { keepCase: false })) as never as {
    grpc: {
      reflection: {
        v1: {
          ServerReflection: new (
            addr: string,
            creds: unknown,
          ) => Client & { ServerReflectionInfo(): NodeJS.ReadWriteStream & { end(): void } };
        };
      };
    };
  };
  const client = new pkg.grpc.reflection.v1.ServerReflection(`127.0.0.1:${env.service.grpcPort}`, credentials.createInsecure());
  return new Promise((resolve, reject) => {
    const stream = client.ServerReflectionInfo();
    stream.on('data', (res: ReflectionResponse) => {
      resolve(res);
      stream.end();
      client.close();
    });
    stream.on('error', reject);
    stream.write(request as never);
  });
}

/** Fetches the file defining `symbol` and, transitively, every file it depends on. */
async function descriptorsFor(symbol: string): Promise<FileDescriptorProto[]> {
  const res = await reflect({ fileContainingSymbol: symbol });
  expect(res.errorResponse).toBeUndefined();
  const files = new Map<string, FileDescriptorProto>();
  for (const bytes of res.fileDescriptorResponse!.fileDescriptorProto) {
    const file = fromBinary(FileDescriptorProtoSchema, bytes);
    files.set(file.name, file);
  }
  for (const file of [...files.values()]) {
    for (const dep of file.dependency) {
      if (files.has(dep)) continue;
      const more = await reflect({ fileByFilename: dep });
      for (const bytes of more.fileDescriptorResponse!.fileDescriptorProto) {
        const f = fromBinary(FileDescriptorProtoSchema, bytes);
        files.set(f.name, f);
      }
    }
  }
  // Dependencies first, as a FileDescriptorSet is read.
  const ordered: FileDescriptorProto[] = [];
  const visit = (file: FileDescriptorProto) => {
    if (ordered.includes(file)) return;
    for (const dep of file.dependency) visit(files.get(dep)!);
    ordered.push(file);
  };
  files.forEach(visit);
  return ordered;
}

describe('server reflection', () => {
  it('lists the matchmaker and health services', async () => {
    const res = await reflect({ listServices: '' });
    const names = res.listServicesResponse!.service.map((s) => s.name);
    expect(names).toContain('matchmaker.core.v1.MatchmakerService');
    expect(names).toContain('grpc.health.v1.Health');
  });

  it('serves the descriptors as declared in proto/, snake_case field names included', async () => {
    const files = await descriptorsFor('matchmaker.core.v1.MatchmakerService');
    const serviceFile = files.find((f) => f.name === 'matchmaker/core/v1/service.proto')!;
    expect(serviceFile.service[0]!.method.map((m) => m.name)).toEqual([
      'CreateTicket',
      'CancelTicket',
      'ReactivateTickets',
      'CreateBackfillRequest',
      'CancelBackfillRequests',
      'ClearQueuePool',
    ]);
    const resources = files.find((f) => f.name === 'matchmaker/core/v1/resources.proto')!;
    const ticket = resources.messageType.find((m) => m.name === 'Ticket')!;
    expect(ticket.field.map((f) => [f.name, f.number])).toEqual([
      ['id', 1],
      ['queue_id', 2],
      ['created_at', 3],
      ['engine_input', 4],
      ['ruleset_ids', 5],
      ['metadata', 6],
    ]);
    const outcomes = await descriptorsFor('matchmaker.outcomes.v1.Outcome');
    const outcome = outcomes
      .find((f) => f.name === 'matchmaker/outcomes/v1/outcomes.proto')!
      .messageType.find((m) => m.name === 'Outcome')!;
    expect(outcome.field.filter((f) => f.number >= 10).map((f) => [f.name, f.number, f.oneofIndex])).toEqual([
      ['match_created', 10, 0],
      ['backfill_created', 11, 0],
      ['tickets_expired', 12, 0],
      ['tickets_removed', 13, 0],
      ['backfill_requests_expired', 14, 0],
      ['backfill_requests_removed', 15, 0],
      ['ticket_orphaned', 16, 0],
      ['backfill_request_orphaned', 17, 0],
    ]);
  });

  it('is enough to call every method with no .proto file', async () => {
    const { call, close } = await reflectedClient('matchmaker.core.v1.MatchmakerService');
    const ticketId = uuid();
    expect((await call('CreateTicket', { ticket: { id: ticketId, queueId: 'test.basic' } })).ticketId).toBe(ticketId);
    await call('CancelTicket', { queueId: 'test.basic', ticketId });
    expect((await call('ReactivateTickets', { queueId: 'test.basic', ticketIds: [ticketId] })).failedTicketIds).toEqual([ticketId]);
    const backfillId = (await call('CreateBackfillRequest', { backfillRequest: { queueId: 'test.basic', matchId: uuid() } }))
      .backfillId as string;
    expect((await call('CancelBackfillRequests', { queueId: 'test.basic', backfillIds: [backfillId] })).failedBackfillIds).toEqual([]);
    expect(await call('ClearQueuePool', { queueId: 'test.basic' })).toMatchObject({ ticketsCleared: 0n, backfillRequestsCleared: 0n });
    close();
  });

  it('lists the admin service beside the core one, and is enough to call its methods', async () => {
    const res = await reflect({ listServices: '' });
    expect(res.listServicesResponse!.service.map((s) => s.name)).toContain('matchmaker.admin.v1.MatchmakerAdminService');
    const core = await reflectedClient('matchmaker.core.v1.MatchmakerService');
    const admin = await reflectedClient('matchmaker.admin.v1.MatchmakerAdminService');
    const ticketId = uuid();
    await core.call('CreateTicket', { ticket: { id: ticketId, queueId: 'test.basic' } });
    expect(await admin.call('ExplainTicket', { queueId: 'test.basic', ticketId })).toMatchObject({ ticketId, state: 'active' });
    const statistics = await admin.call('GetQueueStatistics', { queueId: 'test.basic' });
    expect(statistics).toMatchObject({ queueId: 'test.basic', queue: { ticketsWaiting: 1, playersWaiting: 1 } });
    await core.call('CancelTicket', { queueId: 'test.basic', ticketId });
    core.close();
    admin.close();
  });
});

/** A client of `service` built from nothing but the descriptors reflection serves. */
async function reflectedClient(service: string) {
  const files = await descriptorsFor(service);
  const registry = createFileRegistry(create(FileDescriptorSetSchema, { file: files }));
  const svc = registry.getService(service) as DescService;
  const definition = Object.fromEntries(
    svc.methods.map((m) => [
      m.name,
      {
        path: `/${svc.typeName}/${m.name}`,
        requestStream: false,
        responseStream: false,
        requestSerialize: (x: unknown) => Buffer.from(toBinary(m.input as DescMessage, x as never)),
        requestDeserialize: (b: Buffer) => fromBinary(m.input as DescMessage, b),
        responseSerialize: (x: unknown) => Buffer.from(toBinary(m.output as DescMessage, x as never)),
        responseDeserialize: (b: Buffer) => fromBinary(m.output as DescMessage, b) as unknown,
      },
    ]),
  );
  const Dynamic = makeGenericClientConstructor(definition as never, 'Dynamic');
  const client = new Dynamic(`127.0.0.1:${env.service.grpcPort}`, credentials.createInsecure()) as unknown as Record<string, GrpcMethod> &
    Client;
  const call = (name: string, init: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve, reject) =>
      client[name]!(
        create(registry.getMessage(svc.methods.find((m) => m.name === name)!.input.typeName) as DescMessage, init as never),
        (err: Error | null, res: Record<string, unknown>) => (err ? reject(err) : resolve(res)),
      ),
    );
  return { call, close: () => client.close() };
}

describe('grpc.health.v1.Health', () => {
  it('answers SERVING for the server, MatchmakerService and MatchmakerAdminService once queues are loaded', async () => {
    const Health = makeGenericClientConstructor(healthService, 'Health');
    const client = new Health(`127.0.0.1:${env.service.grpcPort}`, credentials.createInsecure()) as unknown as Record<string, GrpcMethod> &
      Client;
    for (const name of ['', 'matchmaker.core.v1.MatchmakerService', 'matchmaker.admin.v1.MatchmakerAdminService']) {
      const res = await new Promise<{ status: string }>((resolve, reject) =>
        client.Check!({ service: name }, (err: Error | null, r: { status: string }) => (err ? reject(err) : resolve(r))),
      );
      expect(res.status).toBe('SERVING');
    }
    client.close();
  });

  it('HTTP probes answer 200 when serving', async () => {
    expect((await fetch(`${env.service.baseUrl}/livez`)).status).toBe(200);
    expect((await fetch(`${env.service.baseUrl}/readyz`)).status).toBe(200);
  });

  it('the probes and /metrics answer HEAD as GET, without a body', async () => {
    for (const path of ['/livez', '/readyz', '/metrics']) {
      const res = await fetch(`${env.service.baseUrl}${path}`, { method: 'HEAD' });
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toMatch(/json|text\/plain/);
      expect(await res.text(), path).toBe('');
    }
  });
});
