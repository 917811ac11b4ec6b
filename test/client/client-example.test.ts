// examples/game-backend (built to dist/examples) against the real service serving the repository's queues/
// (as `npm start` does): it queues players, provisions a server for each match.created, and when provisioning
// fails (every second one here, PROVISION_FAIL_EVERY=2) reactivates the match's tickets, which then play in a
// later match. The example stops by itself after two provisioned matches.
import { spawn } from 'node:child_process';
import { cpSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { removeDirs, startService, tempDir, type TestService } from '../support/service.js';

const ROOT = resolve(import.meta.dirname, '../..');
let service: TestService | undefined;
afterAll(async () => {
  await service?.stop();
  if (service) removeDirs(service.queueDir, service.dataDir);
});

interface Event {
  event: string;
  matchId?: string;
  ticketIds?: string[];
  failedTicketIds?: string[];
}

function runExample(env: Record<string, string>): Promise<{ code: number | null; events: Event[]; stderr: string }> {
  const child = spawn(process.execPath, [resolve(ROOT, 'dist/examples/game-backend/main.js')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((done) =>
    child.once('exit', (code) =>
      done({
        code,
        stderr,
        events: stdout
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Event),
      }),
    ),
  );
}

it('provisions matches and reactivates the tickets of a match whose provisioning failed', async () => {
  const queueDir = tempDir('queues');
  cpSync(resolve(ROOT, 'queues'), queueDir, { recursive: true });
  service = await startService({ queueDir });
  const { code, events, stderr } = await runExample({
    MATCHMAKER_GRPC: `127.0.0.1:${service.grpcPort}`,
    MATCHMAKER_HTTP: service.baseUrl,
    QUEUE_ID: 'eu.ranked',
    PLAYERS: '20',
    PROVISION_FAIL_EVERY: '2',
    STOP_AFTER_PROVISIONED: '2',
    RUN_SECS: '25', // only if something is wrong
  });
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  const of = (name: string) => events.filter((e) => e.event === name);
  expect(of('queued')).toHaveLength(20);
  const [failed] = of('provisioning_failed');
  const [reactivated] = of('reactivated');
  expect(failed).toBeDefined();
  expect(reactivated).toMatchObject({ matchId: failed!.matchId, failedTicketIds: [] });
  expect(reactivated!.ticketIds).toHaveLength(10);
  // Of two full matches the second fails; its players, back in the pool, make the second provisioned match.
  const provisioned = of('provisioned');
  expect(provisioned).toHaveLength(2);
  const again = provisioned.find((p) => p.matchId !== failed!.matchId && reactivated!.ticketIds!.every((id) => p.ticketIds!.includes(id)));
  expect(again).toBeDefined();
  expect(events.at(-1)).toMatchObject({ event: 'stopped', queued: 20, provisioned: 2, reactivated: 1 });
});
