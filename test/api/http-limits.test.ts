// The HTTP port bounds what one client can hold: a request whose headers or body never finish is answered
// 408 and closed after its timeout, connections beyond the cap are closed as they arrive, and an upgraded
// WebSocket stream (no longer a request) is not cut by the request timeout.
import { connect, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { removeDirs, startService, type TestService, useService } from '../support/service.js';

const REQUEST_TIMEOUT_MS = 1000;
const HEADERS_TIMEOUT_MS = 500;
/** Generous: Node checks the timeouts on an interval, and the machine is shared. */
const CUT_OFF_WITHIN_MS = 5000;

const env = useService({
  env: {
    HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    WEBSOCKET_HEARTBEAT_MS: '300',
  },
});

/** A raw TCP connection to the HTTP port that records what it receives and when it closed. */
class RawConnection {
  received = '';
  closedAfterMs: number | undefined;
  readonly closed: Promise<void>;
  private readonly socket: Socket;
  private readonly start = performance.now();
  private dribble: NodeJS.Timeout | undefined;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (d: Buffer) => (this.received += d.toString()));
    this.socket.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      this.socket.once('close', () => {
        this.closedAfterMs = performance.now() - this.start;
        clearInterval(this.dribble);
        resolve();
      }),
    );
  }

  connected(): Promise<void> {
    return new Promise((resolve) => (this.socket.connecting ? this.socket.once('connect', () => resolve()) : resolve()));
  }

  write(text: string): void {
    if (!this.socket.destroyed) this.socket.write(text);
  }

  /** Writes `chunk` every `everyMs`, forever (until the server closes the connection). */
  dribbleForever(chunk: string, everyMs = 100): void {
    this.dribble = setInterval(() => this.write(chunk), everyMs);
  }

  /** Resolves with the answer to GET /livez on this connection (kept alive). */
  async livez(): Promise<string> {
    const before = this.received.length;
    this.write('GET /livez HTTP/1.1\r\nhost: test\r\n\r\n');
    const deadline = performance.now() + 5000;
    while (!this.received.slice(before).includes('"status":"ok"') && this.closedAfterMs === undefined && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    return this.received.slice(before);
  }

  /** Waits for the close, at most `ms`; true if closed. */
  async closedWithin(ms: number): Promise<boolean> {
    await Promise.race([this.closed, new Promise((r) => setTimeout(r, ms))]);
    return this.closedAfterMs !== undefined;
  }

  destroy(): void {
    clearInterval(this.dribble);
    this.socket.destroy();
  }
}

describe('HTTP request timeouts', () => {
  it('answers 408 and closes a connection whose body never finishes', async () => {
    const c = new RawConnection(env.service.httpPort);
    await c.connected();
    c.write(
      'POST /v1/queues/test.basic/tickets HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{',
    );
    c.dribbleForever(' ');
    const closed = await c.closedWithin(CUT_OFF_WITHIN_MS);
    c.destroy();
    expect({ closed, answer: c.received.split('\r\n')[0] }).toEqual({ closed: true, answer: 'HTTP/1.1 408 Request Timeout' });
    expect(c.closedAfterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
  });

  it('answers 408 and closes a connection whose headers never finish', async () => {
    const c = new RawConnection(env.service.httpPort);
    await c.connected();
    c.write('GET /livez HTTP/1.1\r\nhost: test\r\n');
    c.dribbleForever('x-slow: 1\r\n');
    const closed = await c.closedWithin(CUT_OFF_WITHIN_MS);
    c.destroy();
    expect({ closed, answer: c.received.split('\r\n')[0] }).toEqual({ closed: true, answer: 'HTTP/1.1 408 Request Timeout' });
  });

  it('keeps an upgraded WebSocket stream open well past the request timeout', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${env.service.httpPort}/v1/outcomes/stream`);
    let frames = 0;
    ws.on('message', () => frames++);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    await new Promise((r) => setTimeout(r, 3 * REQUEST_TIMEOUT_MS + 500));
    expect(ws.readyState).toBe(WebSocket.OPEN);
    const before = frames;
    await new Promise((r) => setTimeout(r, 700));
    expect(frames).toBeGreaterThan(before); // heartbeats still arrive
    ws.close();
  });
});

describe('HTTP connection cap', () => {
  let service: TestService | undefined;
  afterAll(async () => {
    await service?.stop();
    if (service) removeDirs(service.dataDir, service.queueDir);
  });

  it('closes connections beyond HTTP_MAX_CONNECTIONS while the earlier ones keep working', async () => {
    service = await startService({ env: { HTTP_MAX_CONNECTIONS: '3', HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000' } });
    const open = [0, 1, 2].map(() => new RawConnection(service!.httpPort));
    for (const c of open) expect(await c.livez()).toContain('HTTP/1.1 200 OK');

    const extra = new RawConnection(service.httpPort);
    await extra.connected();
    extra.write('GET /livez HTTP/1.1\r\nhost: test\r\n\r\n');
    expect(await extra.closedWithin(CUT_OFF_WITHIN_MS)).toBe(true);
    expect(extra.received).toBe('');

    for (const c of open) expect(await c.livez()).toContain('HTTP/1.1 200 OK');
    // A freed place is taken by the next connection.
    open[0]!.destroy();
    await open[0]!.closed;
    await new Promise((r) => setTimeout(r, 100));
    const next = new RawConnection(service.httpPort);
    expect(await next.livez()).toContain('HTTP/1.1 200 OK');
    for (const c of [...open, next]) c.destroy();
  });
});
