// Sweep mode: the engine run once per value of one ruleset bound, on the same arrivals, so a designer can
// read wait against match quality and pick a setting.
import { formatPath, type QueueConfig, queueConfigSchema, type RulesetConfig } from '../../src/config/queue-config.js';
import type { Summary } from './metrics.js';

export const SWEEP_KEYS = ['max_skill_spread', 'max_team_imbalance', 'max_latency_ms'] as const;
export type SweepKey = (typeof SWEEP_KEYS)[number];

export interface Sweep {
  key: SweepKey;
  values: number[];
}

export interface SweepPoint {
  value: number;
  config: QueueConfig;
  summary: Summary;
}

/** `KEY=v1,v2,...`; throws an Error whose message says what is wrong. */
export function parseSweep(raw: string): Sweep {
  const eq = raw.indexOf('=');
  const key = raw.slice(0, eq).trim();
  if (eq < 0 || !(SWEEP_KEYS as readonly string[]).includes(key)) {
    throw new Error(`--sweep must be KEY=v1,v2,... with KEY one of ${SWEEP_KEYS.join(', ')}, got "${raw}"`);
  }
  const values = raw
    .slice(eq + 1)
    .split(',')
    .map((v) => v.trim());
  const numbers = values.map(Number);
  const integer = key === 'max_latency_ms';
  const bad = values.find(
    (v, i) => v === '' || !Number.isFinite(numbers[i]) || numbers[i]! <= 0 || (integer && !Number.isInteger(numbers[i])),
  );
  if (bad !== undefined) throw new Error(`--sweep ${key}: "${bad}" is not a positive ${integer ? 'integer' : 'number'}`);
  if (new Set(numbers).size !== numbers.length) throw new Error(`--sweep ${key}: a value is repeated`);
  return { key: key as SweepKey, values: numbers };
}

/**
 * The queue with `key` set to `value` on every ruleset. Relaxation keeps its shape: each step's bound of the
 * same kind is scaled by value / the ruleset's base (latency rounded to whole ms), so the steps still widen
 * in the same proportions. The result is validated by the queue schema like a queue file.
 */
export function withSetting(config: QueueConfig, key: SweepKey, value: number): QueueConfig {
  const rulesets = config.rulesets.map((r): RulesetConfig => {
    if (key === 'max_team_imbalance') return { ...r, max_team_imbalance: value };
    if (key === 'max_skill_spread') {
      const scale = value / r.max_skill_spread;
      return {
        ...r,
        max_skill_spread: value,
        // At least the new base: a step equal to the old base must not land a rounding error below it.
        relaxation: r.relaxation.map((s) => ({ ...s, max_skill_spread: Math.max(value, s.max_skill_spread * scale) })),
      };
    }
    const scale = value / r.max_latency_ms;
    const relaxation = r.relaxation.map((s) => ({ ...s, max_latency_ms: Math.max(1, Math.round(s.max_latency_ms * scale)) }));
    return { ...r, max_latency_ms: value, relaxation };
  });
  const parsed = queueConfigSchema.safeParse({ ...config, rulesets });
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`--sweep ${key}=${value} gives an invalid queue: ${issues}`);
  }
  return parsed.data;
}
