// Why ticket records are keyed by arrival position: durable single-record writes into a tree that already
// holds 200k records, with keys that append (queue + position, as src/store/lmdb-store.ts writes them)
// against random keys (queue + ticket UUID, the earlier layout). Same lmdb options as the store; every
// write is awaited, so each commit is fdatasync'd. Reports writes/s, CPU per write on the main thread and
// in all threads (the lmdb writer thread's pwrite/fdatasync work shows there), and latency.
//
//   node dist/bench/store-write.js [--secs 5] [--writers 64,8]
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { open } from 'lmdb';

const PREFILL = 200_000;
const RECORD = new Uint8Array(300).fill(7);

function mainThreadCpuSecs(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function run(keys: 'appending' | 'random', writers: number, secs: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'mm-store-write-'));
  const root = open({ path: dir, maxDbs: 4, noSync: false, overlappingSync: false });
  const db = root.openDB<Uint8Array, string>({ name: 'ticket_records', encoding: 'binary' });
  let position = 0;
  const nextKey = () => (keys === 'appending' ? `q\u0000${(++position).toString(16).padStart(16, '0')}` : `q\u0000${randomUUID()}`);
  for (let done = 0; done < PREFILL; done += 10_000) {
    await root.transaction(() => {
      for (let i = 0; i < 10_000; i++) void db.put(nextKey(), RECORD);
    });
  }
  const latencies: number[] = [];
  const end = Date.now() + secs * 1000;
  const main0 = mainThreadCpuSecs();
  const all0 = process.cpuUsage();
  await Promise.all(
    Array.from({ length: writers }, async () => {
      while (Date.now() < end) {
        const t = performance.now();
        await db.put(nextKey(), RECORD);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const mainUs = ((mainThreadCpuSecs() - main0) * 1e6) / latencies.length;
  const all = process.cpuUsage(all0);
  await root.close();
  rmSync(dir, { recursive: true, force: true });
  latencies.sort((a, b) => a - b);
  const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))]!.toFixed(2);
  return [
    keys.padEnd(9),
    String(writers).padStart(7),
    (latencies.length / secs).toFixed(0).padStart(8),
    mainUs.toFixed(1).padStart(12),
    ((all.user + all.system) / latencies.length).toFixed(1).padStart(11),
    q(0.5).padStart(7),
    q(0.99).padStart(7),
  ].join('  ');
}

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { secs: { type: 'string', default: '5' }, writers: { type: 'string', default: '64,8' } },
  });
  const secs = Number(values.secs);
  console.log(`# durable 300-byte writes into a ${PREFILL}-record tree, ${secs} s each`);
  console.log('keys       writers  writes/s  main µs/write  all µs/write  p50 ms  p99 ms');
  for (const writers of values.writers.split(',').map(Number)) {
    for (const keys of ['random', 'appending'] as const) console.log(await run(keys, writers, secs));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]!).href) await main(process.argv.slice(2));
