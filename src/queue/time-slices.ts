// Long main-thread work of a queue (a tick's results, a restart's pool rebuild) runs in time slices,
// yielding to the event loop between them, so requests wait at most about one slice for it.

/**
 * The longest a slice runs before it yields. 2 ms rather than 5: at 3,000 CreateTicket/s with the 1 s
 * ticks resolving a few hundred matches, p90 went from 9.4-13.7 to 6.8-8.9 ms and p99 from 35.6-48.2 to
 * 27.1-35.6 ms (bench/RESULTS.md).
 */
export const WORK_SLICE_MS = 2;

/**
 * Calls `each(0 .. count-1)` in order, yielding to the event loop whenever a slice has run `sliceMs`;
 * `endOfSlice` runs after each slice, and the next slice waits for the promise it returns, if any (e.g. the
 * commit of what the slice changed). `each` returning false stops the work (after that slice's `endOfSlice`).
 */
export async function timeSliced(
  count: number,
  each: (i: number) => void | false,
  endOfSlice?: () => unknown,
  sliceMs = WORK_SLICE_MS,
): Promise<void> {
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
