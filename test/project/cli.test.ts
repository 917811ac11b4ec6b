// The `matchmaker` command as a newcomer meets it: on PATH through npx after `npm install` (package.json
// links bin/matchmaker.js into node_modules/.bin), help that exits 0, usage errors that exit 2.
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** Runs the command as a user would, from the checkout; answers its exit code and what it printed. */
function run(command: string, args: string[]): { status: number | null; out: string } {
  // npm's first run on a fresh machine takes many seconds (14 s here, past 30 s on a loaded CI machine): it builds
  // its cache and looks for an npm update, which this test does not need.
  const env = { ...process.env, npm_config_update_notifier: 'false' };
  const r = spawnSync(command, args, { cwd: ROOT, encoding: 'utf8', timeout: 90_000, env });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('the matchmaker command', () => {
  it('is on PATH through npx, and --help exits 0 with the usage', () => {
    const help = run('npx', ['--no-install', 'matchmaker', '--help']);
    expect(help.status).toBe(0);
    expect(help.out).toContain('matchmaker serve');
    expect(run('npx', ['--no-install', 'matchmaker', 'serve', '--help']).status).toBe(0);
  }, 200_000);

  it('exits 2 with the usage when the command is missing or unknown', () => {
    for (const args of [[], ['frobnicate']]) {
      const r = run(process.execPath, ['bin/matchmaker.js', ...args]);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.out).toContain('usage:');
    }
  });

  it('checks a queue directory', () => {
    const r = run('npx', ['--no-install', 'matchmaker', 'check', '--config', 'queues']);
    expect(r.status).toBe(0);
    expect(r.out).toMatch(/^ok /m);
  }, 100_000);
});
