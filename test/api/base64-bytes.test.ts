// bytes fields in HTTP/JSON are canonical protobuf JSON base64: the standard or the URL-safe alphabet,
// padding optional. Anything else (stray padding, spaces, newlines, mixed alphabets) is INVALID_ARGUMENT
// naming the field, not bytes guessed from it.
import { describe, expect, it } from 'vitest';
import { party, uuid } from '../support/fixtures.js';
import { useService } from '../support/service.js';
import { httpRequest } from '../support/transports.js';

const env = useService();

const BAD = ['====', 'Y Q==', 'Y\nQ==', 'YQ==\n', 'YQ=', 'Y', 'YQ==YQ==', 'YQ===', '+_8=', 'YQ*=', '=YQ='];
/** Bytes whose base64 uses the two alphabet-specific characters (+/ or -_). */
const METADATA = Buffer.from([0xfb, 0xff]);

function spellings(bytes: Buffer): string[] {
  const std = bytes.toString('base64');
  const url = bytes.toString('base64url');
  return [std, std.replace(/=+$/, ''), url, `${url}${'='.repeat(std.length - url.length)}`];
}

describe('base64 in HTTP/JSON bytes fields', () => {
  for (const field of ['metadata', 'engineInput'] as const) {
    it(`refuses non-canonical base64 in ticket.${field}`, async () => {
      for (const bad of BAD) {
        const res = await httpRequest(env.service, 'POST', '/v1/queues/test.basic/tickets', { ticket: { id: uuid(), [field]: bad } });
        const snake = field === 'engineInput' ? 'engine_input' : field;
        expect({ bad, status: res.status, body: res.body }).toEqual({
          bad,
          status: 400,
          body: { code: 'INVALID_ARGUMENT', message: expect.stringContaining(`ticket.${snake} is not valid base64`) },
        });
      }
    });

    it(`refuses non-canonical base64 in backfill_request.${field}`, async () => {
      for (const bad of BAD) {
        const res = await httpRequest(env.service, 'POST', '/v1/queues/test.basic/backfills', {
          backfillRequest: { matchId: uuid(), [field]: bad },
        });
        const snake = field === 'engineInput' ? 'engine_input' : field;
        expect({ bad, status: res.status, message: res.body.message }).toEqual({
          bad,
          status: 400,
          message: expect.stringContaining(`backfill_request.${snake} is not valid base64`),
        });
      }
    });
  }

  it('accepts standard, URL-safe, padded and unpadded base64 and stores the same bytes', async () => {
    const input = Buffer.from(party(1));
    const inputs = spellings(input);
    const metadata = spellings(METADATA);
    expect(new Set(metadata).size).toBe(4);
    for (let i = 0; i < metadata.length; i++) {
      const id = uuid();
      const created = await httpRequest(env.service, 'POST', '/v1/queues/test.basic/tickets', {
        ticket: { id, metadata: metadata[i], engine_input: inputs[i] },
      });
      expect({ i, status: created.status }).toEqual({ i, status: 200 });
      const stored = await httpRequest(env.service, 'GET', `/admin/v1/queues/test.basic/tickets/${id}`);
      const ticket = stored.body.ticket as { metadata: string; engineInput: string };
      expect(Buffer.from(ticket.metadata, 'base64')).toEqual(METADATA);
      expect(Buffer.from(ticket.engineInput, 'base64')).toEqual(input);
    }
    const backfill = await httpRequest(env.service, 'POST', '/v1/queues/test.basic/backfills', {
      backfillRequest: { matchId: uuid(), metadata: metadata[3] },
    });
    expect(backfill.status).toBe(200);
  });
});
