// Starts the real service (the built CLI, dist/src/cli.js) as a child process on free loopback ports, with
// its own queue directory and data directory, and talks to it over real sockets.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll } from 'vitest';
import { parseLogLine } from '../../bench/child-process.js';

const CLI = resolve(import.meta.dirname, '../../dist/src/cli.js');

export interface ServiceOptions {
  /** Queue files by queue id (YAML text). Ignored when queueDir is given. */
  queues?: Record<string, string>;
  queueDir?: string;
  dataDir?: string;
  env?: Record<string, string>;
  /** How long to wait for the service to listen (a large stored pool takes a while to restore). */
  startTimeoutMs?: number;
}

export interface TestService {
  grpcPort: number;
  httpPort: number;
  baseUrl: string;
  queueDir: string;
  dataDir: string;
  process: ChildProcess;
  /** Every log line the service printed, parsed. */
  logs: Record<string, unknown>[];
  /** SIGTERM, then wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: no shutdown code runs. */
  kill(): Promise<void>;
  /** Resolves with the first log line for which `match` is true. */
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `mm-${prefix}-`));
}

export function writeQueues(dir: string, queues: Record<string, string>): void {
  for (const [id, yaml] of Object.entries(queues)) writeFileSync(join(dir, `${id}.yaml`), yaml);
}

/** A queue with one 2x5 ruleset that does not tick during a test (API tests count the pool). */
export const BASIC_QUEUE = `
config:
  tick_interval_ms: 3600000
  rulesets:
    - id: 5v5
      teams: 2
      team_size: 5
`;

export async function startService(options: ServiceOptions = {}): Promise<TestService> {
  const queueDir = options.queueDir ?? tempDir('queues');
  if (!options.queueDir) writeQueues(queueDir, options.queues ?? { 'test.basic': BASIC_QUEUE });
  const dataDir = options.dataDir ?? tempDir('data');
  const child = spawn(process.execPath, [CLI, 'serve', '--config', queueDir, '--data', dataDir], {
    env: {
      ...process.env,
      GRPC_PORT: '0',
      HTTP_PORT: '0',
      BIND_ADDRESS: '127.0.0.1',
      LOG_LEVEL: 'info',
      CONFIG_RELOAD_DEBOUNCE_MS: '50',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  const waiters = new Set<{ match: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }>();
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    const line = parseLogLine(text);
    logs.push(line);
    for (const w of waiters) {
      if (w.match(line)) {
        waiters.delete(w);
        w.resolve(line);
      }
    }
  });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));

  const waitForLog = (match: (l: Record<string, unknown>) => boolean, timeoutMs = 15_000) => {
    const seen = logs.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise<Record<string, unknown>>((res, rej) => {
      const waiter = { match, resolve: res };
      waiters.add(waiter);
      const timer = setTimeout(() => {
        waiters.delete(waiter);
        rej(new Error(`log line not seen within ${timeoutMs} ms; stderr: ${stderr}`));
      }, timeoutMs);
      timer.unref();
      void exited.then((code) => {
        if (waiters.delete(waiter)) rej(new Error(`service exited (${code}) before the log line; stderr: ${stderr}`));
      });
    });
  };

  const listening = await waitForLog((l) => l.msg === 'listening', options.startTimeoutMs).catch((err: unknown) => {
    child.kill('SIGKILL'); // never leave a half-started service behind
    throw err;
  });
  const grpcPort = listening.grpcPort as number;
  const httpPort = listening.httpPort as number;
  return {
    grpcPort,
    httpPort,
    baseUrl: `http://127.0.0.1:${httpPort}`,
    queueDir,
    dataDir,
    process: child,
    logs,
    waitForLog,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

export function removeDirs(...dirs: string[]): void {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
}

/** One service for the whole test file: started before its tests, stopped and removed after them. */
export function useService(options: ServiceOptions = {}): { readonly service: TestService } {
  let service: TestService | undefined;
  beforeAll(async () => {
    service = await startService(options);
  });
  afterAll(async () => {
    if (!service) return;
    await service.stop();
    removeDirs(service.dataDir, service.queueDir);
  });
  return {
    get service(): TestService {
      if (!service) throw new Error('the service is not started yet (use it inside tests or hooks)');
      return service;
    },
  };
}
