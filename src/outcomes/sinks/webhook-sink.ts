// The webhook sink: POSTs a queue's outcomes to the configured URL, signed with HMAC-SHA256
// (src/outcomes/webhook-signature.ts), and resolves once the receiver answered 2xx. Every other answer, a
// timeout or a connection error throws, and the dispatcher retries the same outcomes with backoff and
// parks them once max_retries is spent (src/outcomes/dispatcher.ts). docs/outcomes-webhook.md is the
// receiver's view: headers, signing input, body layout of batches.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { create, toBinary, toJson } from '@bufbuild/protobuf';
import type { Logger } from 'pino';
import { OutcomeListSchema, OutcomeSchema, type Outcome } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { OutcomesConfig } from '../delivery.js';
import type { OutcomeSink, RetryPolicy } from '../sink.js';
import { signWebhook } from '../webhook-signature.js';

export type WebhookSettings = NonNullable<OutcomesConfig['webhook']>;

/** Names the body's message: one Outcome (max_batch_size 1) or an OutcomeList (max_batch_size above 1). */
export const MESSAGE_TYPE_HEADER = 'X-SVC-Message-Type';
/** How many outcomes the body carries. */
export const OUTCOME_COUNT_HEADER = 'X-SVC-Outcome-Count';
export const OUTCOME_MESSAGE = 'matchmaker.outcomes.v1.Outcome';
export const OUTCOME_LIST_MESSAGE = 'matchmaker.outcomes.v1.OutcomeList';

const ENV_REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Replaces every `${NAME}` in the configured secret by process.env.NAME. An unset (or empty) variable is an
 * error: the sink then fails every delivery, so they park visibly instead of going out unsigned.
 */
export function resolveWebhookSecret(configured: string, env: NodeJS.ProcessEnv = process.env): { secret: string } | { error: string } {
  const missing: string[] = [];
  const secret = configured.replace(ENV_REFERENCE, (_match, name: string) => {
    const value = env[name];
    if (value === undefined || value === '') missing.push(name);
    return value ?? '';
  });
  if (missing.length > 0)
    return { error: `webhook secret references unset environment variable${missing.length > 1 ? 's' : ''} ${missing.join(', ')}` };
  if (secret === '') return { error: 'webhook secret is empty' };
  return { secret };
}

export class WebhookSink implements OutcomeSink {
  readonly kind = 'webhook';
  readonly batchSize: number;
  readonly retry: RetryPolicy;
  private readonly url: URL;
  private readonly secret: string;
  /** A configuration problem found at construction: every delivery fails with it (and so parks, visibly). */
  private readonly problem: string | undefined;
  private readonly agent: http.Agent;
  private readonly request: typeof http.request;
  private readonly contentType: string;
  private readonly batched: boolean;

  constructor(
    readonly queueId: string,
    readonly settings: WebhookSettings,
    readonly log: Logger,
  ) {
    this.batchSize = settings.max_batch_size;
    this.retry = { maxRetries: settings.max_retries, baseDelayMs: settings.retry_base_delay_ms, maxDelayMs: settings.retry_max_delay_ms };
    this.url = new URL(settings.url); // validated by the queue file schema
    this.batched = settings.max_batch_size > 1;
    this.contentType = settings.encoding === 'json' ? 'application/json' : 'application/x-protobuf';
    const secure = this.url.protocol === 'https:';
    const resolved = resolveWebhookSecret(settings.secret);
    this.secret = 'secret' in resolved ? resolved.secret : '';
    if ('error' in resolved) {
      this.problem = resolved.error;
      log.error(
        { queue: queueId, sink: 'webhook' },
        `${resolved.error}: every delivery of the queue fails (and parks) until it is set and the service restarted`,
      );
    } else if (!secure && this.url.protocol !== 'http:') {
      this.problem = `webhook url must be http: or https:, not ${this.url.protocol}`;
      log.error(
        { queue: queueId, sink: 'webhook' },
        `${this.problem}: every delivery of the queue fails (and parks) until the queue file is fixed`,
      );
    } else if (!secure && !isLoopback(this.url.hostname)) {
      log.warn({ queue: queueId, sink: 'webhook', url: redact(this.url) }, 'webhook url is plain http: outcomes travel unencrypted');
    }
    // One keep-alive connection pool per queue: the dispatcher sends one request at a time, so one socket
    // is reused across deliveries and retries (an attempt that times out destroys it; the next connects anew).
    this.agent = secure ? new https.Agent({ keepAlive: true }) : new http.Agent({ keepAlive: true });
    this.request = secure ? https.request : http.request;
  }

  async deliver(outcomes: readonly Outcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    if (this.problem) throw new Error(this.problem);
    const body = this.encode(outcomes);
    try {
      await this.attempt(outcomes, body);
    } catch (err) {
      // A keep-alive socket the receiver closed while it sat idle fails the next request before any answer
      // (ECONNRESET/EPIPE on a reused socket). That is a race of the connection, not a verdict of the
      // receiver: send once more at once on a fresh connection rather than spend a retry and a backoff on it
      // (should the receiver have processed the first request after all, that is one more at-least-once
      // duplicate, deduped on the outcome id).
      if (!(err instanceof StaleSocketError)) throw err;
      await this.attempt(outcomes, body);
    }
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }

  /** A single Outcome when max_batch_size is 1, an OutcomeList otherwise (even with one outcome in it). */
  private encode(outcomes: readonly Outcome[]): Buffer {
    const list = create(OutcomeListSchema, { outcomes: [...outcomes] });
    if (this.settings.encoding === 'json') {
      const json = this.batched ? toJson(OutcomeListSchema, list) : toJson(OutcomeSchema, outcomes[0]!);
      return Buffer.from(JSON.stringify(json), 'utf8');
    }
    const bytes = this.batched ? toBinary(OutcomeListSchema, list) : toBinary(OutcomeSchema, outcomes[0]!);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** One HTTP request: resolves on a 2xx answer, throws on anything else. */
  private attempt(outcomes: readonly Outcome[], body: Buffer): Promise<void> {
    const timestamp = String(Math.floor(Date.now() / 1000));
    const headers: http.OutgoingHttpHeaders = {
      'Content-Type': this.contentType,
      'Content-Length': body.byteLength,
      'X-SVC-Delivery': randomUUID(),
      'X-SVC-Outcome-Id': outcomes.map((o) => o.id).join(','),
      'X-SVC-Queue-Id': this.queueId,
      'X-SVC-Kind': outcomes.map((o) => o.kind).join(','),
      'X-SVC-Timestamp': timestamp,
      'X-SVC-Signature': signWebhook({ secret: this.secret, timestamp, body }),
      [MESSAGE_TYPE_HEADER]: this.batched ? OUTCOME_LIST_MESSAGE : OUTCOME_MESSAGE,
      [OUTCOME_COUNT_HEADER]: String(outcomes.length),
      'User-Agent': 'matchmaker-webhook/1',
    };
    const timeoutMs = this.settings.timeout_ms;
    const signal = AbortSignal.timeout(timeoutMs);
    const target = redact(this.url);
    return new Promise<void>((resolve, reject) => {
      let answered = false;
      const req = this.request(this.url, { method: 'POST', agent: this.agent, headers, signal }, (res) => {
        answered = true;
        const status = res.statusCode ?? 0;
        // The status decides; the answer's content is not used. It is drained before settling so that the
        // socket is back in the pool for the next request (a body still streaming at the timeout is cut off:
        // the status stands).
        const settle = () => {
          if (status >= 200 && status < 300) resolve();
          else reject(new Error(`webhook ${target} answered ${status}${res.statusMessage ? ` ${res.statusMessage}` : ''}`));
        };
        res.once('end', settle);
        res.once('close', settle);
        res.once('error', settle);
        res.resume();
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (answered) return;
        if (signal.aborted) return reject(new Error(`webhook ${target} did not answer within ${timeoutMs} ms`));
        if (req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) return reject(new StaleSocketError(err.message));
        reject(new Error(`webhook ${target} connection failed: ${err.code ?? err.message}`));
      });
      req.end(body);
    });
  }
}

class StaleSocketError extends Error {}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || hostname.startsWith('127.');
}

/** The URL without credentials or query (either may hold a token), for logs and parked errors. */
function redact(url: URL): string {
  return `${url.protocol}//${url.host}${url.pathname}`;
}
