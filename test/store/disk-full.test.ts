// A full disk at start-up: the store opens and reads, but cannot commit. The service must not report ready
// and then crash on the first write: it stays not ready (health NOT_SERVING, /readyz 503, calls
// UNAVAILABLE), logs why as JSON, and turns ready by itself once space is back. The full disk is a real one:
// an 8 MiB tmpfs (mounting needs root; the test is skipped where mount is not allowed).
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { uuid } from '../support/fixtures.js';
import { adminTicket, engineInputOfSize, healthClient } from '../support/queues.js';
import { serveProcess, type ServeProcess } from '../support/serve-process.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';
import { grpcTransport, httpTransport } from '../support/transports.js';

const dirs: string[] = [];
const mounts: string[] = [];
const processes: (TestService | ServeProcess)[] = [];
afterEach(async () => {
  for (const p of processes.splice(0)) await p.kill();
  for (const m of mounts.splice(0)) execFileSync('umount', [m]);
  removeDirs(...dirs.splice(0));
});

/** Fills the file system of `dir` with one file, up to the last byte. */
function fill(file: string): void {
  try {
    writeFileSync(file, Buffer.alloc(64 * 1024 * 1024));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
}

/** Mounts a tmpfs of `size` (root only); undefined where this machine does not allow it. */
function tmpfs(size: string): string | undefined {
  const dir = tempDir('mount');
  dirs.push(dir);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  mounts.push(dir);
  return dir;
}

function queues(): string {
  const queueDir = tempDir('queues');
  dirs.push(queueDir);
  writeQueues(queueDir, { 'test.basic': BASIC_QUEUE });
  return queueDir;
}

it('restarted on a full disk it stays not ready, answers UNAVAILABLE, logs ENOSPC as JSON, and turns ready when space is back', {
  timeout: 60_000,
}, async (ctx) => {
  const mount = tmpfs('8m');
  if (!mount) return ctx.skip('mount -t tmpfs is not allowed here');
  const queueDir = queues();
  const dataDir = join(mount, 'data');

  const first = await startService({ queueDir, dataDir });
  processes.push(first);
  const before = uuid();
  const firstApi = grpcTransport(first);
  expect((await firstApi.createTicket({ id: before, queueId: 'test.basic' })).ok).toBe(true);
  firstApi.close();
  expect(await first.stop()).toBe(0);

  const filler = join(mount, 'filler');
  fill(filler);
  const serve = serveProcess({ queueDir, dataDir });
  processes.push(serve);
  const notReady = await serve.waitForLog((l) => l.msg === 'store cannot commit: not ready, retrying');
  expect(notReady).toMatchObject({ level: 50, dataDir, code: 'ENOSPC' });
  expect(notReady.reason).toMatch(/bytes free on its file system/);
  const service = {
    grpcPort: notReady.grpcPort as number,
    httpPort: notReady.httpPort as number,
    baseUrl: `http://127.0.0.1:${notReady.httpPort}`,
  } as TestService;

  expect((await fetch(`${service.baseUrl}/readyz`)).status).toBe(503);
  expect((await fetch(`${service.baseUrl}/livez`)).status).toBe(200);
  const health = healthClient(service);
  expect(await health.check('')).toBe('NOT_SERVING');
  expect(await health.check('matchmaker.core.v1.MatchmakerService')).toBe('NOT_SERVING');
  const grpc = grpcTransport(service);
  const refused = await grpc.createTicket({ id: uuid(), queueId: 'test.basic' });
  expect(refused).toMatchObject({ ok: false, code: 'UNAVAILABLE' });
  expect(await httpTransport(service).createTicket({ id: uuid(), queueId: 'test.basic' })).toMatchObject({
    ok: false,
    code: 'UNAVAILABLE',
    httpStatus: 503,
  });

  rmSync(filler);
  await serve.waitForLog((l) => l.msg === 'listening');
  expect((await fetch(`${service.baseUrl}/readyz`)).status).toBe(200);
  expect(await health.check('matchmaker.core.v1.MatchmakerService')).toBe('SERVING');
  health.close();
  const after = uuid();
  expect((await grpc.createTicket({ id: after, queueId: 'test.basic' })).ok).toBe(true);
  grpc.close();
  for (const id of [before, after]) expect((await adminTicket(service, 'test.basic', id)).status).toBe(200);

  // Every stdout line is JSON. What could stay raw is lmdb's own C code writing to stderr when a write
  // fails ("Write error: No space left on device position P, size S", no newline): native output the
  // process cannot reroute. (Here the probe's free-space check fails first, so lmdb never tries.)
  expect(serve.logs.filter((l) => 'notJson' in l)).toEqual([]);
  expect(serve.stderr().replace(/Write error: No space left on device position \d+, size \d+/g, '')).toBe('');
});

it('the disk fills while serving: the commit that fails stops the process with a JSON fatal line (ENOSPC), no acknowledged ticket is lost, and the restart waits for space', {
  timeout: 90_000,
}, async (ctx) => {
  const mount = tmpfs('8m');
  if (!mount) return ctx.skip('mount -t tmpfs is not allowed here');
  const queueDir = queues();
  const dataDir = join(mount, 'data');
  const service = await startService({ queueDir, dataDir });
  processes.push(service);
  const api = grpcTransport(service);
  const acknowledged: string[] = [];
  const engineInput = engineInputOfSize(30_000);
  // Writers go on until the service stops answering: the store is full and the process has exited.
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      for (;;) {
        const id = uuid();
        const res = await api.createTicket({ id, queueId: 'test.basic', engineInput });
        if (!res.ok) return;
        acknowledged.push(id);
      }
    }),
  );
  api.close();
  const fatal = await service.waitForLog((l) => l.level === 60);
  const code = service.process.exitCode ?? (await new Promise((resolve) => service.process.once('exit', resolve)));
  expect(code).toBe(1);
  // lmdb reports a write cut short by the full disk as EIO (a short write), a write that got no byte out
  // as ENOSPC.
  expect(fatal).toMatchObject({
    dataDir,
    code: expect.stringMatching(/^(ENOSPC|EIO)$/),
    msg: expect.stringContaining('store commit failed'),
  });
  expect(service.logs.filter((l) => typeof l.msg === 'string' && !('level' in l))).toEqual([]);
  expect(acknowledged.length).toBeGreaterThan(10);

  const restarted = serveProcess({ queueDir, dataDir });
  processes.push(restarted);
  const notReady = await restarted.waitForLog((l) => l.msg === 'store cannot commit: not ready, retrying');
  expect(notReady).toMatchObject({ dataDir, code: 'ENOSPC' });
  expect((await fetch(`http://127.0.0.1:${notReady.httpPort}/readyz`)).status).toBe(503);

  // Space comes back: the volume grows.
  execFileSync('mount', ['-o', 'remount,size=32m', mount]);
  await restarted.waitForLog((l) => l.msg === 'listening');
  const ready = { baseUrl: `http://127.0.0.1:${notReady.httpPort}` } as TestService;
  const missing: string[] = [];
  for (const id of acknowledged) if ((await adminTicket(ready, 'test.basic', id)).status !== 200) missing.push(id);
  expect(missing).toEqual([]);
  expect(restarted.logs.filter((l) => 'notJson' in l)).toEqual([]);
});
