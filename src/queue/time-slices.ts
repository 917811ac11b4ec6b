// Long main-thread work of a queue (a tick's results, a restart's pool rebuild) runs in time slices,
// yielding to the event loop between them, so requests wait at most about one slice for it.

/** The longest a slice runs before it yields. */
export const WORK_SLICE_MS = 5;

/**
 * Calls `each(0 .. count-1)` in order, yielding to the event loop whenever a slice has run `sliceMs`;
 * `endOfSlice` runs after each slice, and the next slice waits for the promise it returns, if any (e.g. the
 * commit of what the slice changed). `each` returning false stops the work (after that slice's `endOfSlice`).
 */
export async function timeSliced(count: number, each: (i: number) => void | false, endOfSlice?: () => unknown, sliceMs = WORK_SLICE_MS): Promise<void> {
  let i = 0;
  let stopped = false;
  while (i < count && !stopped) {
    if (i > 0) await new Promise((resolve) => setImmediate(resolve));
    const until = performance.now() + sliceMs;
    do stopped = each(i++) === false;
    while (!stopped && i < count && performance.now() < until);
    await endOfSlice?.();
  }
}
