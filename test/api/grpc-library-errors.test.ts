// Requests that grpc-js refuses before our handler runs, sent with a raw HTTP/2 client: a compressed message
// that does not decompress and an unparsable grpc-timeout are the caller's mistakes (INVALID_ARGUMENT, not
// INTERNAL); what grpc-js still decides alone answers as docs/api.md says.
import { connect, type ClientHttp2Session, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { gzipSync } from 'node:zlib';
import { create, toBinary } from '@bufbuild/protobuf';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CreateTicketRequestSchema } from '../../src/gen/matchmaker/core/v1/service_pb.js';
import { party, uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';

const env = useService();
const PATH = '/matchmaker.core.v1.MatchmakerService/CreateTicket';

/** One gRPC frame: compressed flag, 4-byte big-endian length, the bytes. */
function frame(bytes: Uint8Array, compressed: boolean): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt8(compressed ? 1 : 0, 0);
  head.writeUInt32BE(bytes.length, 1);
  return Buffer.concat([head, bytes]);
}

function validRequest(): Uint8Array {
  return toBinary(
    CreateTicketRequestSchema,
    create(CreateTicketRequestSchema, { ticket: { id: uuid(), queueId: 'test.basic', engineInput: party(1) } }),
  );
}

let session: ClientHttp2Session;
beforeAll(() => {
  session = connect(`http://127.0.0.1:${env.service.grpcPort}`);
  session.on('error', () => undefined);
});
afterAll(() => session.close());

/** Sends one call; resolves with its grpc-status and grpc-message (from trailers, or a trailers-only answer). */
function call(headers: OutgoingHttpHeaders, body: Buffer): Promise<{ code: number; message: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers', ...headers });
    let result: IncomingHttpHeaders = {};
    const take = (h: IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) result = h;
    };
    stream.on('response', take);
    stream.on('trailers', take);
    stream.on('data', () => undefined);
    stream.on('error', reject);
    stream.on('close', () =>
      resolve({ code: Number(result['grpc-status'] ?? -1), message: decodeURIComponent(String(result['grpc-message'] ?? '')) }),
    );
    stream.end(body);
  });
}

describe('requests grpc-js refuses before our handler', () => {
  it('a gzip-flagged message that is not gzip: INVALID_ARGUMENT', async () => {
    const res = await call({ 'grpc-encoding': 'gzip' }, frame(Buffer.from('definitely not gzip'), true));
    expect(res.code).toBe(status.INVALID_ARGUMENT);
    expect(res.message).toMatch(/gzip/);
  });

  it('a grpc-timeout that does not parse: INVALID_ARGUMENT', async () => {
    const res = await call({ 'grpc-timeout': 'abc' }, frame(validRequest(), false));
    expect(res).toEqual({ code: status.INVALID_ARGUMENT, message: expect.stringContaining('grpc-timeout "abc"') });
  });

  it('valid gzip and a valid grpc-timeout still work', async () => {
    const res = await call({ 'grpc-encoding': 'gzip', 'grpc-timeout': '5S' }, frame(gzipSync(validRequest()), true));
    expect(res.code).toBe(status.OK);
  });

  it('what grpc-js decides alone (docs/api.md): an unsupported encoding, an unknown method', async () => {
    expect((await call({ 'grpc-encoding': 'br' }, frame(Buffer.from('x'), true))).code).toBe(status.UNIMPLEMENTED);
    const unknown = await new Promise<number>((resolve) => {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/matchmaker.core.v1.MatchmakerService/Nope',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.on('response', (h) => resolve(Number(h['grpc-status'])));
      stream.on('error', () => resolve(-1));
      stream.end(frame(new Uint8Array(), false));
    });
    expect(unknown).toBe(status.UNIMPLEMENTED);
  });
});
