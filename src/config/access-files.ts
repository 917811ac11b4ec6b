// The access files: the bearer tokens file (AUTH_TOKENS_FILE) and the JWKS file (AUTH_JWKS_FILE). Read at
// start and on every change; a file that fails validation is refused with a message naming the file and the
// entry, and the last good version stays in force (src/core/access.ts).
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { formatPath } from './queue-config.js';

/** What a token may do: the six operations, the outcome stream, the operator routes, /metrics. */
export const SCOPES = ['tickets', 'outcomes', 'admin', 'metrics'] as const;
export type Scope = (typeof SCOPES)[number];

const tokenEntrySchema = z
  .object({
    /** Who holds the token: named in logs and as the owner of the WebSocket consumers it opens. */
    name: z
      .string()
      .min(1)
      .max(200)
      .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces'),
    /** Hex SHA-256 of the token: the token itself is never stored. */
    sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, "must be the 64 hex digits of the token's SHA-256")
      .transform((s) => s.toLowerCase()),
    scopes: z.array(z.enum(SCOPES)).min(1),
  })
  .strict();

export type TokenEntry = z.infer<typeof tokenEntrySchema>;

const tokensFileSchema = z
  .object({ tokens: z.array(tokenEntrySchema) })
  .strict()
  .superRefine(({ tokens }, ctx) => {
    const seen = { name: new Map<string, number>(), sha256: new Map<string, number>() };
    tokens.forEach((entry, i) => {
      for (const key of ['name', 'sha256'] as const) {
        const first = seen[key].get(entry[key]);
        if (first !== undefined) {
          ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['tokens', i, key], message: `same ${key} as tokens[${first}]` });
        }
        seen[key].set(entry[key], i);
      }
    });
  });

/** A file's text, or a message naming the file when it cannot be read. */
export function readAccessFile(file: string): { text: string } | { message: string } {
  try {
    return { text: readFileSync(file, 'utf8') };
  } catch (err) {
    return { message: `${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}` };
  }
}

/** Validates the tokens file's text: its entries, or a message naming the file and what is wrong. */
export function parseTokensFile(file: string, text: string): { entries: TokenEntry[] } | { message: string } {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    return { message: `${file}: not valid YAML: ${(err as Error).message}` };
  }
  const parsed = tokensFileSchema.safeParse(doc);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`);
    return { message: `${file}: ${issues.join('; ')}` };
  }
  return { entries: parsed.data.tokens };
}

/** Validates the JWKS file's text (RFC 7517 JSON: `{"keys": [...]}`); the keys themselves are checked by the verifier. */
export function parseJwksFile(file: string, text: string): { jwks: { keys: Record<string, unknown>[] } } | { message: string } {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    return { message: `${file}: not valid JSON: ${(err as Error).message}` };
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || !keys.every((k) => typeof k === 'object' && k !== null)) {
    return { message: `${file}: must be a JSON Web Key Set, {"keys": [...]} with at least one key` };
  }
  return { jwks: { keys: keys as Record<string, unknown>[] } };
}
