// Paths named in comments and docs exist: a comment or a page that sends the reader to a file that was moved
// or deleted misleads. Every token that reads as a repository path (it starts with one of the repository's
// top folders and ends in a file extension) is checked in the source, test, bench and example files' text
// and in the markdown docs. A path under dist/, target/ or node_modules/ is built, not kept, and is skipped;
// so is a glob or a placeholder (`*`, `<`, `{`).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '../..');

const TOP_FOLDERS = [
  'src',
  'test',
  'bench',
  'docs',
  'crates',
  'proto',
  'deploy',
  'queues',
  'examples',
  'clients',
  'packages',
  'native',
  'bin',
];
const SCANNED = ['src', 'test', 'bench', 'examples', 'docs', 'crates', 'packages/client/src', 'clients/python', 'deploy', '.ci'];
const ROOT_FILES = ['README.md', 'CONTRIBUTING.md', 'Dockerfile', 'package.json'];
const TEXT = /\.(ts|rs|md|py|sh|ya?ml|proto|toml|json)$|^\.ci\//;
const SKIP_DIRS = new Set(['node_modules', 'dist', 'target', 'gen', '.venv', '__pycache__', 'build']);
/** Tests whose fixtures are made-up paths (a file the check must find missing). */
const FIXTURE_PATHS = new Set([
  'test/project/build-freshness.test.ts',
  'test/project/docs-links.test.ts',
  'test/project/named-paths.test.ts',
]);

/** A repository path: a top folder, then path characters, ending in an extension. */
const PATH = new RegExp(`(?<![\\w./@-])(?:${TOP_FOLDERS.join('|')})/[\\w./-]*\\.[a-z]{1,5}\\b`, 'g');

function files(dir: string): string[] {
  if (!existsSync(join(ROOT, dir))) return [];
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return SKIP_DIRS.has(entry.name) ? [] : files(path);
    return TEXT.test(path) ? [path] : [];
  });
}

/** Paths named in one file that do not exist, with the line they are on. */
function missingPaths(file: string): string[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  return lines.flatMap((line, i) =>
    [...line.matchAll(PATH)]
      .map((m) => ({ path: m[0].replace(/[.]+$/, ''), at: m.index }))
      // Built paths, and a glob or a placeholder that goes on past the match, are not files to find.
      .filter(({ path, at }) => !/^(?:\w+\/)*(?:dist|target|node_modules)\//.test(path) && !/[*<{]/.test(line.charAt(at + path.length)))
      .map(({ path }) => path)
      // A crate's manifest names its files from its own folder.
      .filter((path) => !existsSync(join(ROOT, path)) && !existsSync(join(ROOT, dirname(file), path)))
      .map((path) => `${file}:${i + 1}: ${path}`),
  );
}

describe('paths named in comments and docs', () => {
  const scanned = [...ROOT_FILES, ...SCANNED.flatMap(files)].filter((file) => !FIXTURE_PATHS.has(file));

  it('reads the source, tests, benchmarks and docs', () => {
    expect(scanned).toContain('src/queue/queue-runtime.ts');
    expect(scanned).toContain('docs/architecture.md');
    expect(scanned.length).toBeGreaterThan(300);
  });

  it('finds the paths a file names', () => {
    // A real path and one that was moved (src/replication/ holds the replicated history now).
    const sample = 'see src/queue/queue-runtime.ts and src/queue/replicated-history.ts';
    expect([...sample.matchAll(PATH)].map((m) => m[0])).toEqual(['src/queue/queue-runtime.ts', 'src/queue/replicated-history.ts']);
    expect(existsSync(join(ROOT, 'src/queue/replicated-history.ts'))).toBe(false);
  });

  it('every named path exists', () => {
    expect(scanned.flatMap(missingPaths)).toEqual([]);
  });
});
