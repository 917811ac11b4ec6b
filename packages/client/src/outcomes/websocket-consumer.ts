// Outcomes from the service's WebSocket stream (GET /v1/outcomes/stream on the HTTP port). Frames are JSON:
// `ready`, `outcome` (the canonical protobuf JSON of an Outcome under its offset, the producer_sequence),
// `acked`, `heartbeat`, `error`; the client sends `{type: "ack", offset}`, an ack covering every earlier
// outcome of the stream. The consumer acknowledges the highest offset below which every delivery is handled,
// reconnects with backoff after any loss of the connection (or none heard for idleTimeoutMs) and resumes right
// after the last offset it received, so nothing recorded meanwhile is skipped, named consumer or not.
import { fromJson, type JsonValue } from '@bufbuild/protobuf';
import WebSocket from 'ws';
import { backoffDelay, type BackoffPolicy } from '../backoff.js';
import { OutcomeSchema } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { QueuedConsumer, type QueueOptions } from './consumer.js';
import type { OutcomeCoreOptions } from './outcome-core.js';

export interface WebSocketConsumerOptions extends OutcomeCoreOptions, QueueOptions {
  /** The service's HTTP address, e.g. `ws://127.0.0.1:8080` (`http://` and `https://` work too). */
  url: string;
  /** One queue id, a namespace `eu.>`, or omitted for every queue with the websocket sink. */
  queueId?: string;
  /** A durable consumer name: its position is the last acknowledged offset, kept by the service. */
  consumer?: string;
  /**
   * Where the first connection starts (inclusive). Omitted: a named consumer's stored position, else the
   * newest outcome. Reconnections always resume after the last offset received.
   */
  fromOffset?: bigint | number;
  /** Reconnection waits (default below 250 ms doubling to 10 s, full jitter). */
  reconnect?: Partial<BackoffPolicy>;
  /** Reconnect when nothing (frame or ping) arrived for this long (default 45000: three heartbeat intervals). */
  idleTimeoutMs?: number;
  /** Non-fatal problems: a refused frame, a lost connection, a failed attempt to connect. */
  onError?: (err: Error) => void;
  /** Sent as `Authorization: Bearer <token>` on every connection (a token with the `outcomes` scope). */
  accessToken?: string;
  /** Options of the `ws` client (headers, TLS). */
  socketOptions?: WebSocket.ClientOptions;
}

export const DEFAULT_RECONNECT: BackoffPolicy = { initialDelayMs: 250, maxDelayMs: 10_000 };
export const DEFAULT_IDLE_TIMEOUT_MS = 45_000;

/** Refusals of the upgrade that a reconnection cannot fix (the request itself is wrong). */
const FATAL_STATUS = new Set([400, 404]);

type Frame =
  | { type: 'ready'; after: string; consumer?: string; offsets?: 'service' | 'queue' }
  | { type: 'outcome'; offset: string; outcome: JsonValue }
  | { type: 'acked'; offset: string }
  | { type: 'heartbeat' }
  | { type: 'error'; code: string; message: string };

export class WebSocketOutcomeConsumer extends QueuedConsumer {
  private ws: WebSocket | undefined;
  private closing = false;
  private attempts = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** The last offset this stream has passed (`ready.after` or the last outcome received). */
  private position: bigint | undefined;
  /** Offsets handed to the core and not yet acknowledged by the caller, in order. */
  private readonly outstanding: bigint[] = [];
  private readonly handled = new Set<bigint>();
  /** Highest offset every delivery up to which is handled, and the highest the service confirmed. */
  private watermark = -1n;
  private confirmed = -1n;
  private readonly confirmWaiters: { offset: bigint; resolve: () => void }[] = [];
  private readonly readyWaiters: { resolve: () => void; reject: (err: Error) => void }[] = [];
  private isReady = false;
  private readonly reconnectPolicy: BackoffPolicy;

  constructor(private readonly options: WebSocketConsumerOptions) {
    super({ ...options, detectGaps: options.detectGaps ?? options.queueId === undefined });
    this.reconnectPolicy = { ...DEFAULT_RECONNECT, ...options.reconnect };
    if (options.fromOffset !== undefined) this.position = BigInt(options.fromOffset) - 1n;
    this.connect();
  }

  /** Resolves once a connection is open and the service sent `ready`; rejects if the consumer ends first. */
  ready(): Promise<void> {
    if (this.isReady) return Promise.resolve();
    if (this.closing) return Promise.reject(new Error('the outcome stream consumer is closed'));
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  /** The stream URL of the next connection. */
  private streamUrl(): string {
    const url = new URL('/v1/outcomes/stream', this.options.url.replace(/^http/, 'ws'));
    if (this.options.queueId !== undefined) url.searchParams.set('queue_id', this.options.queueId);
    if (this.options.consumer !== undefined) url.searchParams.set('consumer', this.options.consumer);
    // Resume right after what was received; the first connection of a named consumer without fromOffset
    // starts at its stored position.
    if (this.position !== undefined) url.searchParams.set('from_offset', String(this.position + 1n < 0n ? 0n : this.position + 1n));
    return url.toString();
  }

  private connect(): void {
    if (this.closing) return;
    const { accessToken, socketOptions } = this.options;
    const headers = { ...socketOptions?.headers, ...(accessToken === undefined ? {} : { authorization: `Bearer ${accessToken}` }) };
    const ws = new WebSocket(this.streamUrl(), { ...socketOptions, headers });
    this.ws = ws;
    this.touch();
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        const err = new Error(`outcome stream refused the connection: HTTP ${res.statusCode} ${body}`.trim());
        if (FATAL_STATUS.has(res.statusCode ?? 0)) this.fail(err);
        else this.options.onError?.(err);
      });
      ws.terminate();
    });
    ws.on('message', (data, isBinary) => {
      this.touch();
      if (isBinary) return;
      let frame: Frame;
      try {
        frame = JSON.parse(String(data)) as Frame;
      } catch {
        this.options.onError?.(new Error('outcome stream sent a frame that is not JSON'));
        return;
      }
      this.onFrame(frame);
    });
    ws.on('ping', () => this.touch());
    ws.on('error', (err) => this.options.onError?.(err));
    ws.on('close', (code) => {
      if (this.ws !== ws) return;
      this.ws = undefined;
      this.isReady = false;
      clearTimeout(this.idleTimer);
      if (this.closing) return;
      if (code !== 1000) this.options.onError?.(new Error(`outcome stream closed (${code}); reconnecting`));
      const delay = backoffDelay(++this.attempts, this.reconnectPolicy);
      this.reconnectTimer = setTimeout(() => this.connect(), delay);
    });
  }

  /** Restarts the idle watchdog: a connection silent for idleTimeoutMs is dropped and replaced. */
  private touch(): void {
    clearTimeout(this.idleTimer);
    const ws = this.ws;
    this.idleTimer = setTimeout(() => ws?.terminate(), this.options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
  }

  private onFrame(frame: Frame): void {
    switch (frame.type) {
      case 'ready': {
        // Offsets numbered per queue (the replicated mode): a stream of one queue sees every number of its
        // producer, so a jump is a gap, unless the caller chose otherwise.
        if (this.options.detectGaps === undefined && frame.offsets === 'queue') this.core.detectGaps = true;
        const after = BigInt(frame.after);
        if (this.position === undefined || after > this.position) this.position = after;
        this.attempts = 0;
        this.isReady = true;
        for (const w of this.readyWaiters.splice(0)) w.resolve();
        // Acknowledgements not confirmed before the connection was lost go again.
        if (this.watermark > this.confirmed) this.sendAck();
        return;
      }
      case 'outcome': {
        const offset = BigInt(frame.offset);
        if (this.position !== undefined && offset <= this.position) return; // already received
        this.position = offset;
        const outcome = fromJson(OutcomeSchema, frame.outcome, { ignoreUnknownFields: true });
        this.outstanding.push(offset);
        this.receive(outcome, () => this.handle(offset));
        if (this.full) this.ws?.pause();
        return;
      }
      case 'acked': {
        const offset = BigInt(frame.offset);
        if (offset > this.confirmed) this.confirmed = offset;
        for (let i = this.confirmWaiters.length - 1; i >= 0; i--) {
          const w = this.confirmWaiters[i]!;
          if (w.offset <= this.confirmed) {
            this.confirmWaiters.splice(i, 1);
            w.resolve();
          }
        }
        return;
      }
      case 'error':
        this.options.onError?.(new Error(`outcome stream refused a frame: ${frame.code}: ${frame.message}`));
        return;
      default:
        return; // heartbeat, or a frame type added later
    }
  }

  /** The caller handled the delivery at `offset`: advance the watermark and acknowledge it to the service. */
  private handle(offset: bigint): Promise<void> {
    this.handled.add(offset);
    while (this.outstanding.length > 0 && this.handled.has(this.outstanding[0]!)) {
      const next = this.outstanding.shift()!;
      this.handled.delete(next);
      this.watermark = next;
    }
    if (offset <= this.confirmed) return Promise.resolve();
    if (this.closing) {
      // Sent if the socket is still open, but not waited for: a named consumer resumes from its last
      // confirmed position, and dedupe or the handler's idempotence covers the rest.
      if (this.watermark >= offset) this.sendAck();
      return Promise.resolve();
    }
    const confirmed = new Promise<void>((resolve) => this.confirmWaiters.push({ offset, resolve }));
    if (this.watermark >= offset) this.sendAck();
    return confirmed;
  }

  private sendAck(): void {
    if (this.isReady && this.ws?.readyState === WebSocket.OPEN)
      this.ws.send(JSON.stringify({ type: 'ack', offset: String(this.watermark) }));
  }

  protected reportError(err: unknown): void {
    this.options.onError?.(err instanceof Error ? err : new Error(String(err)));
  }

  protected override onSpace(): void {
    this.ws?.resume();
  }

  private fail(err: Error): void {
    this.closing = true;
    clearTimeout(this.reconnectTimer);
    for (const w of this.readyWaiters.splice(0)) w.reject(err);
    this.finish(err);
  }

  /**
   * Stops the stream. Acknowledgements sent and not yet confirmed get up to 2 s to be confirmed first; the
   * promises of any still unconfirmed then resolve anyway (a named consumer resumes from its last confirmed
   * position, and dedupe drops what was handled twice).
   */
  async close(): Promise<void> {
    if (this.closing && !this.ws) return;
    this.closing = true;
    clearTimeout(this.reconnectTimer);
    for (const w of this.readyWaiters.splice(0)) w.reject(new Error('the outcome stream consumer was closed before it was ready'));
    this.finish();
    if (this.confirmWaiters.length > 0 && this.isReady) {
      const waiting = this.confirmWaiters.map((w) => new Promise<void>((resolve) => (w.resolve = chain(w.resolve, resolve))));
      await Promise.race([Promise.all(waiting), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    }
    clearTimeout(this.idleTimer);
    for (const w of this.confirmWaiters.splice(0)) w.resolve();
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => ws.terminate(), 2_000);
      ws.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(1000);
    });
  }
}

function chain(first: () => void, second: () => void): () => void {
  return () => {
    first();
    second();
  };
}

/** Opens a consumer of the WebSocket outcome stream; it connects at once and reconnects on its own. */
export function websocketConsumer(options: WebSocketConsumerOptions): WebSocketOutcomeConsumer {
  return new WebSocketOutcomeConsumer(options);
}
