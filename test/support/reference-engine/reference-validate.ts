// The reference engine's (reference-engine.ts) input checks: those of crates/engine/src/validate.rs, so it
// refuses what the native engine refuses, before writing anything.
import type { MatchArrays, PoolArrays, QueueParams } from '../../../src/engine/native.js';

const MAX_RULESETS = 32;
const MAX_HOSTS = 64;
const MAX_PLAYERS_PER_MATCH = 1024;
/** Values per ruleset in `ruleCounts` (RuleDiagnostics::COLUMNS): the five reasons, failed, examined. */
export const RULE_COLUMNS = 7;

/** The checks of validate.rs `validate` (message wording differs). */
export function validate(pool: PoolArrays, params: QueueParams, out: MatchArrays, nowMs: number): void {
  const n = pool.ticketCount;
  const F = pool.filterCount;
  const H = pool.hostCount;
  const fail = (msg: string): never => {
    throw new Error(`reference engine: ${msg}`);
  };
  if (!Number.isInteger(n) || n < 0 || n >= 0xffff_ffff) fail('bad ticketCount');
  if (H > MAX_HOSTS) fail(`too many hosts: ${H}`);
  if (params.filterModes.length !== F) fail(`filterModes has ${params.filterModes.length} entries, pool has ${F} filters`);
  for (const m of params.filterModes) if (m !== 'overlap' && m !== 'containment') fail(`unknown filter mode "${m}"`);
  const columns: [string, { length: number }, number][] = [
    ['partySize', pool.partySize, n],
    ['mmrMean', pool.mmrMean, n],
    ['arrivalMs', pool.arrivalMs, n],
    ['rulesetMask', pool.rulesetMask, n],
    ['attrValues', pool.attrValues, n * F],
    ['attrAccepts', pool.attrAccepts, n * F],
    ['latencyMs', pool.latencyMs, n * H],
  ];
  for (const [name, col, len] of columns) if (col.length < len) fail(`${name} has ${col.length} elements, needs ${len}`);
  if (!(Number.isFinite(params.mmrNormalizationRef) && params.mmrNormalizationRef > 0)) fail('mmrNormalizationRef must be finite and > 0');
  if (!Number.isFinite(params.partySynergyBonus)) fail('partySynergyBonus must be finite');
  if (!Number.isFinite(nowMs)) fail('nowMs must be finite');
  if (params.rulesets.length > MAX_RULESETS) fail(`too many rulesets: ${params.rulesets.length}`);
  params.rulesets.forEach((rs, r) => {
    const bad = (reason: string) => fail(`ruleset ${r}: ${reason}`);
    if (rs.teams < 1 || rs.teamSize < 1) bad('teams and teamSize must be >= 1');
    if (rs.teams * rs.teamSize > MAX_PLAYERS_PER_MATCH) bad('teams * teamSize exceeds 1024');
    if (!(rs.maxSkillSpread >= 0)) bad('maxSkillSpread must be >= 0');
    if (!(rs.maxTeamImbalance >= 0)) bad('maxTeamImbalance must be >= 0');
    let prev = { afterWaitMs: -Infinity, maxSkillSpread: rs.maxSkillSpread, maxLatencyMs: rs.maxLatencyMs };
    for (const step of rs.relaxation) {
      if (!Number.isFinite(step.afterWaitMs)) bad('relaxation afterWaitMs must be finite');
      if (step.afterWaitMs < prev.afterWaitMs) bad('relaxation steps must be sorted by afterWaitMs');
      if (!(step.maxSkillSpread >= prev.maxSkillSpread)) bad('relaxation steps may only widen maxSkillSpread');
      if (step.maxLatencyMs < prev.maxLatencyMs) bad('relaxation steps may only widen maxLatencyMs');
      prev = step;
    }
    const e = rs.expansion;
    if (e.curve !== 'none' && e.curve !== 'linear' && e.curve !== 'exponential') fail(`unknown expansion curve "${e.curve}"`);
    if (e.curve !== 'none' && !(Number.isFinite(e.overMs) && e.overMs > 0)) bad('expansion overMs must be finite and > 0');
    if (!(e.maxSkillSpread >= rs.maxSkillSpread)) bad('expansion maxSkillSpread must be >= the base');
    if (!(e.maxTeamImbalance >= rs.maxTeamImbalance)) bad('expansion maxTeamImbalance must be >= the base');
    if (e.maxLatencyMs < rs.maxLatencyMs) bad('expansion maxLatencyMs must be >= the base');
    if (Number.isNaN(e.anyHostAfterMs)) bad('expansion anyHostAfterMs must not be NaN');
  });
  for (let i = 0; i < n; i++) {
    if (pool.partySize[i] === 0) fail(`ticket ${i}: partySize is 0`);
    if (!Number.isFinite(pool.mmrMean[i])) fail(`ticket ${i}: mmrMean is not finite`);
    if (!Number.isFinite(pool.arrivalMs[i])) fail(`ticket ${i}: arrivalMs is not finite`);
  }
  const outputs: [string, { length: number }, number][] = [
    ['matchRuleset', out.matchRuleset, n],
    ['matchOffsets', out.matchOffsets, n + 1],
    ['matchTickets', out.matchTickets, n],
    ['ticketTeam', out.ticketTeam, n],
    ['matchPreferredHost', out.matchPreferredHost, n],
    ['matchAcceptableHosts', out.matchAcceptableHosts, n],
    ['matchAccepts', out.matchAccepts, n * F],
    ...(out.ruleCounts === undefined
      ? []
      : [['ruleCounts', out.ruleCounts, params.rulesets.length * RULE_COLUMNS] as [string, { length: number }, number]]),
    ...(out.ticketRefusals === undefined ? [] : [['ticketRefusals', out.ticketRefusals, n] as [string, { length: number }, number]]),
  ];
  for (const [name, buf, len] of outputs) if (buf.length < len) fail(`output ${name} has ${buf.length} elements, needs ${len}`);
}
