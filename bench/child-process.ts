// Starts a server process for a benchmark (the real service's CLI or the bare server) on free loopback
// ports and waits for its "listening" log line, which carries the gRPC port.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';

export interface Child {
  name: string;
  port: number;
  /** The HTTP port, when the server has one (the service: /metrics). */
  httpPort?: number;
  process: ChildProcess;
  /** Its parsed log lines (the first 10,000). */
  lines: Record<string, unknown>[];
  stderr(): string;
  /** SIGTERM, wait (SIGKILL after timeoutMs); resolves with the exit code. */
  stop(timeoutMs?: number): Promise<number | null>;
}

export interface SpawnOptions {
  nodeArgs?: string[];
  /** How long to wait for "listening" (a large stored pool takes a while to restore). Default 20 s. */
  listenTimeoutMs?: number;
}

/**
 * Node arguments for a spawned service: BENCH_SERVICE_NODE_ARGS (space-separated V8 or Node flags, e.g.
 * `--max-semi-space-size=32`, to compare settings on the service alone, not on the bare server or the
 * bench), and, when BENCH_CPU_PROF names a directory, --cpu-prof writing `<name>-<time>.cpuprofile` there on
 * exit. None otherwise.
 */
export function serviceNodeArgs(name: string): string[] {
  const flags = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter((flag) => flag !== '');
  const dir = process.env.BENCH_CPU_PROF;
  const profile = dir ? ['--cpu-prof', `--cpu-prof-dir=${resolve(dir)}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`] : [];
  return [...flags, ...profile];
}

/** One line of a child's stdout: a pino JSON line, or (anything else it printed) `{ msg: text }`. */
export function parseLogLine(text: string): Record<string, unknown> {
  try {
    const line: unknown = JSON.parse(text);
    if (line !== null && typeof line === 'object' && !Array.isArray(line)) return line as Record<string, unknown>;
  } catch {
    // not JSON: fall through
  }
  return { msg: text };
}

export function spawnServer(name: string, args: string[], env: Record<string, string>, options: SpawnOptions = {}): Promise<Child> {
  const listenTimeoutMs = options.listenTimeoutMs ?? 20_000;
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...args], {
    env: { ...process.env, GRPC_PORT: '0', HTTP_PORT: '0', BIND_ADDRESS: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
  return new Promise<Child>((resolveChild, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name}: no "listening" line within ${listenTimeoutMs} ms; stderr: ${stderr}`)),
      listenTimeoutMs,
    );
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code}) before listening; stderr: ${stderr}`));
    });
    createInterface({ input: child.stdout! }).on('line', (text) => {
      const line = parseLogLine(text);
      if (lines.length < 10_000) lines.push(line);
      if (line.msg === 'listening' && typeof line.grpcPort === 'number') {
        clearTimeout(timer);
        resolveChild({
          name,
          port: line.grpcPort,
          ...(typeof line.httpPort === 'number' ? { httpPort: line.httpPort } : {}),
          process: child,
          lines,
          stderr: () => stderr,
          async stop(timeoutMs = 15_000) {
            if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
            child.kill('SIGTERM');
            const kill = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
            const code = await exited;
            clearTimeout(kill);
            return code;
          },
        });
      }
    });
  });
}
