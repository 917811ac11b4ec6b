// Reads a Prometheus text exposition (what GET /metrics answers) into samples, for assertions.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (m[2] ?? '').matchAll(LABEL))
      labels[key!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** Names of the metric families the text declares with `# TYPE`. */
export function metricFamilies(text: string): Map<string, string> {
  const families = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (m) families.set(m[1]!, m[2]!);
  }
  return families;
}

/** The sum of the samples named `name` whose labels include `labels` (undefined when there is none). */
export function sampleSum(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const matching = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return matching.length === 0 ? undefined : matching.reduce((sum, s) => sum + s.value, 0);
}

export async function scrape(baseUrl: string): Promise<Sample[]> {
  const res = await fetch(`${baseUrl}/metrics`);
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
  return parsePrometheus(await res.text());
}
