// The guard that stops a test run (and a benchmark) on a dist/ older than src/, on a temporary tree so the
// real sources' mtimes are never touched.
import { mkdirSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { assertBuildFresh, staleSources } from '../../bench/build-freshness.js';
import { removeDirs, tempDir } from '../support/service.js';

const dirs: string[] = [];
afterEach(() => removeDirs(...dirs.splice(0)));

/** A repo-like tree: `files` maps a path under the root to its mtime in seconds. */
function tree(files: Record<string, number>): string {
  const root = tempDir('freshness');
  dirs.push(root);
  for (const [path, mtime] of Object.entries(files)) {
    const full = join(root, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, '');
    utimesSync(full, mtime, mtime);
  }
  return root;
}

describe('build freshness', () => {
  it('accepts a build at least as new as every source, nested ones included', () => {
    const root = tree({
      'src/cli.ts': 100,
      'src/api/http.ts': 100,
      'src/types.d.ts': 500, // declarations compile to nothing
      'src/README.md': 500,
      'dist/src/cli.js': 200,
      'dist/src/api/http.js': 100,
    });
    expect(staleSources(join(root, 'src'), join(root, 'dist/src'))).toEqual([]);
    expect(() => assertBuildFresh(root)).not.toThrow();
  });

  it('names each source edited after its compiled file, and each never compiled', () => {
    const root = tree({
      'src/cli.ts': 100,
      'src/api/http.ts': 300,
      'src/core/new-op.ts': 100,
      'dist/src/cli.js': 200,
      'dist/src/api/http.js': 200,
    });
    expect(staleSources(join(root, 'src'), join(root, 'dist/src'))).toEqual([
      { source: join('api', 'http.ts'), output: join('api', 'http.js'), reason: 'older' },
      { source: join('core', 'new-op.ts'), output: join('core', 'new-op.js'), reason: 'missing' },
    ]);
    expect(() => assertBuildFresh(root)).toThrow(
      'dist/ is older than src/api/http.ts, src/core/new-op.ts (never compiled): run `npm run build:ts` (or `npm test`, which builds first)',
    );
  });

  it('compares file by file: a newer build of another file does not hide a stale one', () => {
    const root = tree({ 'src/a.ts': 300, 'src/b.ts': 100, 'dist/src/a.js': 200, 'dist/src/b.js': 900 });
    expect(() => assertBuildFresh(root)).toThrow(/^dist\/ is older than src\/a\.ts: run `npm run build:ts`/);
  });

  it('treats a missing dist/ as never built', () => {
    const root = tree({ 'src/cli.ts': 100 });
    expect(() => assertBuildFresh(root)).toThrow(/src\/cli\.ts \(never compiled\)/);
  });

  it('lists five stale files and counts the rest', () => {
    const root = tree(Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`src/m${i}.ts`, 100])));
    expect(() => assertBuildFresh(root)).toThrow(/src\/m4\.ts \(never compiled\) and 2 more: /);
  });

  it('checks the example and the client package against their own outputs', () => {
    const root = tree({
      'src/cli.ts': 100,
      'dist/src/cli.js': 200,
      'examples/game/main.ts': 100,
      'dist/examples/game/main.js': 200,
      'packages/client/src/client.ts': 300,
      'packages/client/dist/client.js': 200,
    });
    expect(() => assertBuildFresh(root)).toThrow(/^dist\/ is older than packages\/client\/src\/client\.ts: run `npm run build:ts`/);
  });
});
