// A directory of queue files, one YAML file per queue, named <queue_id>.yaml. Re-read on change; a file
// that fails validation is refused with a message naming the file and the path, and its last good
// version stays in force.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { watchDirectories } from './file-watch.js';
import { formatPath, QUEUE_ID_PATTERN, queueFileSchema, type QueueConfig } from './queue-config.js';

export interface QueueFile {
  queueId: string;
  file: string;
  config: QueueConfig;
}

export interface QueueFileError {
  file: string;
  message: string;
}

const QUEUE_FILE = /^(.+)\.ya?ml$/;

/** Reads and validates one queue file. */
export function readQueueFile(file: string, queueId: string): QueueFile | QueueFileError {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(file, 'utf8'));
  } catch (err) {
    return { file, message: `${file}: not valid YAML: ${(err as Error).message}` };
  }
  if (!QUEUE_ID_PATTERN.test(queueId)) {
    return { file, message: `${file}: "${queueId}" is not a valid queue id (dot-separated tokens of letters, digits, _ and -)` };
  }
  const parsed = queueFileSchema.safeParse(doc);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`);
    return { file, message: `${file}: ${issues.join('; ')}` };
  }
  return { queueId, file, config: parsed.data.config };
}

export function isQueueFileError(r: QueueFile | QueueFileError): r is QueueFileError {
  return 'message' in r;
}

export interface DirectoryScan {
  queues: Map<string, QueueFile>;
  errors: QueueFileError[];
}

/**
 * Scans the directory. `previous` supplies the last good version of each queue whose file is now invalid,
 * so a bad edit never takes a queue down.
 */
export function scanQueueDirectory(dir: string, previous?: ReadonlyMap<string, QueueFile>): DirectoryScan {
  const queues = new Map<string, QueueFile>();
  const errors: QueueFileError[] = [];
  const names = readdirSync(dir).sort();
  for (const name of names) {
    const m = QUEUE_FILE.exec(name);
    if (!m || name.startsWith('.')) continue;
    const queueId = m[1]!;
    const file = join(dir, name);
    if (queues.has(queueId)) {
      errors.push({ file, message: `${file}: queue "${queueId}" is already defined by ${queues.get(queueId)!.file}` });
      continue;
    }
    const result = readQueueFile(file, queueId);
    if (isQueueFileError(result)) {
      errors.push(result);
      const lastGood = previous?.get(queueId);
      if (lastGood) queues.set(queueId, lastGood);
    } else {
      queues.set(queueId, result);
    }
  }
  return { queues, errors };
}

/** Watches the directory and calls `onChange` after each burst of changes. */
export function watchQueueDirectory(dir: string, debounceMs: number, onChange: () => void): { close(): void } {
  return watchDirectories([dir], debounceMs, onChange);
}
