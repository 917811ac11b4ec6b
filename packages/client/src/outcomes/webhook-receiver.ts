// A receiver for the webhook sink: a node:http request listener (mount it in your server, or let the receiver
// listen on its own) that verifies each request's signature and timestamp, decodes the body (a protobuf or
// JSON Outcome, or an OutcomeList, as X-SVC-Message-Type and Content-Type say), answers at once, and hands the
// outcomes to the iterator to be processed afterwards: acknowledge fast, then process, as the service's
// timeout_ms expects. An outcome is acknowledged to the service by the 2xx answer, so a delivery's ack() here
// only records it for dedupe; to survive a crash of the receiver, persist the outcomes in `beforeAck`.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fromBinary, fromJson, type JsonValue } from '@bufbuild/protobuf';
import { OutcomeListSchema, OutcomeSchema, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { QueuedConsumer, type QueueOptions } from './consumer.js';
import type { OutcomeCoreOptions } from './outcome-core.js';
import { checkWebhookSignature, type WebhookRejection, type WebhookSecret } from './webhook-signature.js';

export interface WebhookReceiverOptions extends OutcomeCoreOptions, QueueOptions {
  /** The queue's webhook secret, or several during a rotation. */
  secret: WebhookSecret;
  /** Largest accepted distance of X-SVC-Timestamp from this clock, in seconds (default 300). */
  toleranceSecs?: number;
  /**
   * Runs before the 2xx answer, e.g. to store the outcomes durably; when it throws, the answer is 500 and the
   * service sends them again. Keep it well under the queue's timeout_ms.
   */
  beforeAck?: (outcomes: Outcome[]) => Promise<void> | void;
  /** Largest accepted body (default 16 MiB). */
  maxBodyBytes?: number;
  /** Problems that do not end the receiver. */
  onError?: (err: Error) => void;
  /** Told about every refused request (status and why). */
  onReject?: (rejection: {
    status: number;
    reason: WebhookRejection | 'method' | 'too_large' | 'undecodable' | 'busy' | 'before_ack';
  }) => void;
}

export const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;
const OUTCOME_LIST = 'matchmaker.outcomes.v1.OutcomeList';

export class WebhookOutcomeReceiver extends QueuedConsumer {
  private server: Server | undefined;

  constructor(private readonly options: WebhookReceiverOptions) {
    super({ ...options, detectGaps: options.detectGaps ?? false });
  }

  /** The request listener: `http.createServer(receiver.handler)`, or call it from your router for the hook path. */
  readonly handler = (req: IncomingMessage, res: ServerResponse): void => {
    if (req.method !== 'POST') return this.refuse(res, 405, 'method');
    if (this.ended) return this.refuse(res, 503, 'busy');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > (this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES)) {
        this.refuse(res, 413, 'too_large');
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('end', () => void this.accept(req, Buffer.concat(chunks), res));
  };

  private async accept(req: IncomingMessage, body: Buffer, res: ServerResponse): Promise<void> {
    const check = checkWebhookSignature({
      secret: this.options.secret,
      timestamp: header(req, 'x-svc-timestamp'),
      signature: header(req, 'x-svc-signature'),
      body,
      toleranceSecs: this.options.toleranceSecs,
    });
    if (!check.ok) return this.refuse(res, 401, check.reason);
    let outcomes: Outcome[];
    try {
      outcomes = decodeBody(header(req, 'content-type'), header(req, 'x-svc-message-type'), body);
    } catch {
      return this.refuse(res, 400, 'undecodable');
    }
    // Full: the service retries later, with backoff, instead of this process buffering without bound.
    if (this.full) return this.refuse(res, 503, 'busy');
    try {
      await this.options.beforeAck?.(outcomes);
    } catch {
      return this.refuse(res, 500, 'before_ack');
    }
    for (const outcome of outcomes) this.receive(outcome, acknowledged);
    res.writeHead(204).end();
  }

  private refuse(
    res: ServerResponse,
    status: number,
    reason: Parameters<NonNullable<WebhookReceiverOptions['onReject']>>[0]['reason'],
  ): void {
    this.options.onReject?.({ status, reason });
    if (!res.headersSent) res.writeHead(status, { connection: 'close' }).end();
  }

  protected reportError(err: unknown): void {
    this.options.onError?.(err instanceof Error ? err : new Error(String(err)));
  }

  /** Serves the handler on its own HTTP server; resolves with the URL to configure (`<url>` + your path is fine too). */
  async listen(port = 0, host = '127.0.0.1'): Promise<string> {
    const server = createServer(this.handler);
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    const address = server.address() as AddressInfo;
    return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}/`;
  }

  /** Stops accepting requests (new ones get 503 until the server is closed) and ends the iteration. */
  async close(): Promise<void> {
    this.finish();
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}

/** The 2xx answer already acknowledged every outcome of the request to the service. */
const acknowledged = (): Promise<void> => Promise.resolve();

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** The outcomes of a request body, per its Content-Type and X-SVC-Message-Type. */
export function decodeBody(contentType: string | undefined, messageType: string | undefined, body: Uint8Array): Outcome[] {
  const list = messageType === OUTCOME_LIST;
  if ((contentType ?? '').split(';')[0]!.trim() === 'application/json') {
    const json = JSON.parse(new TextDecoder().decode(body)) as JsonValue;
    return list
      ? fromJson(OutcomeListSchema, json, { ignoreUnknownFields: true }).outcomes
      : [fromJson(OutcomeSchema, json, { ignoreUnknownFields: true })];
  }
  return list ? fromBinary(OutcomeListSchema, body).outcomes : [fromBinary(OutcomeSchema, body)];
}

/** A webhook receiver; mount `handler` or call `listen()`. */
export function webhookReceiver(options: WebhookReceiverOptions): WebhookOutcomeReceiver {
  return new WebhookOutcomeReceiver(options);
}
