// One process per data directory: a second one on the same directory is refused (it would take the same
// producer id and overwrite acknowledged tickets); a holder killed with -9 does not block the restart.
import { lstatSync, readlinkSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { uuid } from '../support/fixtures.js';
import { adminTicket } from '../support/queues.js';
import { serveProcess, type ServeProcess } from '../support/serve-process.js';
import { BASIC_QUEUE, removeDirs, startService, tempDir, writeQueues, type TestService } from '../support/service.js';
import { grpcTransport } from '../support/transports.js';

const dirs: string[] = [];
const services: (TestService | ServeProcess)[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) await s.kill();
  removeDirs(...dirs.splice(0));
});

function dirsForService(): { queueDir: string; dataDir: string } {
  const queueDir = tempDir('queues');
  const dataDir = tempDir('data');
  dirs.push(queueDir, dataDir);
  writeQueues(queueDir, { 'test.basic': BASIC_QUEUE });
  return { queueDir, dataDir };
}

async function createTickets(service: TestService, n: number): Promise<string[]> {
  const api = grpcTransport(service);
  const ids = Array.from({ length: n }, () => uuid());
  for (const id of ids) expect((await api.createTicket({ id, queueId: 'test.basic' })).ok).toBe(true);
  api.close();
  return ids;
}

/** Starts a second serve; resolves with its exit code, or 'ready' if it started serving. */
async function secondStart(queueDir: string, dataDir: string): Promise<{ outcome: number | null | 'ready'; serve: ServeProcess }> {
  const serve = serveProcess({ queueDir, dataDir });
  services.push(serve);
  const outcome = await Promise.race([serve.exited, serve.waitForLog((l) => l.msg === 'listening').then(() => 'ready' as const)]);
  return { outcome, serve };
}

it('refuses a second process on the same data directory, naming the directory and the holder’s pid; after kill -9 of the holder a restart has every acknowledged ticket', async () => {
  const { queueDir, dataDir } = dirsForService();
  const first = await startService({ queueDir, dataDir });
  services.push(first);
  const acknowledged = await createTickets(first, 3);

  const { outcome, serve } = await secondStart(queueDir, dataDir);
  expect(outcome).not.toBe('ready');
  expect(outcome).not.toBe(0);
  const fatal = serve.logs.filter((l) => l.level === 60);
  expect(fatal).toHaveLength(1);
  expect(fatal[0]).toMatchObject({ dataDir, holderPid: first.process.pid, code: 'ELOCKED' });
  expect(fatal[0]!.msg).toContain(dataDir);
  expect(fatal[0]!.msg).toContain(`pid ${first.process.pid}`);
  expect(serve.stderr()).toBe('');

  // The holder goes on serving, its writes intact.
  acknowledged.push(...(await createTickets(first, 3)));
  await first.kill();

  const restarted = await startService({ queueDir, dataDir });
  services.push(restarted);
  for (const id of acknowledged) expect((await adminTicket(restarted, 'test.basic', id)).status).toBe(200);
  expect(restarted.logs.find((l) => l.msg === 'listening')!.producerId).toBe(first.logs.find((l) => l.msg === 'listening')!.producerId);
});

it('a stale lock whose pid now belongs to another process (pid reuse) does not block the start; a clean stop removes the lock', async () => {
  const { queueDir, dataDir } = dirsForService();
  const lock = join(dataDir, 'matchmaker.lock');
  // The test runner is alive, but it started at another time than the one the lock records.
  symlinkSync(`${process.pid}:1:`, lock);
  const service = await startService({ queueDir, dataDir });
  services.push(service);
  const present = () => lstatSync(lock, { throwIfNoEntry: false }) !== undefined;
  expect(readlinkSync(lock)).toMatch(new RegExp(`^${service.process.pid}:`));
  expect(await service.stop()).toBe(0);
  expect(present()).toBe(false);
});
