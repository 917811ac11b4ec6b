// The data directory: any name works; one that cannot hold the store stops start-up with one structured
// log line naming it and the reason (not a stack trace from inside lmdb), and a non-zero exit.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { adminTicket } from '../support/queues.js';
import { serveProcess } from '../support/serve-process.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';
import { grpcTransport } from '../support/transports.js';
import { uuid } from '../support/fixtures.js';

const dirs: string[] = [];
const mounts: string[] = [];
const services: TestService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.kill();
  for (const m of mounts.splice(0)) execFileSync('umount', [m]);
  removeDirs(...dirs.splice(0));
});

function queueDir(): string {
  const dir = tempDir('queues');
  dirs.push(dir);
  writeQueues(dir, { 'test.basic': BASIC_QUEUE });
  return dir;
}

/** Starts serve on `dataDir`, expects it to exit non-zero, and returns its one fatal line. */
async function refusedStart(dataDir: string): Promise<Record<string, unknown>> {
  const serve = serveProcess({ queueDir: queueDir(), dataDir });
  const code = await serve.exited;
  expect(code).not.toBe(0);
  expect(serve.logs.filter((l) => 'notJson' in l)).toEqual([]);
  const fatal = serve.logs.filter((l) => l.level === 60);
  expect(fatal).toHaveLength(1);
  expect(serve.stderr()).toBe('');
  return fatal[0]!;
}

/** Mounts a tmpfs (root only); undefined where this machine does not allow it. */
function tmpfs(options: string): string | undefined {
  const dir = tempDir('mount');
  dirs.push(dir);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  mounts.push(dir);
  return dir;
}

describe('an unusable data directory stops start-up with one log line naming it and why', () => {
  it('a regular file', async () => {
    const dir = tempDir('data');
    dirs.push(dir);
    const file = join(dir, 'data');
    writeFileSync(file, 'not a directory');
    const line = await refusedStart(file);
    expect(line).toMatchObject({ dataDir: file, code: 'ENOTDIR', reason: 'it is a file, not a directory' });
    expect(line.msg).toContain(file);
  });

  it('a path under a regular file (cannot be created, for root too)', async () => {
    const dir = tempDir('data');
    dirs.push(dir);
    writeFileSync(join(dir, 'file'), '');
    const path = join(dir, 'file', 'data');
    const line = await refusedStart(path);
    expect(line).toMatchObject({ dataDir: path, code: 'ENOTDIR' });
    expect(line.msg).toContain(path);
  });

  it('a directory on a read-only file system (not writable, for root too)', async (ctx) => {
    const mount = tmpfs('ro,size=1m');
    if (!mount) return ctx.skip('mount -t tmpfs is not allowed here');
    const line = await refusedStart(mount);
    expect(line).toMatchObject({ dataDir: mount, code: 'EROFS' });
    expect(line.reason).toContain('not writable');
  });
});

it('a data directory with a dot in its name (mm.data) starts, takes a ticket and keeps it across a restart', async () => {
  const parent = tempDir('data');
  dirs.push(parent);
  mkdirSync(join(parent, 'sub'));
  const dataDir = join(parent, 'sub', 'mm.data');
  const queues = queueDir();
  const first = await startService({ queueDir: queues, dataDir });
  services.push(first);
  const api = grpcTransport(first);
  const id = uuid();
  expect((await api.createTicket({ id, queueId: 'test.basic' })).ok).toBe(true);
  api.close();
  expect(await first.stop()).toBe(0);

  const second = await startService({ queueDir: queues, dataDir });
  services.push(second);
  expect((await adminTicket(second, 'test.basic', id)).status).toBe(200);
});
