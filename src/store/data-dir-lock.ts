// One process per data directory. Two services on one lmdb environment both start (lmdb admits several
// writers by design), take the same producer id and overwrite each other's acknowledged tickets.
//
// The lock is a symbolic link, `matchmaker.lock`, whose target names the holder: `pid:start:boot` (its
// process id, the process's start time in clock ticks since boot, the kernel's boot id). Creating a
// symlink is atomic and fails if the name exists; its target is written with it (no window in which the
// lock exists but says nothing) and, being short, is kept in the inode, so taking the lock needs no data
// block on a full disk. Node has no flock(2); this is the scheme Emacs uses for its lock files.
//
// A holder that died without removing the link (kill -9, power loss) does not block a restart: the link
// is stale when its process is gone, when that pid now belongs to a process started at another time
// (pid reuse, a container's pid 1 after a restart), or when the machine has rebooted since.
import { readFileSync, readlinkSync, lstatSync, symlinkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { codeOf, DataDirError, describeError } from './data-dir.js';

export const LOCK_NAME = 'matchmaker.lock';
/** A breaker that died mid-break leaves its guard behind; past this age another may take over. */
const GUARD_STALE_MS = 10_000;

interface Holder {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: fixed for the life of a process, different for a reused pid. */
  startTicks: string;
  bootId: string;
}

const readOr = (read: () => string, fallback: string) => {
  try {
    return read();
  } catch {
    return fallback;
  }
};

/** Fields 3 (state) and 22 (start time) of /proc/<pid>/stat, if the process exists. */
function procStat(pid: number): { state: string; startTicks: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count from after it (field 3).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '', startTicks: fields[22 - 3] ?? '' };
  } catch {
    return undefined;
  }
}

const bootId = () => readOr(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), '');

function thisProcess(): Holder {
  return { pid: process.pid, startTicks: procStat(process.pid)?.startTicks ?? '', bootId: bootId() };
}

const encode = (h: Holder) => `${h.pid}:${h.startTicks}:${h.bootId}`;

function decode(target: string): Holder | undefined {
  const [pid, startTicks = '', boot = ''] = target.split(':');
  const n = Number(pid);
  return Number.isInteger(n) && n > 0 ? { pid: n, startTicks, bootId: boot } : undefined;
}

function isAlive(holder: Holder): boolean {
  const boot = bootId();
  if (holder.bootId && boot && holder.bootId !== boot) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    // EPERM: the process exists but is not ours to signal.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
  }
  const now = procStat(holder.pid);
  // Gone since the signal, or no /proc on this system (then the pid's existence is all there is to go by).
  if (!now) return procStat(process.pid) === undefined;
  // A zombie (killed, not yet reaped by its parent) holds nothing.
  return now.state !== 'Z' && !(holder.startTicks && now.startTicks !== holder.startTicks);
}

const unlinkQuietly = (path: string) => {
  try {
    unlinkSync(path);
  } catch {
    // Someone else removed it: the same outcome.
  }
};
const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
export class DataDirLock {
  private held = true;
  private readonly onExit = () => this.release();

  private constructor(
    readonly path: string,
    private readonly target: string,
  ) {
    // Also on process.exit (a fatal error, a refused start-up): the next start then finds no link at all.
    process.once('exit', this.onExit);
  }

  /** Takes the directory's lock or throws a DataDirError naming the holder. */
  static acquire(dataDir: string): DataDirLock {
    const path = join(dataDir, LOCK_NAME);
    const me = encode(thisProcess());
    for (let attempt = 0; attempt < 20; attempt++) {
      try {
        symlinkSync(me, path);
        return new DataDirLock(path, me);
      } catch (err) {
        if (codeOf(err) !== 'EEXIST')
          throw new DataDirError(dataDir, `its lock cannot be created: ${describeError(err)}`, { code: codeOf(err) }, { cause: err });
      }
      let target: string;
      try {
        target = readlinkSync(path);
      } catch (err) {
        if (codeOf(err) === 'ENOENT') continue; // released in between: try again
        throw new DataDirError(dataDir, `${path} exists and is not a lock this service wrote (remove it if no service runs here)`, {
          code: codeOf(err),
        });
      }
      const holder = decode(target);
      if (holder && isAlive(holder)) {
        const who = holder.pid === process.pid ? 'this process already has it open' : `another process (pid ${holder.pid}) holds it`;
        throw new DataDirError(dataDir, `${who}: one process per data directory (lock ${path})`, {
          code: 'ELOCKED',
          holderPid: holder.pid,
        });
      }
      breakStale(path, target, me);
    }
    throw new DataDirError(dataDir, `its lock ${path} kept changing hands; try again`, { code: 'ELOCKED' });
  }

  /** Removes the link if it is still this process's (idempotent). */
  release(): void {
    if (!this.held) return;
    this.held = false;
    process.removeListener('exit', this.onExit);
    try {
      if (readlinkSync(this.path) === this.target) unlinkSync(this.path);
    } catch {
      // Already gone (the directory was removed): nothing to release.
    }
  }
}

/**
 * Removes a stale lock whose target is `target`. Two starters may find the same stale lock: a guard named
 * after it (created as atomically as the lock) lets one of them remove it, and only while it still holds
 * that target, so a lock a faster starter has taken in the meantime is never removed.
 */
function breakStale(path: string, target: string, me: string): void {
  const guard = `${path}.break-${target.replace(/[^0-9A-Za-z-]/g, '_')}`;
  try {
    symlinkSync(me, guard);
  } catch (err) {
    if (codeOf(err) !== 'EEXIST') throw err;
    const age = readOr(() => String(Date.now() - lstatSync(guard).mtimeMs), '0');
    if (Number(age) > GUARD_STALE_MS) unlinkQuietly(guard);
    else sleepSync(50); // another starter is breaking it: look again shortly
    return;
  }
  try {
    if (readlinkSync(path) === target) unlinkSync(path);
  } catch (err) {
    if (codeOf(err) !== 'ENOENT') throw err;
  } finally {
    unlinkQuietly(guard);
  }
}
