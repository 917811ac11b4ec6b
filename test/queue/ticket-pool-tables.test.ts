// A pool's value tables that empty (docs/engine.md, "Value tables"): an attribute value or host key is held by
// the rows that name it (tickets in the pool, rows prepared and not yet inserted) and forgotten when the last
// lets go; a new value takes the lowest free index; a 257th live value is still refused. Rows keep their meaning
// across the reuse (a row prepared before a removal keeps its index), a widened filter keeps working, and a
// tick names its matches' hosts as the tables stood when it read the columns. In-process: TicketPool and the
// native engine through TickRunner; a property test holds the tables and columns to a model.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { queueConfigSchema } from '../../src/config/queue-config.js';
import type { ParsedEngineInput } from '../../src/engine/engine-input.js';
import { buildEngineOutput } from '../../src/engine/engine-output.js';
import { MAX_LATENCY } from '../../src/engine/host-columns.js';
import { MAX_FILTER_VALUES, MAX_HOST_KEYS, type PoolRow, TicketPool } from '../../src/engine/ticket-pool.js';
import { allMatches, engineParams, TickRunner } from '../../src/engine/tick-runner.js';
import { keysOf } from '../../src/engine/value-table.js';
import { ServiceError } from '../../src/errors.js';
import { rebuiltCapacity } from '../../src/queue/pool-rebuild.js';

const NOW = 1_700_000_000_000;
const DEFAULT_MS = 150;
// 1v1 on an overlap filter (map) and a containment filter (mode); a host within 100 ms of both when required.
const config = queueConfigSchema.parse({
  engine: {
    default_latency_ms: DEFAULT_MS,
    attribute_filters: [
      { name: 'map', mode: 'overlap' },
      { name: 'mode', mode: 'containment' },
    ],
  },
  rulesets: [
    { id: 'duel', teams: 2, team_size: 1, max_skill_spread: 0.5 },
    { id: 'hosted', teams: 2, team_size: 1, max_skill_spread: 0.5, require_host: true, max_latency_ms: 100 },
  ],
});

interface Spec {
  mmr?: number;
  map?: string[];
  mode?: { values: string[]; accepts: string[] };
  hosts?: Record<string, number>;
}

function input(id: string, t: Spec): ParsedEngineInput {
  const attributes = new Map<string, { values: string[]; accepts: string[] }>();
  if (t.map) attributes.set('map', { values: t.map, accepts: [] });
  if (t.mode) attributes.set('mode', t.mode);
  return {
    playerIds: [`${id}-p`],
    mmrMean: t.mmr ?? 0.5,
    latencies: new Map(Object.entries(t.hosts ?? {}).map(([host, ms]) => [host, { ms, measuredBy: 1 }])),
    attributes,
  };
}

const newPool = () =>
  new TicketPool({ filters: config.engine.attribute_filters, rulesetIds: config.rulesets.map((r) => r.id), defaultLatencyMs: DEFAULT_MS });

function prepare(pool: TicketPool, id: string, t: Spec, rulesets: string[] = ['duel']): PoolRow {
  return pool.prepare(input(id, t), rulesets, NOW - 1000);
}

function add(pool: TicketPool, id: string, t: Spec, rulesets?: string[]): void {
  pool.insert(id, prepare(pool, id, t, rulesets));
}

/** The strings a row's filter columns stand for now: its values and accepts (undefined: unspecified). */
function rowValues(pool: TicketPool, id: string, f: number): { values: string[]; accepts: string[] } | undefined {
  const r = pool.rowOf(id)!;
  const { spans, attributes } = pool.keys();
  const { start, width } = spans[f]!;
  const at = r * pool.filterCount + start;
  const accepts = pool.attrAccepts.subarray(at, at + width);
  if (accepts[width - 1]! >> 63n) return undefined;
  return { values: keysOf(attributes[f]!, pool.attrValues.subarray(at, at + width)), accepts: keysOf(attributes[f]!, accepts) };
}

function refusal(run: () => unknown): ServiceError {
  try {
    run();
  } catch (err) {
    return err as ServiceError;
  }
  throw new Error('not refused');
}

async function tick(pool: TicketPool) {
  const result = await new TickRunner(engineParams(config)).run(pool, NOW, 1);
  return { result, pairs: allMatches(result).map((m) => Array.from(m.rows, (r) => pool.idAt(r)).sort()) };
}

describe('a filter of 256 values', () => {
  it('refuses the 257th live value, forgets what no ticket holds, and gives a new value the lowest free index', () => {
    const pool = newPool();
    const maps = pool.attributeKeys[0]!;
    for (let i = 0; i < MAX_FILTER_VALUES; i++) add(pool, `t${i}`, { map: [`m-${i}`] });
    expect([maps.live, maps.size]).toEqual([256, 256]);
    const refused = refusal(() => prepare(pool, 'x', { map: ['m-0', 'new'] }));
    expect(refused).toBeInstanceOf(ServiceError);
    expect(refused.code).toBe('FAILED_PRECONDITION');
    expect(refused.message).toContain('256 distinct values');
    // The refused row holds nothing, not even m-0 which it named first: t0 alone held it, and lets go.
    pool.remove('t0');
    pool.remove('t200');
    pool.remove('t7');
    expect([maps.live, maps.size]).toEqual([253, 256]);
    expect([maps.keyAt(0), maps.keyAt(7), maps.keyAt(200)]).toEqual([undefined, undefined, undefined]);
    // New values fill the holes lowest first; an existing one keeps its index.
    add(pool, 'a', { map: ['new-1', 'm-5'] });
    add(pool, 'b', { map: ['new-2'], mode: { values: ['new-3'], accepts: ['new-3'] } });
    add(pool, 'c', { map: ['new-3'] });
    expect([maps.keyAt(0), maps.keyAt(7), maps.keyAt(200), maps.keyAt(5)]).toEqual(['new-1', 'new-2', 'new-3', 'm-5']);
    expect(pool.attributeKeys[1]!.keyAt(0)).toBe('new-3');
    expect(maps.live).toBe(256);
    expect(refusal(() => prepare(pool, 'y', { map: ['new-5'] })).code).toBe('FAILED_PRECONDITION');
    // Every row still stands for its own values.
    expect(rowValues(pool, 't5', 0)).toEqual({ values: ['m-5'], accepts: [] });
    expect(rowValues(pool, 't201', 0)).toEqual({ values: ['m-201'], accepts: [] });
    expect(rowValues(pool, 'a', 0)).toEqual({ values: ['new-1', 'm-5'], accepts: [] });
    expect(rowValues(pool, 'c', 0)).toEqual({ values: ['new-3'], accepts: [] });
    expect(rowValues(pool, 'b', 1)).toEqual({ values: ['new-3'], accepts: ['new-3'] });
    expect(rowValues(pool, 'a', 1)).toBeUndefined();
  });

  it('empties completely: a queue cleared of every ticket takes 256 new values', () => {
    const pool = newPool();
    for (let i = 0; i < MAX_FILTER_VALUES; i++) add(pool, `t${i}`, { map: [`m-${i}`], hosts: { [`h-${i}`]: 20 } });
    for (let i = 0; i < MAX_FILTER_VALUES; i++) pool.remove(`t${i}`);
    expect([pool.attributeKeys[0]!.live, pool.attributeKeys[0]!.size, pool.hosts.live, pool.hosts.size]).toEqual([0, 0, 0, 0]);
    for (let i = 0; i < MAX_FILTER_VALUES; i++) add(pool, `u${i}`, { map: [`n-${i}`], hosts: { [`g-${i}`]: 20 } });
    expect(rowValues(pool, 'u255', 0)).toEqual({ values: ['n-255'], accepts: [] });
    expect(refusal(() => prepare(pool, 'v', { map: ['n-256'] })).code).toBe('FAILED_PRECONDITION');
    expect(refusal(() => prepare(pool, 'v', { hosts: { 'g-256': 1 } })).message).toContain('host key set');
  });
});

describe('a row prepared before a removal', () => {
  it('keeps its values held, so their indices are not reused until it is inserted or released', () => {
    const pool = newPool();
    const maps = pool.attributeKeys[0]!;
    add(pool, 'holder', { map: ['a'], hosts: { 'eu-1': 30 } });
    // Prepared (a request in flight) while the only ticket holding "a" and eu-1 leaves.
    const pending = prepare(pool, 'pending', { map: ['a'], hosts: { 'eu-1': 40 } });
    pool.remove('holder');
    // A value new meanwhile does not take "a"'s index: "a" is still held.
    const other = prepare(pool, 'other', { map: ['b'], hosts: { 'us-1': 40 } });
    expect([maps.keyAt(0), maps.keyAt(1), pool.hosts.keyAt(0), pool.hosts.keyAt(1)]).toEqual(['a', 'b', 'eu-1', 'us-1']);
    pool.insert('pending', pending);
    pool.insert('other', other);
    expect(rowValues(pool, 'pending', 0)!.values).toEqual(['a']);
    expect(rowValues(pool, 'other', 0)!.values).toEqual(['b']);
    expect(pool.latencyMs[pool.rowOf('pending')! * pool.hostCount]).toBe(40);
    // A released row lets go, and a row goes into the pool once.
    const dropped = prepare(pool, 'dropped', { map: ['c'] });
    expect(maps.keyAt(2)).toBe('c');
    pool.release(dropped);
    pool.release(dropped);
    expect([maps.keyAt(2), maps.size]).toEqual([undefined, 2]);
    expect(() => pool.insert('dropped', dropped)).toThrow(/inserted or released already/);
    expect(() => pool.insert('pending', pending)).toThrow(/inserted or released already/);
  });
});

describe('a widened filter', () => {
  it('keeps matching when the values past its first column are forgotten and their indices reused', async () => {
    const pool = newPool();
    // 70 values: the map filter takes two columns. Each ticket alone in skill (mmr 10, 20, ...).
    for (let i = 0; i < 70; i++) add(pool, `t${i}`, { mmr: 10 * (i + 1), map: [`m-${i}`] });
    const wide = prepare(pool, 'wide', { mmr: 0.5, map: ['m-68'] }); // prepared at two columns
    const unspecified = prepare(pool, 'unspecified', { mmr: 2.5 });
    await tick(pool);
    expect(pool.filterCount).toBe(3);
    // Tickets past the first column leave, but for t68, which `wide` shares: m-69 at the top is forgotten,
    // and the table uses 69 indices.
    for (let i = 64; i < 70; i++) if (i !== 68) pool.remove(`t${i}`);
    pool.remove('t68');
    expect([pool.attributeKeys[0]!.size, pool.attributeKeys[0]!.live]).toEqual([69, 65]);
    pool.insert('wide', wide);
    pool.insert('unspecified', unspecified);
    // New values take the free indices from 64 on.
    add(pool, 'partner', { mmr: 0.51, map: ['m-68', 'fresh-0'] });
    add(pool, 'near-unspecified', { mmr: 2.51, map: ['fresh-1'] });
    add(pool, 'fresh-alone', { mmr: 4.5, map: ['fresh-2'] });
    add(pool, 'fresh-mate', { mmr: 4.51, map: ['fresh-2', 'm-3'] });
    expect([64, 65, 66].map((i) => pool.attributeKeys[0]!.keyAt(i))).toEqual(['fresh-0', 'fresh-1', 'fresh-2']);
    expect(pool.filterCount).toBe(3); // columns never narrow
    const { pairs } = await tick(pool);
    expect(pairs.sort()).toEqual(
      [
        ['partner', 'wide'],
        ['near-unspecified', 'unspecified'],
        ['fresh-alone', 'fresh-mate'],
      ].sort(),
    );
  });

  it('takes a row prepared wider than the pool: its values are within the pool’s columns', async () => {
    const pool = newPool();
    // 70 requests in flight: the map table uses 70 indices, and rows prepared now have two columns. The pool
    // (empty) still has one, and the 70 let go: the table uses 4.
    const rows = Array.from({ length: 70 }, (_, i) => prepare(pool, `r${i}`, { map: [`m-${i}`] }));
    const late = prepare(pool, 't3', { map: ['m-3'] });
    const unspecified = prepare(pool, 'unspecified', { mmr: 2.5 });
    expect([late.attrValues[0]!.length, unspecified.attrAccepts[0]!.length]).toEqual([2, 2]);
    for (const row of rows) pool.release(row);
    expect(pool.attributeKeys[0]!.size).toBe(4);
    pool.insert('t3', late);
    pool.insert('unspecified', unspecified);
    add(pool, 'partner', { map: ['m-3'] });
    add(pool, 'anyone', { mmr: 2.51, map: ['other'] });
    expect(pool.filterCount).toBe(2);
    expect(rowValues(pool, 't3', 0)).toEqual({ values: ['m-3'], accepts: [] });
    expect(rowValues(pool, 'unspecified', 0)).toBeUndefined();
    const { pairs } = await tick(pool);
    expect(pairs.sort()).toEqual(
      [
        ['partner', 't3'],
        ['anyone', 'unspecified'],
      ].sort(),
    );
  });
});

describe('host keys', () => {
  it('a host whose tickets left is no host, its index goes to a new key, and a tick names hosts as it read them', async () => {
    const pool = newPool();
    add(pool, 'a1', { mmr: 0.5, hosts: { 'eu-1': 30 } }, ['hosted']);
    add(pool, 'a2', { mmr: 0.5, hosts: { 'eu-1': 40 } }, ['hosted']);
    add(pool, 'lonely', { mmr: 5, hosts: { 'us-1': 30 } }, ['hosted']);
    const first = await tick(pool);
    expect(first.pairs).toEqual([['a1', 'a2']]);
    const [match] = allMatches(first.result);
    // The match leaves: eu-1 is forgotten, and a new key takes index 0 before the match is committed.
    pool.remove('a1');
    pool.remove('a2');
    add(pool, 'b1', { mmr: 3, hosts: { 'ap-1': 20 } }, ['hosted']);
    expect(pool.hosts.keyAt(0)).toBe('ap-1');
    const output = buildEngineOutput(match!, [['a1'], ['a2']], first.result.keys, config);
    expect(output.host).toMatchObject({ preferred: 'eu-1', acceptable: ['eu-1'] });

    // A host no ticket measures is none: two tickets that measured nothing match in a ruleset without a
    // required host, with no host, once the last host column is gone.
    pool.remove('b1');
    pool.remove('lonely');
    add(pool, 'c1', { mmr: 7 });
    add(pool, 'c2', { mmr: 7 });
    expect(pool.hostCount).toBe(2); // until the tick fits the columns
    const second = await tick(pool);
    expect(pool.hostCount).toBe(0);
    expect(second.pairs).toEqual([['c1', 'c2']]);
    expect(buildEngineOutput(allMatches(second.result)[0]!, [['c1'], ['c2']], second.result.keys, config).host).toBeUndefined();
  });

  it('reads MAX_LATENCY in a host column between hosts once its last ticket left, and the default again once a ticket measures it', async () => {
    const pool = newPool();
    add(pool, 'x', { mmr: 9, hosts: { 'h-0': 10 } });
    add(pool, 'y', { mmr: 19, hosts: { 'h-1': 10 } });
    add(pool, 'z', { mmr: 29, hosts: { 'h-2': 10 } });
    pool.remove('y');
    await tick(pool);
    const column = (id: string, h: number) => pool.latencyMs[pool.rowOf(id)! * pool.hostCount + h];
    expect(pool.hostCount).toBe(3);
    expect([column('x', 1), column('z', 1), column('x', 2)]).toEqual([MAX_LATENCY, MAX_LATENCY, DEFAULT_MS]);
    add(pool, 'w', { mmr: 39, hosts: { 'h-new': 25 } });
    expect(pool.hosts.keyAt(1)).toBe('h-new');
    expect([column('x', 1), column('z', 1), column('w', 1), column('w', 0)]).toEqual([DEFAULT_MS, DEFAULT_MS, 25, DEFAULT_MS]);
  });
});

// The model: every row (inserted or pending) holds the values it names; the tables hold exactly those; each
// inserted row's columns stand for its own values and latencies; a host column is a host's iff an inserted row
// measured its key; new values take the lowest free indices.
const VALUES = ['a', 'b', 'c', 'd', 'e', 'f'];
const HOSTS = ['h0', 'h1', 'h2', 'h3', 'h4'];
const subset = (of: string[]) => fc.uniqueArray(fc.constantFrom(...of), { maxLength: 3 });
const specArb: fc.Arbitrary<Spec> = fc.record(
  {
    map: subset(VALUES),
    mode: fc.record({ values: subset(VALUES), accepts: subset(VALUES) }),
    hosts: fc.dictionary(fc.constantFrom(...HOSTS), fc.integer({ min: 0, max: 300 }), { maxKeys: 3 }),
  },
  { requiredKeys: [] },
);
type Op =
  | { kind: 'prepare'; spec: Spec }
  | { kind: 'insert'; k: number }
  | { kind: 'release'; k: number }
  | { kind: 'remove'; k: number }
  | { kind: 'tick' };
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('prepare' as const), spec: specArb }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('insert' as const), k: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('release' as const), k: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('remove' as const), k: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'tick' as const }) },
);

const held = (t: Spec): [string[], string[], string[]] => [
  t.map ?? [],
  t.mode ? [...new Set([...t.mode.values, ...t.mode.accepts])] : [],
  Object.keys(t.hosts ?? {}),
];

describe('the tables against a model', () => {
  it('hold exactly what the rows name, and the columns keep each row’s meaning', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 60 }), async (ops) => {
        const pool = newPool();
        const tables = [pool.attributeKeys[0]!, pool.attributeKeys[1]!, pool.hosts];
        const pending: { id: string; spec: Spec; row: PoolRow }[] = [];
        const inserted = new Map<string, Spec>();
        let next = 0;
        for (const op of ops) {
          if (op.kind === 'prepare') {
            const before = tables.map((t) => t.keys());
            const id = `t${next++}`;
            pending.push({ id, spec: op.spec, row: prepare(pool, id, op.spec) });
            // Each table's new keys took its lowest free indices.
            tables.forEach((t, k) => {
              const added = held(op.spec)[k]!.filter((key) => !before[k]!.includes(key));
              const free = [...before[k]!.keys()].filter((i) => before[k]![i] === undefined);
              for (let i = before[k]!.length; free.length < added.length; i++) free.push(i);
              expect(added.map((key) => t.keys().indexOf(key)).sort((x, y) => x - y)).toEqual(free.slice(0, added.length));
            });
          } else if (op.kind === 'insert' || op.kind === 'release') {
            const [p] = pending.splice(op.k % Math.max(1, pending.length), 1);
            if (!p) continue;
            if (op.kind === 'insert') {
              pool.insert(p.id, p.row);
              inserted.set(p.id, p.spec);
            } else pool.release(p.row);
          } else if (op.kind === 'remove') {
            const id = [...inserted.keys()][op.k % Math.max(1, inserted.size)];
            if (id === undefined) continue;
            pool.remove(id);
            inserted.delete(id);
          } else pool.fitColumns();

          const rows = [...inserted.values(), ...pending.map((p) => p.spec)];
          tables.forEach((t, k) => {
            const names = new Set(rows.flatMap((s) => held(s)[k]!));
            expect(new Set(t.keys().filter((key) => key !== undefined))).toEqual(names);
            expect(t.keys().length === 0 || t.keys().at(-1) !== undefined).toBe(true);
          });
          const sets = (a: { values: string[]; accepts: string[] } | undefined) =>
            a && { values: new Set(a.values), accepts: new Set(a.accepts) };
          for (const [id, spec] of inserted) {
            expect(sets(rowValues(pool, id, 0))).toEqual(sets(spec.map && { values: spec.map, accepts: [] }));
            expect(sets(rowValues(pool, id, 1))).toEqual(sets(spec.mode));
          }
        }
        // Before a tick: a column is a host's iff an inserted row measured its key, and reads each row's own.
        pool.fitColumns();
        const measured = new Set([...inserted.values()].flatMap((s) => Object.keys(s.hosts ?? {})));
        const { hosts } = pool.keys();
        expect(new Set(hosts.filter((key) => key !== undefined))).toEqual(measured);
        expect(hosts.length === 0 || hosts.at(-1) !== undefined).toBe(true);
        expect(pool.hostCount).toBeLessThanOrEqual(MAX_HOST_KEYS);
        for (const [id, spec] of inserted) {
          const r = pool.rowOf(id)!;
          hosts.forEach((key, h) => {
            const ms = pool.latencyMs[r * pool.hostCount + h];
            expect(ms).toBe(key === undefined ? MAX_LATENCY : (spec.hosts?.[key] ?? DEFAULT_MS));
          });
        }
        for (const p of pending) pool.release(p.row);
        for (const id of inserted.keys()) pool.remove(id);
        expect(tables.map((t) => [t.live, t.size])).toEqual([
          [0, 0],
          [0, 0],
          [0, 0],
        ]);
      }),
      { numRuns: 300 },
    );
  });
});

describe('a rebuilt pool', () => {
  it('has room for a quarter more tickets before its columns move', () => {
    // A restart's rebuild sized the pool exactly full, so the first CreateTicket after it copied every
    // column on the event loop (107 ms at 1M tickets). The columns keep their buffers while the pool grows
    // into its spare quarter, and move (double) only past it.
    const pool = new TicketPool(
      { filters: config.engine.attribute_filters, rulesetIds: config.rulesets.map((r) => r.id), defaultLatencyMs: DEFAULT_MS },
      rebuiltCapacity(1000),
    );
    for (let i = 0; i < 1000; i++) add(pool, `t${i}`, { map: ['a'], hosts: { 'eu-1': 40 } });
    const restored = pool.columns().mmrMean;
    for (let i = 1000; i < 1250; i++) add(pool, `t${i}`, { map: ['a'], hosts: { 'eu-1': 40 } });
    expect(pool.columns().mmrMean).toBe(restored);
    add(pool, 't1250', { map: ['a'] });
    expect(pool.columns().mmrMean).not.toBe(restored);
    expect(pool.count).toBe(1251);
    expect(rebuiltCapacity(0)).toBe(1024);
  });
});
