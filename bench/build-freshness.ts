// Tests and benchmarks run the compiled service (dist/src/cli.js), not src/: after an edit without a build
// they would silently measure or test the old code. This compares each source file with its compiled output
// and refuses to go on when one is missing or older. It lives under bench/ so the benchmarks (compiled by
// tsconfig.build.json, which takes src and bench only) can use it as well as the tests.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export interface StaleSource {
  /** The source file, relative to the source root (e.g. `api/http.ts`). */
  source: string;
  /** Its compiled file, relative to the output root (e.g. `api/http.js`). */
  output: string;
  /** `missing`: never compiled; `older`: the source was changed after the last build. */
  reason: 'missing' | 'older';
}

function* sourceFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) yield path;
  }
}

/** Every `.ts` file under `srcDir` whose `.js` under `outDir` (same relative path) is missing or older. */
export function staleSources(srcDir: string, outDir: string): StaleSource[] {
  const stale: StaleSource[] = [];
  for (const path of sourceFiles(srcDir)) {
    const source = relative(srcDir, path);
    const output = source.replace(/\.ts$/, '.js');
    const compiled = statSync(join(outDir, output), { throwIfNoEntry: false });
    if (!compiled) stale.push({ source, output, reason: 'missing' });
    else if (statSync(path).mtimeMs > compiled.mtimeMs) stale.push({ source, output, reason: 'older' });
  }
  return stale.sort((a, b) => a.source.localeCompare(b.source));
}

/** Each compiled tree: the service (and benches), the example, and the client package with its own dist/. */
const TREES: readonly { src: string; out: string }[] = [
  { src: 'src', out: 'dist/src' },
  { src: 'examples', out: 'dist/examples' },
  { src: 'packages/client/src', out: 'packages/client/dist' },
];

/** Throws, naming the first stale files, unless every tree's output under `<root>` is compiled from its current sources. */
export function assertBuildFresh(root: string): void {
  const stale = TREES.filter((t) => existsSync(join(root, t.src))).flatMap((t) =>
    staleSources(join(root, t.src), join(root, t.out)).map((s) => ({ ...s, tree: t.src })),
  );
  if (stale.length === 0) return;
  const shown = stale.slice(0, 5).map((s) => `${s.tree}/${s.source}${s.reason === 'missing' ? ' (never compiled)' : ''}`);
  const more = stale.length > shown.length ? ` and ${stale.length - shown.length} more` : '';
  throw new Error(
    `dist/ is older than ${shown.join(', ')}${more}: run \`npm run build:ts\` (or \`npm test\`, which builds first); ` +
      "the tests and benchmarks run the compiled dist/src/cli.js and the client package's dist/",
  );
}
