// Sweep mode: the engine run once per value of one setting, on the same arrivals, so a designer can read
// wait against match quality and pick a setting. A setting is one of the ruleset bounds below (relaxation
// scaled alike), or any path into the queue's config (`rulesets[0].max_skill_spread`, `engine.x.y`), set in
// the parsed YAML before schema validation, so that a key the schema gains later needs no change here.
import { formatPath, type QueueConfig, queueConfigSchema, type RulesetConfig } from '../../src/config/queue-config.js';
import type { Summary } from './metrics.js';

export const SWEEP_KEYS = ['max_skill_spread', 'max_team_imbalance', 'max_latency_ms'] as const;
export type SweepKey = (typeof SWEEP_KEYS)[number];

/** A value set at a config path: numbers, true/false, anything else a string. */
export type SettingValue = number | boolean | string;
/** Object keys and array indices; '*' is every element of an array. */
export type ConfigPath = (string | number | '*')[];

export type Sweep =
  | { kind: 'bound'; key: SweepKey; values: number[] }
  | { kind: 'path'; key: string; path: ConfigPath; values: SettingValue[] };

export interface SweepPoint {
  value: SettingValue;
  config: QueueConfig;
  summary: Summary;
}

const SWEEP_USAGE = `--sweep must be KEY=v1,v2,... with KEY one of ${SWEEP_KEYS.join(', ')}, or a path into the queue's config such as rulesets[0].max_skill_spread`;

/** `rulesets[0].a.b`, `rulesets[*].x`, `engine.default_latency_ms`; undefined when `raw` is not such a path. */
export function parseConfigPath(raw: string): ConfigPath | undefined {
  if (!/^[A-Za-z_]\w*(\[(\d+|\*)\]|\.[A-Za-z_]\w*)+$/.test(raw)) return undefined;
  return [...raw.matchAll(/([A-Za-z_]\w*)|\[(\d+|\*)\]/g)].map((m) => (m[1] ?? (m[2] === '*' ? '*' : Number(m[2]))) as string | number);
}

export function parseSettingValue(raw: string): SettingValue {
  const v = raw.trim();
  if (v === 'true' || v === 'false') return v === 'true';
  const n = Number(v);
  return v !== '' && Number.isFinite(n) ? n : v;
}

/** `KEY=v1,v2,...`; throws an Error whose message says what is wrong. */
export function parseSweep(raw: string): Sweep {
  const eq = raw.indexOf('=');
  const key = raw.slice(0, eq).trim();
  const values = raw
    .slice(eq + 1)
    .split(',')
    .map((v) => v.trim());
  if (eq >= 0 && !(SWEEP_KEYS as readonly string[]).includes(key)) {
    const path = parseConfigPath(key);
    if (!path) throw new Error(`${SWEEP_USAGE}, got "${raw}"`);
    if (values.some((v) => v === '')) throw new Error(`--sweep ${key}: an empty value`);
    const parsed = values.map(parseSettingValue);
    if (new Set(parsed).size !== parsed.length) throw new Error(`--sweep ${key}: a value is repeated`);
    return { kind: 'path', key, path, values: parsed };
  }
  if (eq < 0) throw new Error(`${SWEEP_USAGE}, got "${raw}"`);
  const numbers = values.map(Number);
  const integer = key === 'max_latency_ms';
  const bad = values.find(
    (v, i) => v === '' || !Number.isFinite(numbers[i]) || numbers[i]! <= 0 || (integer && !Number.isInteger(numbers[i])),
  );
  if (bad !== undefined) throw new Error(`--sweep ${key}: "${bad}" is not a positive ${integer ? 'integer' : 'number'}`);
  if (new Set(numbers).size !== numbers.length) throw new Error(`--sweep ${key}: a value is repeated`);
  return { kind: 'bound', key: key as SweepKey, values: numbers };
}

/** `PATH=VALUE` (the --set flag); throws an Error whose message says what is wrong. */
export function parseAssignment(raw: string): { key: string; path: ConfigPath; value: SettingValue } {
  const eq = raw.indexOf('=');
  const key = raw.slice(0, Math.max(0, eq)).trim();
  const path = eq < 0 ? undefined : parseConfigPath(key);
  if (!path || raw.slice(eq + 1).trim() === '') {
    throw new Error(`--set must be PATH=VALUE with PATH a path into the queue's config such as rulesets[0].max_skill_spread, got "${raw}"`);
  }
  return { key, path, value: parseSettingValue(raw.slice(eq + 1)) };
}

/**
 * Sets `path` to `value` in a copy of a raw (not yet validated) queue config; objects on the way that are
 * missing are created. Throws when the path runs into something that is not an object or array.
 */
export function setPath(raw: unknown, path: ConfigPath, value: SettingValue): unknown {
  const root = structuredClone(raw);
  const walk = (node: unknown, i: number, at: string): void => {
    const step = path[i]!;
    const last = i === path.length - 1;
    if (step === '*' || typeof step === 'number') {
      if (!Array.isArray(node)) throw new Error(`${at || '(root)'} is not a list`);
      const indices = step === '*' ? node.map((_, j) => j) : [step];
      for (const j of indices) {
        if (j >= node.length) throw new Error(`${at}[${j}] does not exist (${node.length} entries)`);
        if (last) node[j] = value;
        else walk(node[j], i + 1, `${at}[${j}]`);
      }
      return;
    }
    if (node === null || typeof node !== 'object' || Array.isArray(node)) throw new Error(`${at || '(root)'} is not a mapping`);
    const obj = node as Record<string, unknown>;
    const here = at ? `${at}.${step}` : step;
    if (last) obj[step] = value;
    else {
      if (obj[step] === undefined) obj[step] = typeof path[i + 1] === 'string' && path[i + 1] !== '*' ? {} : [];
      walk(obj[step], i + 1, here);
    }
  };
  walk(root, 0, '');
  return root;
}

/** Validates a raw queue config as a queue file's `config`; throws with the schema's messages. */
export function validateConfig(raw: unknown, what: string): QueueConfig {
  const parsed = queueConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`).join('; ');
    throw new Error(`${what} gives an invalid queue: ${issues}`);
  }
  return parsed.data;
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
  return validateConfig({ ...config, rulesets }, `--sweep ${key}=${value}`);
}
