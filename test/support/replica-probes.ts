// Per-replica create probes for fault tests: each replica gets workers of its own that send CreateTicket to
// that replica only (no retry elsewhere, both transports in turn), so the test can say when each replica
// acknowledged creates and when it did not. Every answer is kept with the time it came back.
import { party, uuid } from './fixtures.js';
import { sleep, type ServiceCluster } from './service-cluster.js';
import type { ClusterClients } from './ticket-load.js';

export interface ProbeAnswer {
  replica: number;
  id: string;
  /** When the request was sent and when it was answered (Date.now()). */
  sentAt: number;
  at: number;
  ok: boolean;
  code?: string;
}

export interface ProbeOptions {
  /** Workers per replica (default 2): a request that hangs does not hide the replica's other answers. */
  workers?: number;
  /** Pause of a worker after each answer (default 25 ms). */
  paceMs?: number;
}

export class ReplicaProbes {
  readonly answers: ProbeAnswer[] = [];
  private stopped = false;
  private readonly workers: Promise<void>[] = [];

  constructor(
    clients: ClusterClients,
    cluster: ServiceCluster,
    readonly queueId: string,
    options: ProbeOptions = {},
  ) {
    const paceMs = options.paceMs ?? 25;
    for (const replica of cluster.replicas.keys()) {
      for (let w = 0; w < (options.workers ?? 2); w++) {
        this.workers.push(
          (async () => {
            for (let n = w; !this.stopped; n++) {
              const transports = clients.of(replica);
              if (transports.length === 0) {
                await sleep(100);
                continue;
              }
              const id = uuid();
              const sentAt = Date.now();
              const result = await transports[n % transports.length]!.createTicket({ id, queueId, engineInput: party(1) }).catch(
                (err: unknown) => ({ ok: false as const, code: `THROWN ${String(err)}`.slice(0, 60) }),
              );
              const answer: ProbeAnswer = { replica, id, sentAt, at: Date.now(), ok: result.ok };
              if (!result.ok) answer.code = result.code;
              this.answers.push(answer);
              if (!result.ok && result.code !== 'UNAVAILABLE' && !result.code.startsWith('THROWN')) {
                throw new Error(`CreateTicket ${id} on replica ${replica}: ${result.code}`);
              }
              await sleep(paceMs);
            }
          })(),
        );
      }
    }
  }

  /** Ids acknowledged, by any replica. */
  get acked(): string[] {
    return this.answers.filter((a) => a.ok).map((a) => a.id);
  }

  /** Stops sending; resolves once every request in flight is answered. */
  async stop(): Promise<this> {
    this.stopped = true;
    await Promise.all(this.workers);
    return this;
  }

  /**
   * The first moment from `from` on at which replica `replica` acknowledged a create that it was sent at or
   * after `from` (so a request stuck across the fault does not count); undefined if none.
   */
  firstAckSentFrom(replica: number, from: number): number | undefined {
    return this.answers.find((a) => a.replica === replica && a.ok && a.sentAt >= from)?.at;
  }

  /** The longest time between two acknowledgements of `replica` (or a window end) within [from, to]. */
  longestGap(replica: number, from: number, to: number): { ms: number; start: number; end: number } {
    const acks = this.answers.filter((a) => a.replica === replica && a.ok && a.at >= from && a.at <= to).map((a) => a.at);
    const points = [from, ...acks.sort((a, b) => a - b), to];
    let best = { ms: 0, start: from, end: from };
    for (let i = 1; i < points.length; i++) {
      const ms = points[i]! - points[i - 1]!;
      if (ms > best.ms) best = { ms, start: points[i - 1]!, end: points[i]! };
    }
    return best;
  }

  /** Acknowledgements of `replica` per second over [from, to): its rate, second by second. */
  ratePerSecond(replica: number, from: number, to: number): number[] {
    const rate = Array.from({ length: Math.ceil((to - from) / 1000) }, () => 0);
    for (const a of this.answers) {
      if (a.replica !== replica || !a.ok || a.at < from || a.at >= to) continue;
      rate[Math.floor((a.at - from) / 1000)]!++;
    }
    return rate;
  }
}
