// The WebSocket outcome stream (docs/outcomes-websocket.md): GET /v1/outcomes/stream upgraded on the HTTP
// server. Each connection reads the outbox (src/core/outcome-feed.ts) after its own offset, in producer_sequence order, filtered by
// queue id and to queues whose sink is `websocket`; new outcomes wake every connection whose filter they
// pass. A named consumer's acknowledgements advance its durable position (a `consumer.advance` change),
// from which a reconnect without `from_offset` resumes. The server pings every heartbeat interval and
// terminates a connection that did not answer the previous ping.
import { STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { toJson } from '@bufbuild/protobuf';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import type { Access, Principal } from '../core/access.js';
import { consumerTaken, type OutcomeFeed } from '../core/outcome-feed.js';
import { asServiceError, invalidArgument, notFound, quote, quotePath, ServiceError, unavailable } from '../errors.js';
import { OutcomeSchema, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { httpErrorHeaders, httpStatusOf, messageOf } from './error-map.js';
import type { HttpGuard } from './http-guard.js';
import type { DeliveryTelemetry } from '../outcomes/delivery-telemetry.js';
import { SentOutcomes } from './stream-delivery-lag.js';
import { OFFSET_PATTERN, parseQuery, type StreamQuery } from './outcome-stream-query.js';

export interface OutcomeStreamDeps {
  /** The outbox and consumer positions (UNAVAILABLE while starting: upgrade requests get 503). */
  feed: OutcomeFeed;
  heartbeatMs: number;
  log: Logger;
  /** Told each acknowledged outcome's lag (metrics). */
  delivery: DeliveryTelemetry;
  /** Upgrades need the `outcomes` scope (docs/security.md). */
  access: Access;
  /** Upgrades from a foreign Origin or to a Host not allowed are refused. */
  guard: HttpGuard;
}

export const STREAM_PATH = '/v1/outcomes/stream';
/** Outcomes read from the outbox per page. */
export const PAGE_SIZE = 500;
/** Above this many bytes queued on a socket the stream stops reading the outbox until they are written. */
export const HIGH_WATER_BYTES = 1024 * 1024;
/** A client that leaves more than this of answers to its own frames (acked, error) unread is disconnected (1008). */
const REPLY_BACKLOG_BYTES = 1024 * 1024;
const HEARTBEAT_FRAME = JSON.stringify({ type: 'heartbeat' });
/** Client frames are small JSON objects. */
const MAX_CLIENT_FRAME_BYTES = 16 * 1024;
/** After close(1001), how long a client gets to answer the close handshake before its socket is destroyed. */
const CLOSE_GRACE_MS = 1000;

/** Server -> client frames. Offsets are decimal strings (uint64, as in the protobuf JSON mapping). */
export type ServerFrame =
  | { type: 'ready'; after: string; consumer?: string; offsets: 'service' | 'queue' }
  | { type: 'outcome'; offset: string; outcome: unknown }
  | { type: 'acked'; offset: string; consumer?: string }
  | { type: 'heartbeat' }
  | { type: 'error'; code: ServiceError['code']; message: string };

/** Answers an upgrade request with a plain HTTP error (the API's JSON error body) and closes the socket. */
function refuse(socket: Duplex, err: ServiceError): void {
  const status = httpStatusOf(err);
  const headers = httpErrorHeaders(err);
  const body = JSON.stringify({ code: err.code, message: messageOf(err) });
  socket.on('error', () => undefined);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n` +
      'connection: close\r\ncontent-type: application/json\r\n' +
      Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('') +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  // end() flushes the answer; destroy in case the peer never reads it.
  setTimeout(() => socket.destroy(), 1000).unref();
}

/** Serves GET /v1/outcomes/stream (WebSocket upgrade) on the HTTP server. */
export function attachOutcomeStream(server: Server, deps: OutcomeStreamDeps): { close(): Promise<void> } {
  const { feed, log } = deps;
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_CLIENT_FRAME_BYTES, clientTracking: false });
  const connections = new Set<StreamConnection>();
  let closing: Promise<void> | undefined;
  feed.onOutcomes((queueIds) => {
    for (const connection of connections) connection.notify(queueIds);
  });

  const heartbeat = setInterval(() => {
    for (const connection of connections) connection.heartbeat();
  }, deps.heartbeatMs);
  heartbeat.unref();

  const onUpgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    let query: StreamQuery;
    let principal: Principal | undefined;
    try {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (url.pathname !== STREAM_PATH) throw notFound(`no WebSocket endpoint at ${quotePath(url.pathname)}; use ${STREAM_PATH}`);
      deps.guard.checkSource(req.headers);
      // The socket is ours from the upgrade on: a peer that hangs up during the token check must not
      // crash the process with an unheard 'error'.
      socket.on('error', () => undefined);
      principal = await deps.access.authorize(req.headers.authorization, 'outcomes', req.socket.remoteAddress ?? '');
      if (closing) throw unavailable('service is shutting down; reconnect with backoff');
      feed.requireOpen();
      query = parseQuery(url);
      if (feed.offsetsPerQueue && query.exactQueue === undefined) {
        throw invalidArgument(
          'in the replicated mode each queue numbers its own outcomes: queue_id must name one queue (open a stream per queue)',
        );
      }
      // A named consumer belongs to the token that first used it (checked again when claimed, in start()).
      const owner =
        query.consumer === undefined ? undefined : feed.consumerOwner(query.consumer, feed.offsetsPerQueue ? query.exactQueue : undefined);
      if (principal !== undefined && owner !== undefined && owner !== principal.name) throw consumerTaken(query.consumer!);
    } catch (err) {
      const serviceError = asServiceError(err);
      if (serviceError.code === 'INTERNAL') log.error({ err }, 'outcome stream upgrade failed');
      return refuse(socket, serviceError);
    }
    if (socket.destroyed) return;
    wss.handleUpgrade(req, socket, head, (ws) => {
      if (closing) {
        ws.close(1001, 'going away');
        return;
      }
      const connection = new StreamConnection(ws, feed, query, log, deps.delivery, principal?.name);
      connections.add(connection);
      ws.once('close', () => connections.delete(connection));
      connection.start().catch((err: unknown) => {
        if (err instanceof ServiceError && err.code === 'PERMISSION_DENIED') return connection.refuse(err);
        log.error({ err }, 'outcome stream could not start');
        ws.close(1011, 'internal error');
      });
    });
  };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void onUpgrade(req, socket, head));

  const close = () =>
    (closing ??= (async () => {
      clearInterval(heartbeat);
      await Promise.all([...connections].map((c) => c.goAway()));
      wss.close();
    })());

  // The caller closes this together with the HTTP server (src/server.ts): upgraded sockets are connections
  // of that server, so its close() waits for them.
  return { close };
}

class StreamConnection {
  /** Every outcome of the filtered set up to this offset was sent (or precedes the start). */
  private sent = 0n;
  private started = false;
  private pumping = false;
  private wanted = false;
  /** Waiting for the socket to write its queue (set while bufferedAmount is above the high-water mark). */
  private waitingForDrain = false;
  private alive = true;
  /** Bytes of answers (ready, acked, error) queued on the socket and not yet written. */
  private replyBacklog = 0;
  private readonly accepts: (queueId: string) => boolean;
  /** The queue whose numbering the offsets are, when each queue numbers its own (the replicated mode). */
  private readonly offsetQueue: string | undefined;
  private readonly unacknowledged = new SentOutcomes();

  constructor(
    private readonly ws: WebSocket,
    private readonly feed: OutcomeFeed,
    private readonly query: StreamQuery,
    private readonly log: Logger,
    private readonly delivery: DeliveryTelemetry,
    /** The bearer token (by name) the connection was opened with; a named consumer is claimed for it. */
    private readonly owner: string | undefined,
  ) {
    // The sink is looked up at read time, so a hot-reloaded sink change applies to later outcomes.
    this.accepts = (queueId) => query.matches(queueId) && feed.sinkOf(queueId) === 'websocket';
    this.offsetQueue = feed.offsetsPerQueue ? query.exactQueue : undefined;
    ws.on('pong', () => (this.alive = true));
    ws.on('message', (data, isBinary) => this.onFrame(data, isBinary));
    ws.on('error', (err) => this.log.debug({ err }, 'outcome stream socket error'));
  }

  async start(): Promise<void> {
    const { feed } = this;
    const { consumer, fromOffset } = this.query;
    if (consumer !== undefined && this.owner !== undefined) {
      await feed.claimConsumer(consumer, this.owner, feed.lastSequence(this.offsetQueue), this.offsetQueue);
    }
    if (fromOffset !== undefined) {
      this.sent = fromOffset === 0n ? 0n : fromOffset - 1n;
    } else if (consumer !== undefined) {
      const position = feed.consumerPosition(consumer, this.offsetQueue);
      if (position !== undefined) {
        this.sent = position;
      } else {
        // A new durable consumer starts at the newest outcome; recording that position now means a
        // reconnect before its first ack still sees everything recorded since this first connection.
        this.sent = feed.lastSequence(this.offsetQueue);
        await feed.advanceConsumer(consumer, this.sent, this.offsetQueue);
      }
    } else {
      this.sent = feed.lastSequence(this.offsetQueue);
    }
    if (this.ws.readyState !== WebSocket.OPEN) return;
    // Whose numbering the offsets are: the service's (every queue's outcomes in one sequence) or, in the
    // replicated mode, the queue's own, so a client knows whether a jump in offsets is a gap.
    const offsets = this.offsetQueue === undefined ? 'service' : 'queue';
    this.reply({ type: 'ready', after: String(this.sent), ...(consumer !== undefined ? { consumer } : {}), offsets });
    this.started = true;
    this.log.debug({ queue: this.query.queueParam, consumer, after: String(this.sent) }, 'outcome stream connected');
    this.wake();
  }

  notify(queueIds: ReadonlySet<string>): void {
    for (const id of queueIds) {
      if (this.accepts(id)) return this.wake();
    }
  }

  heartbeat(): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    if (!this.alive) {
      this.log.info(
        { queue: this.query.queueParam, consumer: this.query.consumer },
        'outcome stream client missed a heartbeat: disconnected',
      );
      this.ws.terminate();
      return;
    }
    this.alive = false;
    this.ws.ping();
    // For clients that cannot see pings; a connection busy with outcomes shows it is alive anyway.
    if (this.ws.bufferedAmount <= HIGH_WATER_BYTES) this.ws.send(HEARTBEAT_FRAME);
  }

  /** Closes with 1001 and resolves once the socket is closed (destroyed if the peer does not answer). */
  goAway(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.ws.terminate(), CLOSE_GRACE_MS);
      this.ws.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.ws.close(1001, 'going away');
    });
  }

  private wake(): void {
    this.wanted = true;
    if (!this.started || this.pumping || this.waitingForDrain) return;
    this.pumping = true;
    this.pump().then(
      () => {
        this.pumping = false;
        // A wake that came while the pump was finishing (after its last check) must not be lost.
        if (this.wanted && !this.waitingForDrain && this.ws.readyState === WebSocket.OPEN) this.wake();
      },
      (err: unknown) => {
        this.pumping = false;
        this.log.error({ err }, 'outcome stream read failed');
        this.ws.close(1011, 'internal error');
      },
    );
  }

  /** Sends the outbox after `sent`, page by page, until it is exhausted or the socket's queue is full. */
  private async pump(): Promise<void> {
    while (this.wanted && this.ws.readyState === WebSocket.OPEN) {
      this.wanted = false;
      for (;;) {
        const page = this.read();
        if (page.length === 0) break;
        // Only durable outcomes go out: an offset once seen by a client is never reused after a crash.
        await this.feed.whenDurable();
        if (this.ws.readyState !== WebSocket.OPEN) return;
        if (!this.sendPage(page)) {
          // The socket's queue is full: resume (re-reading from `sent`) once it has been written.
          this.waitingForDrain = true;
          this.wanted = true;
          return;
        }
        if (page.length < PAGE_SIZE) break;
        // Let other connections and requests run between pages of a long replay.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
  }

  /** The next page of the filtered set after `sent`. */
  private read(): Outcome[] {
    const { exactQueue } = this.query;
    if (exactQueue === undefined) return this.feed.readOutcomes(this.sent, this.accepts, PAGE_SIZE);
    return this.accepts(exactQueue) ? this.feed.queueOutcomes(exactQueue, this.sent, PAGE_SIZE) : [];
  }

  /**
   * Sends the page's outcomes in order until the socket has more than the high-water mark queued; false if
   * it stopped there (the rest of the page is read again later).
   */
  private sendPage(page: Outcome[]): boolean {
    for (const outcome of page) {
      const text = JSON.stringify({ type: 'outcome', offset: String(outcome.producerSequence), outcome: toJson(OutcomeSchema, outcome) });
      this.sent = outcome.producerSequence;
      this.unacknowledged.record(outcome);
      if (this.ws.bufferedAmount + text.length > HIGH_WATER_BYTES) {
        // Its write callback (always async) tells when everything queued before it has been written too.
        this.ws.send(text, () => this.drained());
        return false;
      }
      this.ws.send(text);
    }
    return true;
  }

  private drained(): void {
    this.waitingForDrain = false;
    if (this.ws.readyState === WebSocket.OPEN) this.wake();
  }

  /** Frames that answer the client (ready, acked, error): a client that never reads them is disconnected. */
  private reply(frame: ServerFrame): void {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    const text = JSON.stringify(frame);
    if (this.replyBacklog + text.length > REPLY_BACKLOG_BYTES) {
      this.ws.close(1008, 'client does not read its frames');
      return;
    }
    this.replyBacklog += text.length;
    this.ws.send(text, () => (this.replyBacklog -= text.length));
  }

  private acked(sequence: bigint, frame: ServerFrame): void {
    for (const [queueId, lags] of this.unacknowledged.acknowledged(sequence, Date.now()))
      this.delivery.delivered(queueId, 'websocket', lags);
    this.reply(frame);
  }

  private fail(err: ServiceError): void {
    this.reply({ type: 'error', code: err.code, message: messageOf(err) });
  }

  /** Ends a connection that may not go on (a named consumer another token claimed first): an error frame, then 1008. */
  refuse(err: ServiceError): void {
    this.fail(err);
    this.ws.close(1008, 'permission denied');
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    if (isBinary) return this.fail(invalidArgument('binary frames are not accepted: send JSON text frames'));
    let frame: unknown;
    try {
      frame = JSON.parse(rawText(data));
    } catch {
      return this.fail(invalidArgument('frame is not valid JSON'));
    }
    if (typeof frame !== 'object' || frame === null || Array.isArray(frame))
      return this.fail(invalidArgument('frame must be a JSON object with a "type"'));
    const { type, offset } = frame as Record<string, unknown>;
    if (type !== 'ack')
      return this.fail(
        invalidArgument(
          `unknown frame type ${typeof type === 'string' ? quote(type) : JSON.stringify(type ?? null).slice(0, 64)}; clients send {"type":"ack","offset":"<n>"}`,
        ),
      );
    let sequence: bigint;
    if (typeof offset === 'string' && OFFSET_PATTERN.test(offset)) sequence = BigInt(offset);
    else if (typeof offset === 'number' && Number.isSafeInteger(offset) && offset >= 0) sequence = BigInt(offset);
    else return this.fail(invalidArgument('ack offset must be a non-negative integer, written as a decimal string'));
    const last = this.feed.lastSequence(this.offsetQueue);
    if (sequence > last) return this.fail(invalidArgument(`ack offset ${sequence} is beyond the last recorded outcome (${last})`));
    const { consumer } = this.query;
    if (consumer === undefined) return this.acked(sequence, { type: 'acked', offset: String(sequence) });
    this.feed.advanceConsumer(consumer, sequence, this.offsetQueue).then(
      (position) => this.acked(sequence, { type: 'acked', offset: String(position), consumer }),
      (err: unknown) => {
        this.log.error({ err, consumer }, 'consumer position could not be stored');
        this.fail(new ServiceError('INTERNAL', 'the acknowledgement could not be stored; send it again', { cause: err }));
      },
    );
  }
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}
