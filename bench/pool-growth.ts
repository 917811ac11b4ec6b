// What a pool's growth costs the event loop (issue 21, part 4: the host never stalls ingestion). A queue's
// pool doubles its columns when an insert finds them full; at half a million and a million tickets copying
// every column into new arrays held the loop for 220 ms to over a second (bench/RESULTS.md). The service's
// columns reserve room for the queue's max_pool_tickets and grow in place (src/engine/growable-column.ts).
// This inserts the same generated tickets one by one into pools starting at 1,024 rows, with that
// reservation and without (every growth a copy, as before), in turn in one process, and prints per pool the
// inserts that grew it past 100,000 rows (for a million: at 131,072, 262,144 and 524,288 rows) and the
// longest of the others (a GC may land in any). Ids are UUIDs, as the API hands them over. The rows come
// from 10,000 generated tickets, used in turn, so that the bench's own heap stays small, as the service's
// does (its pool is off the heap): a major GC over a heap of a million parsed inputs took seconds here.
//
//   node --expose-gc dist/bench/pool-growth.js [--tickets 1000000] [--reserved-rows 2000000] [--rounds 2]
import { parseArgs } from 'node:util';
import { TicketPool } from '../src/engine/ticket-pool.js';
import { GENERATED_QUEUE, generatePool } from './pool-generator.js';

interface Growth {
  /** The inserts that found the columns full past 100,000 rows, in order: the rows then, and ms each. */
  growths: { rows: number; ms: number }[];
  /** The longest insert that did not grow the pool. */
  otherLongestMs: number;
}

/** Canonical lowercase v4 UUIDs, as many as tickets, made once for every pool. */
function uuids(n: number): string[] {
  return Array.from({ length: n }, () => crypto.randomUUID());
}

function fill(ids: string[], reservedRows: number | undefined, generated: ReturnType<typeof generatePool>): Growth {
  const tickets = ids.length;
  global.gc?.();
  const pool = new TicketPool({
    filters: GENERATED_QUEUE.engine.attribute_filters,
    rulesetIds: ['5v5'],
    defaultLatencyMs: GENERATED_QUEUE.engine.default_latency_ms,
    reservedRows,
  });
  const inputs = generated.engineInputs!;
  const distinct = inputs.length;
  const growths: Growth['growths'] = [];
  let otherLongestMs = 0;
  // The pool starts with room for 1,024 rows and doubles (up to its reservation, then doubles again): an
  // insert at 1,024 times a power of two, or at the reservation, grows it.
  const grows = (rows: number) => rows === reservedRows || (rows >= 1024 && Number.isInteger(Math.log2(rows / 1024)));
  for (let i = 0; i < tickets; i++) {
    const row = pool.prepare(inputs[i % distinct]!, [], generated.columns.arrivalMs[i % distinct]!);
    const t0 = performance.now();
    pool.insert(ids[i]!, row);
    const ms = performance.now() - t0;
    if (grows(i) && i > 100_000) growths.push({ rows: i, ms });
    else if (!grows(i)) otherLongestMs = Math.max(otherLongestMs, ms);
  }
  if (pool.count !== tickets) throw new Error('the pool lost tickets');
  return { growths, otherLongestMs };
}

const { values } = parseArgs({
  options: {
    tickets: { type: 'string', default: '1000000' },
    'reserved-rows': { type: 'string', default: '2000000' },
    rounds: { type: 'string', default: '2' },
  },
});
const [tickets, reservedRows, rounds] = [Number(values.tickets), Number(values['reserved-rows']), Number(values.rounds)];
const generated = generatePool({ tickets: Math.min(tickets, 10_000), engineInputs: true });
const ids = uuids(tickets);
console.log(`# ${tickets} inserts into a pool from 1024 rows; "reserved": columns reserve ${reservedRows} rows and grow in place`);
console.log('round  columns    inserts that grew the pool: at rows, ms                 longest other insert ms');
for (let round = 1; round <= rounds; round++) {
  for (const [name, reserved] of [
    ['copied', undefined],
    ['reserved', reservedRows],
  ] as const) {
    const g = fill(ids, reserved, generated);
    const growths = g.growths.map(({ rows, ms }) => `${rows}: ${ms.toFixed(2)}`).join(', ');
    console.log(`${String(round).padStart(5)}  ${name.padEnd(10)} ${growths.padEnd(56)} ${g.otherLongestMs.toFixed(2).padStart(23)}`);
  }
}
