// The Grafana dashboard in deploy/grafana: every query names metrics the service really exports (read
// from a running service's /metrics), so a renamed metric cannot leave a panel silently empty.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { metricFamilies } from '../support/prometheus.js';
import { useService } from '../support/service.js';

const DASHBOARD = resolve(import.meta.dirname, '../../deploy/grafana/matchmaker-dashboard.json');

/** PromQL words that are not metric names: aggregations, functions' modifiers, vector matching. */
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'and', 'or', 'unless']);

/** The metric names a PromQL expression reads. */
function metricsOf(expr: string): string[] {
  const bare = expr
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // range selectors
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' $1 ') // label lists
    .replace(/"[^"]*"/g, ' ');
  const names: string[] = [];
  for (const m of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = bare.slice(m.index + m[0].length).trimStart();
    // A function, or an aggregation (its `by (...)` may come before its parenthesis).
    if (after.startsWith('(') || /^(by|without)\b/.test(after) || KEYWORDS.has(m[0])) continue;
    names.push(m[0]);
  }
  return names;
}

/** Every PromQL expression in the dashboard: panel targets, nested rows' panels, template queries. */
function expressions(dashboard: Record<string, unknown>): string[] {
  const found: string[] = [];
  const visit = (value: unknown, key?: string) => {
    if (typeof value === 'string' && (key === 'expr' || key === 'definition')) found.push(value);
    else if (Array.isArray(value)) for (const v of value) visit(v);
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) visit(v, k);
  };
  visit(dashboard);
  return found.map((e) => e.replace(/^label_values\(([^,]+),[^)]*\)$/, '$1'));
}

const env = useService();

describe('deploy/grafana/matchmaker-dashboard.json', () => {
  it('reads the metric names the way PromQL does', () => {
    expect(
      metricsOf(
        'histogram_quantile(0.95, sum by (le, queue_id) (rate(matchmaker_ticket_wait_seconds_bucket{queue_id=~"$queue"}[$__rate_interval])))',
      ),
    ).toEqual(['matchmaker_ticket_wait_seconds_bucket']);
    expect(metricsOf('sum(a{x="by(y)"}) * on (instance, queue_id) group_left b / ignoring (rule) c')).toEqual(['a', 'b', 'c']);
  });

  it('queries only metrics the service exports', async () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Record<string, unknown>;
    const exprs = expressions(dashboard);
    expect(exprs.length).toBeGreaterThan(20);

    const families = metricFamilies(await (await fetch(`${env.service.baseUrl}/metrics`)).text());
    const exported = (name: string) => {
      if (families.has(name)) return true;
      const histogram = /^(.*)_(bucket|sum|count)$/.exec(name);
      return histogram !== null && families.get(histogram[1]!) === 'histogram';
    };
    const named = new Set(exprs.flatMap(metricsOf));
    expect(named.size).toBeGreaterThan(15);
    expect([...named].filter((name) => !exported(name))).toEqual([]);
  });
});
