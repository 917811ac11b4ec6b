// The broker sink: publishes each queue's outcomes to a NATS JetStream stream (docs/outcomes-broker.md).
//
// One NATS connection serves the whole process. It is opened on first use (the first broker sink), so a
// deployment whose queues use other sinks never connects. Subjects are <prefix>.<queue_id>.<kind>; the
// payload is the binary matchmaker.outcomes.v1.Outcome; the JetStream message id (Nats-Msg-Id) is the
// outcome id, so a re-sent outcome (the dispatcher retries a whole batch after a failure) is dropped by the
// stream's duplicate window instead of stored twice.
//
// Order: outcomes are published one at a time, each only after the previous one's PubAck. Pipelining would
// be faster, but if outcome k failed while k+1 was stored, the retry would store k after k+1 and break the
// per-queue order the contract promises.
//
// Failures (NATS unreachable, stream missing or unsuitable, publish timeout) make deliver() throw; the
// dispatcher retries with backoff. Nothing here throws out of a callback, so the process never crashes on
// a broker problem.
import { readFileSync } from 'node:fs';
import { toBinary } from '@bufbuild/protobuf';
import {
  DiscardPolicy,
  jetstream,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type JetStreamClient,
  type JetStreamManager,
  type PubAck,
  type StreamConfig,
} from '@nats-io/jetstream';
import { fromSeed } from '@nats-io/nkeys';
import {
  connect,
  credsAuthenticator,
  headers,
  nanos,
  nkeyAuthenticator,
  type Authenticator,
  type NatsConnection,
  type NodeConnectionOptions,
} from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { ServiceConfig } from '../../config/service-config.js';
import { OutcomeSchema, type Outcome } from '../../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { OutcomeSink, RetryPolicy } from '../sink.js';

/** Content type of every published outcome. */
export const OUTCOME_CONTENT_TYPE = 'application/x-protobuf';
/** JetStream dedupe window of a stream created by the service (create mode). */
export const DUPLICATE_WINDOW_MS = 2 * 60_000;
/** How long a stream created by the service keeps outcomes (create mode). */
export const STREAM_MAX_AGE_MS = 7 * 24 * 3600_000;
/** How long one publish waits for its PubAck, and one JetStream API request for its answer. */
const REQUEST_TIMEOUT_MS = 5000;

/** The subject of an outcome: <prefix>.<queue_id>.<kind>. */
export function outcomeSubject(prefix: string, queueId: string, kind: string): string {
  return `${prefix}.${queueId}.${kind}`;
}

/**
 * Whether every subject matched by `subject` is also matched by `filter` (NATS wildcards: `*` one token,
 * `>` one or more trailing tokens).
 */
export function subjectCovers(filter: string, subject: string): boolean {
  const f = filter.split('.');
  const s = subject.split('.');
  for (let i = 0; i < f.length; i++) {
    const ft = f[i]!;
    if (ft === '>') return s.length > i;
    if (i >= s.length) return false;
    const st = s[i]!;
    if (st === '>') return false;
    if (ft === '*') continue;
    if (st === '*' || ft !== st) return false;
  }
  return f.length === s.length;
}

const TOKEN = /^[^\s.*>]+$/;

interface Ready {
  nc: NatsConnection;
  js: JetStreamClient;
}

/** One NATS connection for the process, opened on first use. */
export class BrokerConnection {
  readonly prefix: string;
  readonly streamName: string;
  private connecting: Promise<NatsConnection> | undefined;
  private streamChecked: Promise<void> | undefined;
  private closed = false;
  private warmedUp = false;
  /** False between a disconnect and the reconnect of the current connection. */
  private connected = true;
  private readonly reconnectWaiters = new Set<() => void>();

  constructor(
    readonly config: ServiceConfig,
    readonly log: Logger,
  ) {
    this.prefix = config.broker_subject_prefix_outcomes;
    this.streamName = config.broker_stream_outcomes;
  }

  /**
   * Connects (once) and makes sure the outcome stream is usable; throws with a message naming the problem
   * otherwise. A later call tries again.
   */
  async ready(): Promise<Ready> {
    if (this.closed) throw new Error('broker connection is closed');
    // While reconnecting, a request's reply can be lost (the request is buffered and replayed), so wait for
    // the connection (bounded) rather than publish into it.
    if (this.connecting && !this.connected && !(await this.reconnected(REQUEST_TIMEOUT_MS))) {
      throw new Error(`NATS at ${this.config.broker_url} is unreachable; reconnecting`);
    }
    const nc = await (this.connecting ??= this.open().catch((err: unknown) => {
      this.connecting = undefined;
      throw err;
    }));
    await (this.streamChecked ??= this.checkStream(nc).catch((err: unknown) => {
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
      if (!this.closed)
        this.log.error({ err: message(err), url: this.config.broker_url, stream: this.streamName }, 'outcome broker not ready');
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
    const url = this.config.broker_url;
    const servers = url
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const options: NodeConnectionOptions = {
      servers,
      name: 'matchmaker',
      maxReconnectAttempts: -1,
      reconnectTimeWait: 1000,
      timeout: REQUEST_TIMEOUT_MS,
      pingInterval: 30_000,
      maxPingOut: 3,
    };
    const authenticator = this.authenticator();
    if (authenticator) options.authenticator = authenticator;
    let nc: NatsConnection;
    try {
      nc = await connect(options);
    } catch (err) {
      throw new Error(`cannot connect to NATS at ${url}: ${message(err)}`);
    }
    if (this.closed) {
      await nc.close().catch(() => undefined);
      throw new Error('broker connection is closed');
    }
    this.log.info({ url, server: nc.getServer() }, 'connected to the outcome broker');
    this.setConnected(true);
    void this.watch(nc);
    return nc;
  }

  /** Logs connection changes; forgets the connection once it closed for good, so the next use reconnects. */
  private async watch(nc: NatsConnection): Promise<void> {
    const closing = nc.closed().then((err) => {
      if (this.closed) return;
      this.log.error({ err: err ? message(err) : undefined }, 'outcome broker connection closed; reconnecting on next delivery');
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
        } else if (s.type === 'error') this.log.warn({ err: message(s.error) }, 'outcome broker error');
      }
    } catch {
      // the status iterator ends with the connection
    }
    await closing;
  }

  private authenticator(): Authenticator | undefined {
    const credsFile = this.config.broker_credentials_file;
    const seed = this.config.broker_nkey.trim();
    if (credsFile && seed) throw new Error('set only one of BROKER_CREDENTIALS_FILE and BROKER_NKEY');
    if (credsFile) {
      let creds: Uint8Array;
      try {
        creds = readFileSync(credsFile);
      } catch (err) {
        throw new Error(`cannot read BROKER_CREDENTIALS_FILE ${credsFile}: ${message(err)}`);
      }
      // Re-read on every (re)connect so rotated credentials are picked up; fall back to the last good copy.
      return credsAuthenticator(() => {
        try {
          creds = readFileSync(credsFile);
        } catch {
          // keep the previous contents
        }
        return creds;
      });
    }
    if (seed) {
      const bytes = new TextEncoder().encode(seed);
      let publicKey: string;
      try {
        publicKey = fromSeed(bytes).getPublicKey();
      } catch (err) {
        throw new Error(`BROKER_NKEY is not a valid nkey seed: ${message(err)}`);
      }
      if (!publicKey.startsWith('U')) throw new Error('BROKER_NKEY must be a user nkey seed (SU...)');
      return nkeyAuthenticator(bytes);
    }
    return undefined;
  }

  private async checkStream(nc: NatsConnection): Promise<void> {
    const prefix = this.prefix;
    if (!prefix.split('.').every((t) => TOKEN.test(t))) {
      throw new Error(
        `BROKER_SUBJECT_PREFIX_OUTCOMES "${prefix}" is not a valid subject prefix (dot-separated tokens without spaces or wildcards)`,
      );
    }
    const wanted = `${prefix}.>`;
    const name = this.streamName;
    const mode = this.config.broker_resource_mode;
    let jsm: JetStreamManager;
    try {
      jsm = await jetstreamManager(nc, { timeout: REQUEST_TIMEOUT_MS });
    } catch (err) {
      throw new Error(`JetStream is not available on ${this.config.broker_url}: ${message(err)}`);
    }
    const covered = async (): Promise<boolean> => {
      try {
        const info = await jsm.streams.info(name);
        const subjects = info.config.subjects ?? [];
        if (subjects.some((s) => subjectCovers(s, wanted))) return true;
        throw new Error(
          `outcome stream "${name}" exists but its subjects ${JSON.stringify(subjects)} do not cover "${wanted}"; ` +
            `outcomes would not be stored (change the stream's subjects, or BROKER_STREAM_OUTCOMES / BROKER_SUBJECT_PREFIX_OUTCOMES)`,
        );
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound) return false;
        throw err;
      }
    };
    if (await covered()) return;
    if (mode === 'bind') {
      throw new Error(
        `outcome stream "${name}" does not exist; BROKER_RESOURCE_MODE=bind requires it to be provisioned with the subject filter "${wanted}"`,
      );
    }
    const config: Partial<StreamConfig> & { name: string } = {
      name,
      description: 'matchmaker outcomes',
      subjects: [wanted],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_age: nanos(STREAM_MAX_AGE_MS),
      duplicate_window: nanos(DUPLICATE_WINDOW_MS),
      num_replicas: 1,
    };
    try {
      await jsm.streams.add(config);
      this.log.info({ stream: name, subjects: [wanted] }, 'outcome stream created');
    } catch (err) {
      // Another replica may have created it meanwhile: accept it if it fits.
      if (await covered().catch(() => false)) return;
      throw new Error(`cannot create outcome stream "${name}" with subjects ["${wanted}"]: ${message(err)}`);
    }
  }
}

export class BrokerSink implements OutcomeSink {
  readonly kind = 'broker';
  readonly batchSize = 100;
  readonly retry: RetryPolicy = { maxRetries: Infinity, baseDelayMs: 200, maxDelayMs: 10_000 };
  constructor(
    readonly queueId: string,
    readonly connection: BrokerConnection,
    readonly log: Logger,
  ) {
    connection.warmUp();
  }

  async deliver(outcomes: readonly Outcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    const { js } = await this.connection.ready();
    const stream = this.connection.streamName;
    let duplicates = 0;
    for (const outcome of outcomes) {
      const subject = outcomeSubject(this.connection.prefix, this.queueId, outcome.kind);
      const h = headers();
      h.set('Content-Type', OUTCOME_CONTENT_TYPE);
      let ack: PubAck;
      try {
        ack = await js.publish(subject, toBinary(OutcomeSchema, outcome), { msgID: outcome.id, headers: h, timeout: REQUEST_TIMEOUT_MS });
      } catch (err) {
        // No responders: nothing stores the subject any more (stream deleted, server without its store).
        if (/jetstream is not enabled|no responders|503/i.test(message(err))) this.connection.recheckStream();
        throw new Error(`publishing outcome ${outcome.id} to ${subject} failed: ${message(err)}`);
      }
      if (ack.stream !== stream) {
        throw new Error(`outcome ${outcome.id} on ${subject} was stored by stream "${ack.stream}", not "${stream}"`);
      }
      if (ack.duplicate) duplicates++;
    }
    if (duplicates > 0) this.log.debug({ queue: this.queueId, duplicates }, 'outcomes already in the stream (re-sent after a failure)');
  }

  async close(): Promise<void> {}
}

function message(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error && err.cause.message !== err.message ? ` (${err.cause.message})` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}
