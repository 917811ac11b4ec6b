// The documentation is self-contained: someone who clones the repository can follow every link in it.
// Checked in README.md, CONTRIBUTING.md, CHANGELOG.md, docs/**/*.md and bench/*.md:
// - a markdown link (inline, reference definition, autolink, HTML href/src) points to a file or directory of
//   the repository that exists, or to a heading of this or another markdown file that exists; never to a URL;
// - a bare http(s)/ws(s) URL appears only inside code (a code span or a fenced block), and then only to a
//   loopback host, a reserved example name (example.com, *.example, *.test, *.invalid) or a placeholder
//   (`ws://<host>:8080`): such a URL is an example to type, not a link to follow;
// - a path that climbs out with `../` resolves, from the file's directory, inside the repository; outside
//   code blocks it must also exist (docs name repository paths from the root, so `../x` is a link gone wrong).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function documentationFiles(): string[] {
  const md = (dir: string, recursive: boolean) =>
    readdirSync(join(ROOT, dir), { recursive })
      .map(String)
      .filter((f) => f.endsWith('.md'))
      .map((f) => join(dir, f));
  return ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', ...md('docs', true), ...md('bench', false)].sort();
}

/** The file's text split three ways, offsets kept (everything else blanked, newlines kept). */
interface Regions {
  prose: string;
  inlineCode: string;
  fenced: string;
}

const blank = (s: string) => s.replace(/[^\n]/g, ' ');

function regions(text: string): Regions {
  const kind = new Uint8Array(text.length); // 0 prose, 1 inline code, 2 fenced block
  let offset = 0;
  let fence: { char: string; length: number } | undefined;
  for (const line of text.split('\n')) {
    const opener = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      kind.fill(2, offset, offset + line.length);
      const closer = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
      if (closer && closer[1]![0] === fence.char && closer[1]!.length >= fence.length) fence = undefined;
    } else if (opener) {
      kind.fill(2, offset, offset + line.length);
      fence = { char: opener[1]![0]!, length: opener[1]!.length };
    }
    offset += line.length + 1;
  }
  const outsideFences = [...text].map((c, i) => (kind[i] === 2 && c !== '\n' ? ' ' : c)).join('');
  // A code span: a run of backticks, closed by a run of the same length, within one paragraph.
  for (const m of outsideFences.matchAll(/(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n)[\s\S])*?[^`])\1(?!`)/g)) {
    kind.fill(1, m.index, m.index + m[0].length);
  }
  const only = (k: number) => [...text].map((c, i) => (kind[i] === k || c === '\n' ? c : ' ')).join('');
  return { prose: only(0), inlineCode: only(1), fenced: only(2) };
}

/** GitHub's heading anchors (lowercase, punctuation dropped, spaces to hyphens, repeats numbered) and HTML anchors. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const { fenced } = regions(text);
  let offset = 0;
  for (const line of text.split('\n')) {
    const inFence = fenced.slice(offset, offset + line.length).trim() !== '';
    offset += line.length + 1;
    if (inFence) continue;
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(line);
    if (heading) {
      const slug = heading[1]!
        .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
        .replace(/<[^>]+>/g, '')
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
        .replace(/ /g, '-');
      const n = seen.get(slug) ?? 0;
      seen.set(slug, n + 1);
      anchors.add(n === 0 ? slug : `${slug}-${n}`);
    }
    for (const m of line.matchAll(/<a\s[^>]*\b(?:name|id)\s*=\s*["']([^"']+)["']/gi)) anchors.add(m[1]!);
  }
  return anchors;
}

const LOOPBACK_OR_EXAMPLE =
  /^(localhost|127(\.\d{1,3}){3}|0\.0\.0\.0|\[::1?\]|(.+\.)?example\.(com|net|org)|.+\.(example|test|invalid|localhost))$/i;

/** True for a URL written as an example to type: loopback, a reserved example name, a placeholder, no host. */
function isExampleUrl(url: string): boolean {
  const host = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/?#]*@)?(\[[^\]]*\]|[^/?#:]*)/i.exec(url)?.[1] ?? '';
  return host === '' || /^[<{$]/.test(host) || LOOPBACK_OR_EXAMPLE.test(host);
}

const URL_PATTERN = /\b(?:https?|wss?):\/\/[^\s`'"<>)\]]*/gi;
const CLIMBING_PATH = /(?<![\w./-])(?:\.\.\/)+[^\s`'"()<>[\]{},;]*/g;

/** Every way the file leaves the repository or points at nothing, as `file:line: what`. */
function linkProblems(
  file: string,
  text: string,
  exists: (repoPath: string) => boolean,
  anchorsIn: (repoPath: string) => Set<string>,
): string[] {
  const problems: string[] = [];
  const lineOf = (index: number) => text.slice(0, index).split('\n').length;
  const report = (index: number, what: string) => problems.push(`${file}:${lineOf(index)}: ${what}`);
  const { prose, inlineCode, fenced } = regions(text);
  const dir = dirname(file);
  const inside = (repoPath: string) => repoPath !== '..' && !repoPath.startsWith(`..${sep}`) && !repoPath.startsWith('../');
  const fromFile = (target: string) => relative(ROOT, resolve(ROOT, dir, target));

  const checkTarget = (rawTarget: string, index: number) => {
    const target = rawTarget.replace(/^<|>$/g, '');
    if (target === '') return report(index, 'empty link target');
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return report(index, `link leaves the repository: ${target}`);
    if (target.startsWith('/')) return report(index, `absolute link (use a path relative to the file): ${target}`);
    const [pathPart = '', anchor] = target.split('#', 2);
    const path = decodeURIComponent(pathPart.split('?')[0]!);
    const repoPath = path === '' ? file : fromFile(path);
    if (!inside(repoPath)) return report(index, `link leaves the repository: ${target}`);
    if (!exists(repoPath)) return report(index, `link to a file that does not exist: ${target}`);
    if (anchor !== undefined && repoPath.endsWith('.md') && !anchorsIn(repoPath).has(decodeURIComponent(anchor).toLowerCase())) {
      report(index, `link to a heading that does not exist: ${target}`);
    }
  };

  // Markdown links, outside code. Their targets are blanked afterwards, so the path scan below sees prose only.
  let proseLeft = prose;
  const blankOut = (start: number, length: number) => {
    proseLeft = proseLeft.slice(0, start) + blank(proseLeft.slice(start, start + length)) + proseLeft.slice(start + length);
  };
  const linkPatterns = [
    /!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*(<[^>\n]*>|[^\s)]*)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/g,
    /^ {0,3}\[[^\]\n]+\]:\s*(<[^>\n]*>|\S+)/gm,
    /<((?:https?|wss?|ftp|mailto):[^>\s]*)>/gi,
    /\b(?:href|src)\s*=\s*["']([^"']*)["']/gi,
  ];
  for (const pattern of linkPatterns) {
    for (const m of prose.matchAll(pattern)) {
      const at = m.index + m[0].lastIndexOf(m[1]!);
      checkTarget(m[1]!, at);
      blankOut(at, m[1]!.length);
    }
  }
  for (const m of proseLeft.matchAll(URL_PATTERN)) report(m.index, `URL outside code leaves the repository: ${m[0]}`);
  for (const code of [inlineCode, fenced]) {
    for (const m of code.matchAll(URL_PATTERN)) {
      if (!isExampleUrl(m[0])) report(m.index, `URL leaves the repository (only loopback and example hosts in code): ${m[0]}`);
    }
  }
  for (const [region, mustExist] of [
    [proseLeft, true],
    [inlineCode, true],
    [fenced, false],
  ] as const) {
    for (const m of region.matchAll(CLIMBING_PATH)) {
      const repoPath = fromFile(m[0]);
      if (!inside(repoPath)) report(m.index, `path leaves the repository: ${m[0]}`);
      else if (mustExist && !exists(repoPath)) report(m.index, `path to a file that does not exist: ${m[0]}`);
    }
  }
  return problems;
}

const onDisk = (repoPath: string) => existsSync(join(ROOT, repoPath));
const anchorCache = new Map<string, Set<string>>();
const anchorsOnDisk = (repoPath: string) => {
  let anchors = anchorCache.get(repoPath);
  if (!anchors) {
    const full = join(ROOT, repoPath);
    anchors = statSync(full).isFile() ? anchorsOf(readFileSync(full, 'utf8')) : new Set<string>();
    anchorCache.set(repoPath, anchors);
  }
  return anchors;
};

describe('documentation links stay inside the repository', () => {
  const files = documentationFiles();

  it('reads the files it is meant to', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', join('docs', 'api-reference.md')]));
    expect(files.filter((f) => f.startsWith(`bench${sep}`)).length).toBeGreaterThan(0);
  });

  it.each(files)('%s', (file) => {
    expect(linkProblems(file, readFileSync(join(ROOT, file), 'utf8'), onDisk, anchorsOnDisk)).toEqual([]);
  });
});

describe('the link check itself', () => {
  const known = new Set(['README.md', 'docs', join('docs', 'api.md'), 'proto']);
  const check = (text: string, file = 'README.md') =>
    linkProblems(
      file,
      text,
      (p) => known.has(p),
      (p) => (p === join('docs', 'api.md') ? new Set(['transports']) : new Set(['run-it'])),
    );

  it('refuses what the README used to link: a spec outside the clone and a GitHub page', () => {
    const old = [
      '- Contract: [`../shared/spec/matchmaking-service.md`](../shared/spec/matchmaking-service.md) and [`proto/`](proto/).',
      '**3. Create a ticket over gRPC.** Server reflection is on, so [grpcurl](https://github.com/fullstorydev/grpcurl)',
    ].join('\n');
    expect(check(old)).toEqual([
      'README.md:1: link leaves the repository: ../shared/spec/matchmaking-service.md',
      'README.md:2: link leaves the repository: https://github.com/fullstorydev/grpcurl',
      'README.md:1: path leaves the repository: ../shared/spec/matchmaking-service.md',
    ]);
  });

  it('refuses bare URLs, spec paths in code spans, missing files and missing headings', () => {
    expect(check('See https://example.org/x for more.')).toHaveLength(1);
    expect(check('The contract is `../shared/spec/matchmaking-service.md`.', join('docs', 'api.md'))).toEqual([
      'docs/api.md:1: path to a file that does not exist: ../shared/spec/matchmaking-service.md',
    ]);
    expect(check('[x](docs/nope.md)')).toEqual(['README.md:1: link to a file that does not exist: docs/nope.md']);
    expect(check('[x](docs/api.md#errors)')).toEqual(['README.md:1: link to a heading that does not exist: docs/api.md#errors']);
    expect(check('<https://example.com>')).toHaveLength(1);
    expect(check('```sh\ncurl https://api.github.com/x\n```')).toHaveLength(1);
    expect(check('```sh\ncat ../../etc/passwd\n```')).toHaveLength(1);
  });

  it('takes anchors from headings as GitHub does, not from comments in code blocks', () => {
    const doc = ['# API reference', '## Health, readiness and `reflection`', '## Notes', '## Notes', '```py', '# Flask:', '```'].join('\n');
    expect([...anchorsOf(doc)]).toEqual(['api-reference', 'health-readiness-and-reflection', 'notes', 'notes-1']);
  });

  it('allows repository links, headings, and loopback or example URLs in code', () => {
    const fine = [
      '[API](docs/api.md#transports), [proto](proto/), [run](#run-it)',
      '```sh',
      'curl -s localhost:8080/livez',
      'curl -s http://127.0.0.1:8080/readyz',
      'grpcurl -plaintext localhost:9001 list',
      '```',
      'The endpoint is `ws://<host>:8080/v1/outcomes/stream`, `https://` or `http://` for the webhook,',
      '`url: https://backend.example.com/hook`, and `nats://n1:4222`.',
    ].join('\n');
    expect(check(fine)).toEqual([]);
  });
});
