// The gRPC port bounds what one client connection can hold: it advertises grpc_max_concurrent_streams in its
// HTTP/2 SETTINGS (HTTP/2's own default is unbounded), and closes a connection that has had no call for
// grpc_max_connection_idle_ms, never one with a call in progress. Seen from a raw node:http2 client, so no
// gRPC client library hides a GOAWAY or a reconnect.
import { connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { describe, expect, it } from 'vitest';
import { loadServiceConfig } from '../../src/config/service-config.js';
import { useService } from '../support/service.js';
import { grpcTransport } from '../support/transports.js';

const MAX_STREAMS = 7;
const IDLE_MS = 500;
/** Generous: grpc-js checks idleness with a timer, and the machine is shared. */
const CLOSED_WITHIN_MS = 5000;

const env = useService({
  env: { GRPC_MAX_CONCURRENT_STREAMS: String(MAX_STREAMS), GRPC_MAX_CONNECTION_IDLE_MS: String(IDLE_MS) },
});

/** A raw HTTP/2 connection to the gRPC port that records when the server said GOAWAY or the session closed. */
class RawSession {
  readonly session: ClientHttp2Session;
  endedAfterMs: number | undefined;
  readonly ended: Promise<void>;
  private readonly start = performance.now();

  constructor(port: number) {
    this.session = connect(`http://127.0.0.1:${port}`);
    this.session.on('error', () => undefined);
    this.ended = new Promise((resolve) => {
      const end = () => {
        this.endedAfterMs ??= performance.now() - this.start;
        resolve();
      };
      this.session.once('goaway', end);
      this.session.once('close', end);
    });
  }

  /** Waits for a GOAWAY or the close, at most `ms`; true if either came. */
  async endedWithin(ms: number): Promise<boolean> {
    await Promise.race([this.ended, new Promise((r) => setTimeout(r, ms))]);
    return this.endedAfterMs !== undefined;
  }

  /** grpc.health.v1.Health/Watch of the whole service: a call that stays in progress until it is cancelled. */
  watchHealth(): { stream: ClientHttp2Stream; firstMessage: Promise<void> } {
    const stream = this.session.request({
      ':method': 'POST',
      ':path': '/grpc.health.v1.Health/Watch',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    stream.on('error', () => undefined);
    // One length-prefixed message: an empty HealthCheckRequest (service "").
    stream.end(Buffer.from([0, 0, 0, 0, 0]));
    const firstMessage = new Promise<void>((resolve) => stream.once('data', () => resolve()));
    return { stream, firstMessage };
  }

  close(): void {
    this.session.destroy();
  }
}

describe('gRPC connection limits', () => {
  it('defaults to 1000 concurrent streams per connection and a 5 minute idle timeout', () => {
    const config = loadServiceConfig({}, {});
    expect(config.grpc_max_concurrent_streams).toBe(1000);
    expect(config.grpc_max_connection_idle_ms).toBe(300_000);
    expect(() => loadServiceConfig({}, { GRPC_MAX_CONCURRENT_STREAMS: '0' })).toThrow(
      /invalid setting grpc_max_concurrent_streams \(env GRPC_MAX_CONCURRENT_STREAMS\)/,
    );
  });

  it('advertises grpc_max_concurrent_streams in its SETTINGS', async () => {
    const raw = new RawSession(env.service.grpcPort);
    try {
      const settings = await new Promise<{ maxConcurrentStreams?: number }>((resolve) => raw.session.once('remoteSettings', resolve));
      expect(settings.maxConcurrentStreams).toBe(MAX_STREAMS);
      expect(raw.session.remoteSettings.maxConcurrentStreams).toBe(MAX_STREAMS);
    } finally {
      raw.close();
    }
  });

  it('holds a client’s calls beyond the limit until earlier ones end, rather than failing them', async () => {
    const client = grpcTransport(env.service);
    try {
      const results = await Promise.all(
        Array.from({ length: MAX_STREAMS * 8 }, () => client.cancelTicket('test.basic', crypto.randomUUID())),
      );
      expect(results.filter((r) => !r.ok)).toEqual([]);
    } finally {
      client.close();
    }
  });

  it('closes a connection idle for grpc_max_connection_idle_ms', async () => {
    const raw = new RawSession(env.service.grpcPort);
    try {
      expect(await raw.endedWithin(CLOSED_WITHIN_MS)).toBe(true);
      expect(raw.endedAfterMs).toBeGreaterThanOrEqual(IDLE_MS - 50);
    } finally {
      raw.close();
    }
  });

  it('does not cut a connection with a call in progress, and closes it once the call ends', async () => {
    const raw = new RawSession(env.service.grpcPort);
    try {
      const watch = raw.watchHealth();
      await watch.firstMessage;
      expect(await raw.endedWithin(IDLE_MS * 4)).toBe(false);
      expect(watch.stream.closed).toBe(false);
      watch.stream.close();
      expect(await raw.endedWithin(CLOSED_WITHIN_MS)).toBe(true);
    } finally {
      raw.close();
    }
  });

  it('lets a gRPC client whose connection was closed for idleness call again', async () => {
    const client = grpcTransport(env.service);
    try {
      expect(await client.cancelTicket('test.basic', crypto.randomUUID())).toEqual({ ok: true, value: expect.anything() });
      await new Promise((r) => setTimeout(r, IDLE_MS * 3));
      expect(await client.cancelTicket('test.basic', crypto.randomUUID())).toEqual({ ok: true, value: expect.anything() });
    } finally {
      client.close();
    }
  });
});
