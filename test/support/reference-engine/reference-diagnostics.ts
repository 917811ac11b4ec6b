// The reference engine's (reference-engine.ts) rule diagnostics: the columns of `ruleCounts`
// (RuleDiagnostics in crates/engine/src/diagnostics.rs) and the per-ticket refusal codes (tick/refusals.rs).
// Columns of `ruleCounts`, in RuleDiagnostics::columns order.
export const SKILL_SPREAD = 0;
export const TEAM_IMBALANCE = 1;
export const NO_ACCEPTABLE_HOST = 2;
export const ATTRIBUTES = 3;
export const PARTY_SIZE = 4;
export const FAILED = 5;
export const EXAMINED = 6;
// Codes of `ticketRefusals` (TicketRefusal::code): none, a reason column + 1, or not enough tickets.
export const REFUSAL_NONE = 0;
export const REFUSAL_NOT_ENOUGH_TICKETS = 6;

/** The refusal a seed's failed candidates add up to (TicketRefusal::of_counts): team_imbalance when one was
 *  full but unbalanced, else the reason counted most (the earlier on ties), else not enough tickets. */
export function refusalOf(rejected: readonly number[]): number {
  if (rejected[TEAM_IMBALANCE]! > 0) return TEAM_IMBALANCE + 1;
  let best = REFUSAL_NOT_ENOUGH_TICKETS;
  let most = 0;
  rejected.forEach((k, reason) => {
    if (k > most) [best, most] = [reason + 1, k];
  });
  return best;
}
