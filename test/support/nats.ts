// A private nats-server (JetStream enabled) per test file: started on a free loopback port with its own
// store directory, so tests never touch a shared server. It can be killed (SIGKILL, like a crash) and
// restarted on the same port and store directory, and read back the way a customer would: a durable pull
// consumer with explicit acknowledgements.
import { freePort } from '../../bench/nats-cluster.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { OutcomeSchema, type Outcome } from '../../src/gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { removeDirs, tempDir } from './service.js';

const NATS_SERVER = process.env.NATS_SERVER_BIN ?? 'nats-server';

export interface NatsServerOptions {
  /** Extra server configuration (nats-server config file syntax), e.g. an authorization block. */
  config?: string;
}

export interface TestNatsServer {
  readonly port: number;
  readonly url: string;
  readonly storeDir: string;
  /** Whether the server process is currently running. */
  readonly running: boolean;
  /** SIGKILL: the server vanishes without a goodbye, like a crash. Resolves once the process exited. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and store directory; resolves once it accepts clients. */
  restart(): Promise<void>;
  /** Kills the server and removes its directories. */
  dispose(): Promise<void>;
}

/** One nats-server process, started with the same arguments every time: it can be killed and started again. */
export interface NatsProcess {
  /** Whether the process is currently running. */
  readonly running: boolean;
  /** Starts the process; resolves once it accepts clients ("Server is ready"). Retries a few times, as a
   *  port may still be held for a moment after a kill. */
  start(): Promise<void>;
  /** SIGKILL: the server vanishes without a goodbye, like a crash. Resolves once the process exited. */
  kill(): Promise<void>;
  /** SIGSTOP: the process freezes with its sockets open (a hung host): peers see silence, not a close. */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
}

export function natsProcess(args: readonly string[], what: string): NatsProcess {
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  return {
    get running() {
      return running();
    },
    async start() {
      for (let attempt = 0; ; attempt++) {
        const proc = spawn(NATS_SERVER, args, { stdio: ['ignore', 'ignore', 'pipe'] });
        let stderr = '';
        const gone = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
        const ready = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), 10_000);
          proc.stderr!.on('data', (d: Buffer) => {
            stderr += d.toString();
            if (stderr.includes('Server is ready')) {
              clearTimeout(timer);
              resolve(true);
            }
          });
          void gone.then(() => {
            clearTimeout(timer);
            resolve(false);
          });
          proc.once('error', () => resolve(false));
        });
        if (ready) {
          // Keep draining stderr so the pipe never fills up (into NATS_TEST_LOG_DIR/<what>.log when set, to read later).
          proc.stderr!.removeAllListeners('data');
          const logDir = process.env.NATS_TEST_LOG_DIR;
          if (logDir) {
            const file = createWriteStream(join(logDir, `${what.replace(/[^\w.-]+/g, '_')}.log`), { flags: 'a' });
            file.write(stderr);
            proc.stderr!.pipe(file);
          }
          proc.stderr!.resume();
          child = proc;
          exited = gone.then(() => undefined);
          return;
        }
        proc.kill('SIGKILL');
        await gone;
        if (attempt >= 4) throw new Error(`nats-server did not start (${what}): ${stderr}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    async kill() {
      if (!running()) return;
      child!.kill('SIGKILL');
      await exited;
    },
    pause() {
      if (!running()) return;
      child!.kill('SIGSTOP');
      untilStopped(child!.pid!);
    },
    resume() {
      if (running()) child!.kill('SIGCONT');
    },
  };
}

/**
 * Waits (up to a second) until the kernel shows process `pid` stopped. kill() only sends SIGSTOP: a test that
 * then expects the node silent must not race the signal (a broker-sink fault test once stored an outcome
 * through a node 2 ms after it was "stopped", and stayed connected to it).
 */
function untilStopped(pid: number): void {
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; waited < 1000; waited++) {
    // The state is the field after the command's closing parenthesis: T (stopped) or t (traced).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (/^[Tt]$/.test(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3))) return;
    Atomics.wait(nap, 0, 0, 1);
  }
}

export async function startNatsServer(options: NatsServerOptions = {}): Promise<TestNatsServer> {
  const port = await freePort();
  const dir = tempDir('nats');
  const storeDir = join(dir, 'store');
  const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', storeDir];
  if (options.config !== undefined) {
    const file = join(dir, 'server.conf');
    writeFileSync(file, options.config);
    args.push('-c', file);
  }
  const server = natsProcess(args, `port ${port}`);
  await server.start();
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    storeDir,
    get running() {
      return server.running;
    },
    kill: () => server.kill(),
    async restart() {
      await server.kill();
      await server.start();
    },
    async dispose() {
      await server.kill();
      removeDirs(dir);
    },
  };
}

/** A client connection to the test server; it reconnects (quickly) when the server is restarted. */
export function natsClient(server: TestNatsServer): Promise<NatsConnection> {
  return connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
}

/**
 * Resolves once the client is connected (a PING is answered). A request sent while the client is
 * reconnecting can lose its reply, so tests wait for this after restarting the server.
 */
export async function untilConnected(nc: NatsConnection, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await nc.flush();
      return;
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

export interface ReceivedOutcome {
  subject: string;
  contentType: string | undefined;
  msgId: string | undefined;
  outcome: Outcome;
  streamSequence: number;
}

/**
 * What a customer's consumer sees: a durable pull consumer with explicit acks on `filterSubject`, created on
 * first use and read from the start of the stream. `read(n)` returns every message received so far once at
 * least `n` arrived (or the time is up: then whatever was received, so the assertion shows it).
 */
export class OutcomeReader {
  private readonly received: ReceivedOutcome[] = [];
  private created = false;

  constructor(
    private readonly nc: NatsConnection,
    readonly stream: string,
    readonly durable: string,
    readonly filterSubject: string,
  ) {}

  private async ensure(jsm: JetStreamManager): Promise<void> {
    if (this.created) return;
    await jsm.consumers.add(this.stream, {
      durable_name: this.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: this.filterSubject,
    });
    this.created = true;
  }

  /**
   * Pulls up to `max` messages (waiting at most `expiresMs`, at least 1000), acks them, and returns
   * everything received so far.
   */
  async pull(max = 1000, expiresMs = 1000): Promise<ReceivedOutcome[]> {
    const jsm = await jetstreamManager(this.nc);
    await this.ensure(jsm);
    const consumer = await jetstream(this.nc).consumers.get(this.stream, this.durable);
    const messages = await consumer.fetch({ max_messages: max, expires: Math.max(1000, expiresMs) });
    for await (const m of messages) {
      this.received.push(decode(m));
      m.ack();
    }
    return [...this.received];
  }

  /**
   * Reads until at least `count` messages were received in all, then returns them. Errors (the stream not
   * created yet, the server restarting) are retried until the time is up; then whatever was received is
   * returned, so the caller's assertion shows it.
   */
  async read(count: number, timeoutMs = 15_000): Promise<ReceivedOutcome[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      try {
        await untilConnected(this.nc, Math.max(0, deadline - Date.now()));
        await this.pull(Math.max(1, count - this.received.length));
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
      if (this.received.length >= count || Date.now() >= deadline) return [...this.received];
    }
  }
}

function decode(m: JsMsg): ReceivedOutcome {
  return {
    subject: m.subject,
    contentType: m.headers?.get('Content-Type') || undefined,
    msgId: m.headers?.get('Nats-Msg-Id') || undefined,
    outcome: fromBinary(OutcomeSchema, m.data),
    streamSequence: m.seq,
  };
}

/** Every message currently in `stream` (message count, per the stream's state). */
export async function streamMessageCount(nc: NatsConnection, stream: string): Promise<number> {
  await untilConnected(nc);
  const jsm = await jetstreamManager(nc);
  return (await jsm.streams.info(stream)).state.messages;
}

export { freePort };
