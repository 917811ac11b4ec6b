// The README's five-minute walkthrough, run as written: its shell blocks, in order, in one bash, against the
// service serving the example queues (queues/), with the ports of the walkthrough's first line replaced by
// the test service's. It must end with the match.created outcomes the listener printed.
import { execFile } from 'node:child_process';
import { cpSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeDirs, startService, tempDir, type TestService } from '../support/service.js';

const ROOT = resolve(import.meta.dirname, '../..');
const PORTS_LINE = 'HTTP=localhost:8080 GRPC=localhost:9001';

/** The walkthrough's shell blocks, in order. */
function walkthroughBlocks(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Five-minute walkthrough'), readme.indexOf('## Layout'));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

describe('the README walkthrough', () => {
  let service: TestService;
  beforeAll(async () => {
    const queueDir = tempDir('walkthrough');
    cpSync(join(ROOT, 'queues'), queueDir, { recursive: true });
    service = await startService({ queueDir });
  });
  afterAll(async () => {
    await service?.stop();
    if (service) removeDirs(service.dataDir, service.queueDir);
  });

  // Six seconds of the README's sleeps and a dozen node and curl processes: tens of seconds on a loaded machine
  // (CI once took past vitest's default 30 s).
  it('runs as written and ends with the matches the listener printed', async () => {
    const blocks = walkthroughBlocks();
    expect(blocks[0]).toContain(PORTS_LINE);
    const script = blocks.join('\n').replace(PORTS_LINE, `HTTP=127.0.0.1:${service.httpPort} GRPC=127.0.0.1:${service.grpcPort}`);
    const { stdout } = await promisify(execFile)('bash', ['-e', '-c', script], { cwd: ROOT, timeout: 110_000 });
    const frames = stdout
      .split('\n')
      .filter((l) => l.startsWith('{"type"'))
      .map((l) => JSON.parse(l) as { type: string; outcome?: { kind: string } });
    expect(frames[0]?.type).toBe('ready');
    expect(frames.filter((f) => f.outcome?.kind === 'match.created')).toHaveLength(2);
    expect(stdout).toContain('"code":"INVALID_ARGUMENT"');
    expect(stdout).toContain('{"ticketsCleared":"1","backfillRequestsCleared":"0"}');
    expect(stdout).toMatch(/"kind":"ticket.removed","queueId":"eu.ranked"/);
  }, 120_000);
});
