// The reference engine's exact two-team packing (crates/engine/src/tick/packing.rs): a party the scan's
// placement has no room for may fit once every party is placed anew. Same table, same choices.

/** Per prefix of `sizes`, the sums some subset of it reaches. */
function reachable(sizes: readonly number[], most: number): Uint8Array[] {
  let cur = new Uint8Array(most + 1);
  cur[0] = 1;
  const out = [cur];
  for (const s of sizes) {
    const next = cur.slice();
    for (let x = 0; x + s <= most; x++) if (cur[x]) next[x + s] = 1;
    out.push(next);
    cur = next;
  }
  return out;
}

/** The largest reachable sum in `total - teamSize ..= teamSize`, or -1. */
function target(reach: Uint8Array, total: number, teamSize: number): number {
  for (let s = Math.min(teamSize, total); s >= Math.max(0, total - teamSize); s--) if (reach[s]) return s;
  return -1;
}

/**
 * Places `sizes` (the parties in the order they were taken) into teams 0 and 1 of `teamSize`, or answers
 * undefined when they do not fit: team 0 takes the largest sum that leaves the other within `teamSize`, and
 * from the last party back a party goes to team 1 whenever the rest can still make team 0's sum.
 */
export function placeTwoTeams(sizes: readonly number[], teamSize: number): number[] | undefined {
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total > 2 * teamSize || 2 * teamSize > 8 * 64 - 1) return undefined;
  const reach = reachable(sizes, 2 * teamSize);
  let t = target(reach[sizes.length]!, total, teamSize);
  if (t < 0) return undefined;
  const teams = new Array<number>(sizes.length);
  for (let i = sizes.length - 1; i >= 0; i--) {
    if (reach[i]![t]) teams[i] = 1;
    else {
      teams[i] = 0;
      t -= sizes[i]!;
    }
  }
  return teams;
}
