// The layering of src/ as docs/architecture.md draws it: imports run one way, from transports down to the
// store. A lower layer never imports a higher one, so each can be read, tested and replaced on its own.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');

/** Each layer and what it may import besides itself. `base` (errors, log, generated code) is open to all. */
const LAYERS: Record<string, readonly string[]> = {
  base: [],
  config: ['base'],
  nats: ['base', 'config'],
  store: ['base', 'config'],
  engine: ['base', 'config'],
  outcomes: ['base', 'config', 'store', 'nats'],
  queue: ['base', 'config', 'store', 'engine', 'outcomes'],
  replication: ['base', 'config', 'store', 'engine', 'outcomes', 'queue', 'nats'],
  core: ['base', 'config', 'store', 'engine', 'outcomes', 'queue'],
  api: ['base', 'config', 'core'],
  modes: ['base', 'config', 'store', 'outcomes', 'queue', 'replication', 'nats'],
  root: ['base', 'config', 'nats', 'store', 'engine', 'outcomes', 'queue', 'replication', 'core', 'api', 'modes'],
};

/**
 * Interfaces a lower layer declares and a higher one implements (ports): the higher layer may import their
 * types, never their code. src/api implements the queues' and delivery's telemetry for /metrics and the dashboard.
 */
const PORTS: Record<string, readonly string[]> = {
  api: ['queue/queue-telemetry.ts', 'outcomes/delivery-telemetry.ts'],
};

/**
 * Packages that tie a layer to one backend or transport, and the layers that may import them: NATS only
 * where the broker sink and the replicated mode live, lmdb only in the store, gRPC only in the transports
 * (and server.ts, which serves health).
 */
const PACKAGE_LAYERS: readonly { pattern: RegExp; layers: readonly string[] }[] = [
  { pattern: /^@nats-io\//, layers: ['nats', 'outcomes', 'replication', 'modes'] },
  { pattern: /^lmdb$/, layers: ['store'] },
  { pattern: /^@grpc\/|^grpc-health-check$/, layers: ['api', 'root'] },
];

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
function importsOf(file: string): { target: string; typeOnly: boolean }[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [...text.matchAll(/(?:^|\n)\s*(import type|import|export)\s[^;]*?from\s+'([^']+)'|import\('([^']+)'\)/g)].map((m) => ({
    specifier: m[2] ?? m[3]!,
    typeOnly: m[1] === 'import type',
  }));
  return specifiers
    .filter(({ specifier }) => specifier.startsWith('.'))
    .map(({ specifier, typeOnly }) => ({ target: resolve(dirname(file), specifier).replace(/\.js$/, '.ts'), typeOnly }))
    .filter(({ target }) => target.startsWith(SRC));
}

describe('source layering', () => {
  const files = sourceFiles(SRC);
  const edges = files.flatMap((file) => importsOf(file).map((edge) => ({ file, ...edge })));

  it('reads the imports of every source file', () => {
    expect(files.length).toBeGreaterThan(20);
    expect(edges.some((e) => relative(SRC, e.file) === 'queue/queue-runtime.ts')).toBe(true);
  });

  it('every layer is known', () => {
    for (const file of files) expect(LAYERS, relative(SRC, file)).toHaveProperty(layerOf(file));
  });

  it('no layer imports a higher one', () => {
    const violations = edges
      .filter(({ file, target, typeOnly }) => {
        const from = layerOf(file);
        const to = layerOf(target);
        if (typeOnly && PORTS[from]?.includes(relative(SRC, target))) return false;
        return from !== to && !LAYERS[from]!.includes(to);
      })
      .map(({ file, target }) => `${relative(SRC, file)} -> ${relative(SRC, target)}`)
      .filter((edge) => !KNOWN_EXCEPTIONS.has(edge));
    expect(violations).toEqual([]);
  });

  it('backend and transport packages are imported only by the layers that own them', () => {
    const misplaced = files.flatMap((file) => {
      const text = readFileSync(file, 'utf8');
      const packages = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+'([^'.][^']*)'/g)].map((m) => m[1]!);
      return packages
        .filter((name) => PACKAGE_LAYERS.some((rule) => rule.pattern.test(name) && !rule.layers.includes(layerOf(file))))
        .map((name) => `${relative(SRC, file)} imports ${name}`);
    });
    expect(misplaced).toEqual([]);
    // The rule reads real imports: the broker sink's connection imports NATS.
    expect(readFileSync(join(SRC, 'outcomes/broker/connection.ts'), 'utf8')).toContain("from '@nats-io/transport-node'");
  });

  it('every known exception still exists (remove it from the list once fixed)', () => {
    const present = new Set(edges.map(({ file, target }) => `${relative(SRC, file)} -> ${relative(SRC, target)}`));
    expect([...KNOWN_EXCEPTIONS].filter((e) => !present.has(e))).toEqual([]);
  });
});
