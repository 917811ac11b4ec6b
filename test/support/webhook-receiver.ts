// A webhook receiver for the outcome sink tests: a real HTTP server on 127.0.0.1 (port 0) that verifies
// every request's signature with the service's own helper (src/outcomes/webhook-signature.ts), decodes the
// body, records everything, and answers as the test scripts it (status, hang until the client gives up,
// or drop the connection).
import { fromBinary, fromJson, type JsonValue } from '@bufbuild/protobuf';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { OutcomeListSchema, OutcomeSchema, type Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { checkWebhookSignature, type WebhookCheck } from '@matchmaker/client';
import { pollUntil } from './queues.js';

/** How the receiver answers one request. */
export type Reply = { status: number } | { hang: true } | { destroy: true };

export interface ReceivedRequest {
  /** Arrival order at this receiver, from 0. */
  index: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body bytes. */
  body: Buffer;
  /** The receiver's clock (epoch seconds) when the request arrived. */
  receivedAtSecs: number;
  verification: WebhookCheck;
  /** The body decoded per Content-Type and X-SVC-Message-Type; empty when it did not decode. */
  outcomes: Outcome[];
  decodeError?: string;
  /** Which connection carried it (same number: the same keep-alive socket). */
  connection: number;
  reply: Reply;
  /** A 2xx answer was written completely: the service has acknowledged this request's outcomes. */
  acknowledged: boolean;
}

export interface WebhookReceiver {
  /** The URL to configure (…/hook). */
  readonly url: string;
  readonly requests: ReceivedRequest[];
  /** Answers used for the next requests, one each, before the default. */
  script(...replies: Reply[]): void;
  /** The answer once the script is used up (initially 200). */
  setDefault(reply: Reply | ((request: ReceivedRequest) => Reply)): void;
  /** Outcomes of acknowledged requests, flattened, in arrival order. */
  acknowledged(): Outcome[];
  /** Requests whose body carried the outcome. */
  attemptsFor(outcomeId: string): ReceivedRequest[];
  /** Polls until `done` holds for the recorded requests (returns them either way, for the assertion). */
  waitFor(done: (requests: ReceivedRequest[]) => boolean, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(options: { secret: string; toleranceSecs?: number }): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  const queued: Reply[] = [];
  let fallback: Reply | ((request: ReceivedRequest) => Reply) = { status: 200 };
  const connections = new WeakMap<Socket, number>();
  let nextConnection = 0;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = req.headers;
      const verification = checkWebhookSignature({
        secret: options.secret,
        timestamp: header(headers, 'x-svc-timestamp'),
        signature: header(headers, 'x-svc-signature'),
        body,
        toleranceSecs: options.toleranceSecs,
      });
      const record: ReceivedRequest = {
        index: requests.length,
        method: req.method ?? '',
        path: req.url ?? '',
        headers,
        body,
        receivedAtSecs: Date.now() / 1000,
        verification,
        outcomes: [],
        connection: connections.get(req.socket) ?? -1,
        reply: { status: 401 },
        acknowledged: false,
      };
      try {
        record.outcomes = decode(headers, body);
      } catch (err) {
        record.decodeError = (err as Error).message;
      }
      requests.push(record);
      // An unsigned or forged request is refused whatever the script says (and the tests assert there is none).
      record.reply = !verification.ok
        ? { status: 401 }
        : (queued.shift() ?? (typeof fallback === 'function' ? fallback(record) : fallback));
      answer(record, res);
    });
  });
  server.on('connection', (socket: Socket) => connections.set(socket, nextConnection++));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  function answer(record: ReceivedRequest, res: ServerResponse): void {
    const reply = record.reply;
    if ('hang' in reply) return; // never answers: the client's timeout ends it
    if ('destroy' in reply) {
      res.socket?.destroy();
      return;
    }
    res.writeHead(reply.status, { 'content-type': 'text/plain' });
    res.end(reply.status < 300 ? 'ok' : 'no', () => {
      if (reply.status >= 200 && reply.status < 300) record.acknowledged = true;
    });
  }

  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests,
    script: (...replies) => void queued.push(...replies),
    setDefault: (reply) => void (fallback = reply),
    acknowledged: () => requests.filter((r) => r.acknowledged).flatMap((r) => r.outcomes),
    attemptsFor: (id) => requests.filter((r) => r.outcomes.some((o) => o.id === id)),
    waitFor: (done, timeoutMs = 10_000) => pollUntil(async () => requests, done, timeoutMs, 20),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** The body as the receiver documentation says to read it. */
export function decode(headers: IncomingHttpHeaders, body: Buffer): Outcome[] {
  const list = header(headers, 'x-svc-message-type') === 'matchmaker.outcomes.v1.OutcomeList';
  if (header(headers, 'content-type') === 'application/json') {
    const json = JSON.parse(body.toString('utf8')) as JsonValue;
    return list ? fromJson(OutcomeListSchema, json).outcomes : [fromJson(OutcomeSchema, json)];
  }
  return list ? fromBinary(OutcomeListSchema, body).outcomes : [fromBinary(OutcomeSchema, body)];
}
