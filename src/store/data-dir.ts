// The data directory: whether it can hold the store, and why not, in words an operator can act on.
import { accessSync, constants, mkdirSync, statSync } from 'node:fs';
import { constants as os } from 'node:os';

/** The data directory cannot be used: says which and why (and, when another process holds it, its pid). */
export class DataDirError extends Error {
  constructor(
    readonly dataDir: string,
    readonly reason: string,
    readonly details: { code?: string; holderPid?: number } = {},
    options?: { cause?: unknown },
  ) {
    super(`data directory ${dataDir} cannot be used: ${reason}`, options);
    this.name = 'DataDirError';
  }
}

// lmdb reports an errno as a number (28), Node as a name (ENOSPC): one form, the name.
const ERRNO_NAMES = new Map(Object.entries(os.errno).map(([name, n]) => [n, name]));
/** The error's errno name (ENOSPC, EROFS, ...), if it has one. */
export function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code === 'number') return ERRNO_NAMES.get(code);
  return typeof code === 'string' ? code : undefined;
}

const REASONS: Record<string, string> = {
  EROFS: 'read-only file system',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOSPC: 'no space left on device',
  ENOTDIR: 'a part of the path is not a directory',
  EEXIST: 'a file of that name exists and is not a directory',
  ELOOP: 'too many symbolic links in the path',
};

/** A file-system error as a short reason: its code's meaning, then the code itself. */
export function describeError(err: unknown): string {
  const code = codeOf(err);
  if (code && REASONS[code]) return `${REASONS[code]} (${code})`;
  return err instanceof Error ? err.message : String(err);
}

/** Creates the directory if missing; throws a DataDirError saying why it cannot hold the store. */
export function usableDirectory(path: string): void {
  const fail = (reason: string, err?: unknown) => new DataDirError(path, reason, { code: codeOf(err) }, { cause: err });
  try {
    if (!statSync(path).isDirectory()) throw new DataDirError(path, 'it is a file, not a directory', { code: 'ENOTDIR' });
  } catch (err) {
    if (err instanceof DataDirError) throw err;
    if (codeOf(err) !== 'ENOENT') throw fail(describeError(err), err);
    try {
      mkdirSync(path, { recursive: true });
    } catch (err) {
      throw fail(`it cannot be created: ${describeError(err)}`, err);
    }
  }
  try {
    // Also for root, whom permission bits do not stop: a read-only file system fails this (EROFS).
    accessSync(path, constants.R_OK | constants.W_OK);
  } catch (err) {
    throw fail(`it is not writable: ${describeError(err)}`, err);
  }
}
