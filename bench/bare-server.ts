// A bare grpc-js server with the same service definition as the real one, implementing only CreateTicket
// and answering { ticketId } with no work beyond what the real adapter does first: the request arrives as
// raw bytes (rawRequests, as in src/api/grpc.ts) and is decoded with fromBinary. It is the ceiling the
// real service is compared against.
//
//   node dist/bench/bare-server.js [--port N] [--host 127.0.0.1] [--answer-after-ms N] [--http2-only]
//
// --answer-after-ms N (default 0) answers each call N ms later, from a timer, with no more CPU work: a
// control for a handler that waits for something, as the real one waits for its durable write. It shows
// what that wait alone does to the tail at a fixed rate, apart from the work the real service does.
//
// --http2-only serves CreateTicket from Node's own http2 module instead of grpc-js: the same framing (a
// length-prefixed message, grpc-status in the trailers), no grpc-js. With --answer-after-ms it tells whether
// what holding a call costs the tail comes from grpc-js or from Node's HTTP/2 (bench/RESULTS.md, sixth
// session: Node's HTTP/2 alone already promotes 5x as much when it answers later).
//
// Prints one JSON line {"msg":"listening","grpcPort":N} when bound; on SIGTERM/SIGINT prints
// {"msg":"stopped","calls":N,"connections":M} (M = distinct client address:port pairs seen, i.e. TCP
// connections) and exits.
import { once } from 'node:events';
import { createServer, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Server, ServerCredentials, status, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { grpcServiceDefinition, MatchmakerService } from '../src/api/grpc-definitions.js';
import { CreateTicketRequestSchema, CreateTicketResponseSchema } from '../src/gen/matchmaker/core/v1/service_pb.js';

export interface BareServer {
  port: number;
  stats(): { calls: number; connections: number };
  stop(): Promise<void>;
}

export async function startBareServer(host = '127.0.0.1', port = 0, answerAfterMs = 0, http2Only = false): Promise<BareServer> {
  if (http2Only) return startHttp2Server(host, port, answerAfterMs);
  const server = new Server();
  let calls = 0;
  const peers = new Set<string>();
  server.addService(grpcServiceDefinition(MatchmakerService, { rawRequests: true }), {
    CreateTicket: (call: ServerUnaryCall<Buffer, unknown>, callback: sendUnaryData<unknown>) => {
      calls++;
      peers.add(call.getPeer());
      let ticketId: string;
      try {
        ticketId = fromBinary(CreateTicketRequestSchema, call.request).ticket?.id ?? '';
      } catch (err) {
        callback({ code: status.INVALID_ARGUMENT, details: `request does not decode: ${(err as Error).message}` });
        return;
      }
      const response = create(CreateTicketResponseSchema, { ticketId });
      if (answerAfterMs > 0) setTimeout(() => callback(null, response), answerAfterMs);
      else callback(null, response);
    },
  });
  const bound = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${port}`, ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    port: bound,
    stats: () => ({ calls, connections: peers.size }),
    stop: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000).unref();
      }),
  };
}

/** CreateTicket over Node's http2 module alone: gRPC's framing by hand, no grpc-js. */
async function startHttp2Server(host: string, port: number, answerAfterMs: number): Promise<BareServer> {
  const server = createServer();
  let calls = 0;
  const peers = new Set<string>();
  server.on('stream', (stream: ServerHttp2Stream) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => {
      calls++;
      peers.add(`${stream.session?.socket.remoteAddress}:${stream.session?.socket.remotePort}`);
      let body: Uint8Array;
      let status = 0;
      try {
        // A gRPC message: a compressed flag byte, a 4-byte length, then the protobuf bytes.
        const ticketId = fromBinary(CreateTicketRequestSchema, Buffer.concat(chunks).subarray(5)).ticket?.id ?? '';
        body = toBinary(CreateTicketResponseSchema, create(CreateTicketResponseSchema, { ticketId }));
      } catch {
        body = new Uint8Array();
        status = 3; // INVALID_ARGUMENT
      }
      const frame = Buffer.alloc(5 + body.length);
      frame.writeUInt32BE(body.length, 1);
      frame.set(body, 5);
      const answer = () => {
        if (stream.destroyed) return;
        stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': String(status) }));
        stream.end(status === 0 ? frame : undefined);
      };
      if (answerAfterMs > 0) setTimeout(answer, answerAfterMs);
      else answer();
    });
  });
  server.listen(port, host);
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    stats: () => ({ calls, connections: peers.size }),
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        setTimeout(resolve, 2000).unref();
      }),
  };
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'answer-after-ms': { type: 'string' },
      'http2-only': { type: 'boolean' },
    },
  });
  const answerAfterMs = Number(values['answer-after-ms'] ?? 0);
  if (!Number.isFinite(answerAfterMs) || answerAfterMs < 0)
    throw new Error(`--answer-after-ms must be a non-negative number, got "${values['answer-after-ms']}"`);
  const server = await startBareServer(
    values.host ?? '127.0.0.1',
    Number(values.port ?? process.env.GRPC_PORT ?? 0),
    answerAfterMs,
    values['http2-only'] ?? false,
  );
  console.log(JSON.stringify({ msg: 'listening', grpcPort: server.port }));
  const onSignal = () => {
    console.log(JSON.stringify({ msg: 'stopped', ...server.stats() }));
    void server.stop().then(() => process.exit(0));
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
