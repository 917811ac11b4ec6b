// Watching configuration files for hot reload: the queue directory, the access files and the TLS files all
// change the same ways (editors write several events per save, config maps and secrets swap a symlink), so
// they share one watcher.
import { watch, type FSWatcher } from 'node:fs';

/**
 * Calls `onChange` once after each burst of changes in any of `dirs` (a file is watched through its
 * directory: a replaced file keeps no inotify watch, a directory does).
 */
export function watchDirectories(dirs: readonly string[], debounceMs: number, onChange: () => void): { close(): void } {
  let timer: NodeJS.Timeout | undefined;
  const trigger = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(onChange, debounceMs);
  };
  const watchers: FSWatcher[] = [...new Set(dirs)].map((dir) => watch(dir, { persistent: false }, trigger));
  // Some filesystems (network mounts, some container volumes) drop inotify events: a slow poll catches up.
  const poll = setInterval(trigger, Math.max(5000, debounceMs * 4));
  poll.unref();
  return {
    close() {
      for (const w of watchers) w.close();
      clearInterval(poll);
      if (timer) clearTimeout(timer);
    },
  };
}
