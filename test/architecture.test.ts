// The layering of src/ as docs/architecture.md draws it: imports run one way, from transports down to the
// store. A lower layer never imports a higher one, so each can be read, tested and replaced on its own.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../src');

/** Each layer and what it may import besides itself. `base` (errors, log, generated code) is open to all. */
const LAYERS: Record<string, readonly string[]> = {
  base: [],
  config: ['base'],
  store: ['base', 'config'],
  engine: ['base', 'config'],
  outcomes: ['base', 'config', 'store'],
  queue: ['base', 'config', 'store', 'engine', 'outcomes'],
  core: ['base', 'config', 'store', 'engine', 'outcomes', 'queue'],
  api: ['base', 'config', 'core'],
  root: ['base', 'config', 'store', 'engine', 'outcomes', 'queue', 'core', 'api'],
};

/** Imports that break the rule today and are being removed; each names its file and target. */
const KNOWN_EXCEPTIONS = new Set<string>([]);

function layerOf(file: string): string {
  const [top, ...rest] = relative(SRC, file).split('/');
  if (rest.length === 0) return top === 'errors.ts' || top === 'log.ts' ? 'base' : 'root';
  if (top === 'gen') return 'base';
  return top!;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'gen' ? [] : sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Relative imports of a file (static, re-exports and dynamic), resolved to .ts paths under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'([^']+)'|import\('([^']+)'\)/g)].map(
    (m) => m[1] ?? m[2]!,
  );
  return specifiers
    .filter((s) => s.startsWith('.'))
    .map((s) => resolve(dirname(file), s).replace(/\.js$/, '.ts'))
    .filter((path) => path.startsWith(SRC));
}

describe('source layering', () => {
  const files = sourceFiles(SRC);
  const edges = files.flatMap((file) => importsOf(file).map((target) => ({ file, target })));

  it('reads the imports of every source file', () => {
    expect(files.length).toBeGreaterThan(20);
    expect(edges.some((e) => relative(SRC, e.file) === 'queue/queue-runtime.ts')).toBe(true);
  });

  it('every layer is known', () => {
    for (const file of files) expect(LAYERS, relative(SRC, file)).toHaveProperty(layerOf(file));
  });

  it('no layer imports a higher one', () => {
    const violations = edges
      .filter(({ file, target }) => {
        const from = layerOf(file);
        const to = layerOf(target);
        return from !== to && !LAYERS[from]!.includes(to);
      })
      .map(({ file, target }) => `${relative(SRC, file)} -> ${relative(SRC, target)}`)
      .filter((edge) => !KNOWN_EXCEPTIONS.has(edge));
    expect(violations).toEqual([]);
  });

  it('every known exception still exists (remove it from the list once fixed)', () => {
    const present = new Set(edges.map(({ file, target }) => `${relative(SRC, file)} -> ${relative(SRC, target)}`));
    expect([...KNOWN_EXCEPTIONS].filter((e) => !present.has(e))).toEqual([]);
  });
});
