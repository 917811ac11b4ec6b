// `matchmaker serve` as a child process that is not expected to become ready: one refused at start-up
// (exits non-zero) or one waiting for its store (listening, not ready). startService (service.ts) waits
// for `listening`; this waits for whatever line or exit the test names.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

const CLI = resolve(import.meta.dirname, '../../dist/src/cli.js');

export interface ServeProcess {
  /** Every stdout line, parsed; a line that is not JSON is kept as `{ notJson: text }`. */
  logs: Record<string, unknown>[];
  /** Everything printed on stderr so far. */
  stderr(): string;
  /** Resolves with the exit code (null when ended by a signal). */
  exited: Promise<number | null>;
  waitForLog(match: (line: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** SIGKILL, then wait for the exit. */
  kill(): Promise<void>;
}

export function serveProcess(options: { queueDir: string; dataDir: string; env?: Record<string, string> }): ServeProcess {
  const child = spawn(process.execPath, [CLI, 'serve', '--config', options.queueDir, '--data', options.dataDir], {
    env: { ...process.env, GRPC_PORT: '0', HTTP_PORT: '0', BIND_ADDRESS: '127.0.0.1', LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  const listeners = new Set<() => void>();
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  createInterface({ input: child.stdout! }).on('line', (text) => {
    try {
      logs.push(JSON.parse(text) as Record<string, unknown>);
    } catch {
      logs.push({ notJson: text });
    }
    for (const l of listeners) l();
  });
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  return {
    logs,
    stderr: () => stderr,
    exited,
    waitForLog(match, timeoutMs = 20_000) {
      return new Promise((res, rej) => {
        const check = () => {
          const line = logs.find(match);
          if (!line) return;
          listeners.delete(check);
          clearTimeout(timer);
          res(line);
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          rej(new Error(`log line not seen within ${timeoutMs} ms; logs: ${JSON.stringify(logs)}; stderr: ${stderr}`));
        }, timeoutMs);
        listeners.add(check);
        check();
        void exited.then((code) => {
          if (listeners.delete(check)) {
            clearTimeout(timer);
            rej(new Error(`service exited (${code}) before the log line; logs: ${JSON.stringify(logs)}; stderr: ${stderr}`));
          }
        });
      });
    },
    async kill() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
}
