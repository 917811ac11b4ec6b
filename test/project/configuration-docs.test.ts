// docs/configuration.md documents every key of both schemas, with the default the code applies.
import { availableParallelism, hostname } from 'node:os';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { queueFileSchema } from '../../src/config/queue-config.js';
import { serviceConfigEnv, serviceConfigSchema } from '../../src/config/service-config.js';

const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');

/** Every key path of a zod schema: config.rulesets[].relaxation[].after_wait_secs. */
function keyPaths(schema: z.ZodTypeAny, prefix = ''): string[] {
  if (schema instanceof z.ZodEffects) return keyPaths(schema.innerType(), prefix);
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional) return keyPaths(schema._def.innerType as z.ZodTypeAny, prefix);
  if (schema instanceof z.ZodArray) return keyPaths(schema.element as z.ZodTypeAny, `${prefix}[]`);
  if (schema instanceof z.ZodObject) {
    return Object.entries(schema.shape as Record<string, z.ZodTypeAny>).flatMap(([key, child]) => {
      const path = prefix ? `${prefix}.${key}` : key;
      return [path, ...keyPaths(child, path)];
    });
  }
  return [];
}

describe('docs/configuration.md', () => {
  it('documents every queue file key', () => {
    const missing = keyPaths(queueFileSchema).filter((p) => !doc.includes(`\`${p}\``));
    expect(missing).toEqual([]);
  });

  it('documents every service setting with its environment variable and default', () => {
    const defaults = serviceConfigSchema.parse({});
    // Defaults made from the machine are documented by their form.
    const computed: Partial<Record<string, string>> = { replica_id: '<host name>-<pid>', engine_threads: 'min(<cores> - 1, 8)' };
    expect(defaults.engine_threads).toBe(Math.min(8, Math.max(1, availableParallelism() - 1)));
    expect(defaults.replica_id).toBe(`${hostname().replace(/[^A-Za-z0-9_-]/g, '-')}-${process.pid}`);
    for (const [key, env] of Object.entries(serviceConfigEnv)) {
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${key}\``));
      expect(row, key).toBeDefined();
      expect(row).toContain(`\`${env}\``);
      expect(row).toContain(`\`${computed[key] ?? String(defaults[key as keyof typeof defaults])}\``);
    }
  });
});
