// One NATS connection for the process, opened on first use (the first broker sink), so a deployment whose
// queues use other sinks never connects. It reconnects forever; ready() hands out the connection once the
// outcome stream has been made sure of (src/outcomes/broker/stream.ts), and checks the stream again after
// every reconnect. Nothing here throws out of a callback, so the process never crashes on a broker problem.
// BROKER_URL is logged and put in errors only redacted (the target's `display`).
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { AuthorizationError, connect, deadline, UserAuthenticationExpiredError, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { ServiceConfig } from '../../config/service-config.js';
import { redactSecrets } from '../../log.js';
import { connectionOptions } from '../../nats/connection-options.js';
import { BrokerError, describeError, findCause } from '../../nats/broker-error.js';
import { ensureOutcomeStream } from './stream.js';

/** How long one publish waits for its PubAck, and one JetStream API request for its answer. */
export const REQUEST_TIMEOUT_MS = 5000;
/** How long a round trip to the server may take before a server that also let a publish go unanswered is left. */
const SILENCE_PROBE_MS = 2_000;

export interface Ready {
  nc: NatsConnection;
  js: JetStreamClient;
}

export class BrokerConnection {
  readonly prefix: string;
  readonly streamName: string;
  /** BROKER_URL with its credentials masked: what logs and errors name. */
  readonly display: string;
  private connecting: Promise<NatsConnection> | undefined;
  private streamChecked: Promise<void> | undefined;
  private closed = false;
  private warmedUp = false;
  /** False between a disconnect and the reconnect of the current connection. */
  private connected = true;
  private readonly reconnectWaiters = new Set<() => void>();
  /** The connection once made, and whether a round trip to its server is being tried (suspectSilence). */
  private current: NatsConnection | undefined;
  private probing = false;

  constructor(
    readonly config: ServiceConfig,
    readonly log: Logger,
  ) {
    this.prefix = config.broker_subject_prefix_outcomes;
    this.streamName = config.broker_stream_outcomes;
    this.display = redactSecrets(config.broker_url);
  }

  /**
   * Connects (once) and makes sure the outcome stream is usable; throws a BrokerError naming the problem
   * otherwise. A later call tries again.
   */
  async ready(): Promise<Ready> {
    if (this.closed) throw new BrokerError('closed', 'broker connection is closed');
    // While reconnecting, a request's reply can be lost (the request is buffered and replayed), so wait for
    // the connection (bounded) rather than publish into it.
    if (this.connecting && !this.connected && !(await this.reconnected(REQUEST_TIMEOUT_MS))) {
      throw new BrokerError('unreachable', `NATS at ${this.display} is unreachable; reconnecting`);
    }
    const nc = await (this.connecting ??= this.open().catch((err: unknown) => {
      this.connecting = undefined;
      throw err;
    }));
    const settings = {
      name: this.streamName,
      prefix: this.prefix,
      mode: this.config.broker_resource_mode,
      replicas: this.config.broker_stream_replicas,
      timeoutMs: REQUEST_TIMEOUT_MS,
      display: this.display,
    };
    await (this.streamChecked ??= ensureOutcomeStream(nc, settings, this.log).catch((err: unknown) => {
      this.streamChecked = undefined;
      throw err;
    }));
    return { nc, js: jetstream(nc, { timeout: REQUEST_TIMEOUT_MS }) };
  }

  /**
   * Connects and checks the stream in the background (once: every broker sink calls this), so that a
   * misconfiguration shows at startup rather than with the first outcome.
   */
  warmUp(): void {
    if (this.warmedUp) return;
    this.warmedUp = true;
    this.ready().catch((err: unknown) => {
      if (this.closed) return;
      const kind = err instanceof BrokerError ? err.kind : undefined;
      this.log.error({ err: describeError(err), kind, url: this.display, stream: this.streamName }, 'outcome broker not ready');
    });
  }

  private reconnected(timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.reconnectWaiters.delete(wake);
        resolve(ok);
      };
      const wake = () => done(this.connected);
      const timer = setTimeout(() => done(this.connected), timeoutMs);
      this.reconnectWaiters.add(wake);
    });
  }

  private setConnected(connected: boolean): void {
    this.connected = connected;
    if (connected) for (const wake of [...this.reconnectWaiters]) wake();
  }

  /**
   * A publish went unanswered. If the server does not answer a round trip either, it is hung (SIGSTOP, a
   * frozen host: it keeps its connections open, so only pings would tell, after 10 to 15 s): leave it for
   * another node now. A stream without a leader (an election) leaves the server answering: nothing changes.
   */
  suspectSilence(): void {
    const nc = this.current;
    if (!nc || this.probing || this.closed || !this.connected) return;
    this.probing = true;
    deadline(nc.flush(), SILENCE_PROBE_MS)
      .catch(() => {
        if (this.closed || nc.isClosed()) return;
        this.log.warn({ server: nc.getServer(), url: this.display }, 'outcome broker: NATS server silent; moving to another node');
        return nc.reconnect();
      })
      .catch(() => undefined)
      .finally(() => {
        this.probing = false;
      });
  }

  /** The stream may have vanished (deleted, or the server lost its store): check it again before the next publish. */
  recheckStream(): void {
    this.streamChecked = undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const wake of [...this.reconnectWaiters]) wake();
    const pending = this.connecting;
    this.connecting = undefined;
    this.streamChecked = undefined;
    if (!pending) return;
    const nc = await pending.catch(() => undefined);
    if (nc && !nc.isClosed()) await nc.close().catch(() => undefined);
  }

  private async open(): Promise<NatsConnection> {
    const { options } = connectionOptions(this.config, {
      name: 'matchmaker',
      reconnectTimeWaitMs: 1000,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
    });
    let nc: NatsConnection;
    try {
      nc = await connect(options);
    } catch (err) {
      const refused = findCause(err, AuthorizationError) ?? findCause(err, UserAuthenticationExpiredError);
      throw new BrokerError(refused ? 'unauthorized' : 'unreachable', `cannot connect to NATS at ${this.display}`, { cause: err });
    }
    if (this.closed) {
      await nc.close().catch(() => undefined);
      throw new BrokerError('closed', 'broker connection is closed');
    }
    this.log.info({ url: this.display, server: nc.getServer() }, 'connected to the outcome broker');
    this.setConnected(true);
    this.current = nc;
    void this.watch(nc);
    return nc;
  }

  /** Logs connection changes; forgets the connection once it closed for good, so the next use reconnects. */
  private async watch(nc: NatsConnection): Promise<void> {
    const closing = nc.closed().then((err) => {
      if (this.closed) return;
      this.log.error({ err: err ? describeError(err) : undefined }, 'outcome broker connection closed; reconnecting on next delivery');
      if (this.connecting) {
        void this.connecting.then(
          (current) => {
            if (current === nc) {
              this.connecting = undefined;
              this.streamChecked = undefined;
              this.setConnected(true);
            }
          },
          () => undefined,
        );
      }
    });
    try {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') {
          this.connected = false;
          this.log.warn({ server: s.server }, 'outcome broker disconnected; reconnecting');
        } else if (s.type === 'reconnect') {
          this.log.info({ server: s.server }, 'outcome broker reconnected');
          // The server may have come back without its store: check the stream before trusting it.
          this.recheckStream();
          this.setConnected(true);
        } else if (s.type === 'error') this.log.warn({ err: describeError(s.error) }, 'outcome broker error');
      }
    } catch {
      // the status iterator ends with the connection
    }
    await closing;
  }
}
