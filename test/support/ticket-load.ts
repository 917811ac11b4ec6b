// Game backends creating tickets against the replicas of a service cluster, as real clients do: requests
// spread over the replicas and both transports, and on UNAVAILABLE (or a connection that fails) a wait,
// backing off, then the same ticket id again on the next replica (CreateTicket is idempotent by id). A
// replica the test marks paused is skipped, as a load balancer's health check would.
import type { TestService } from './service.js';
import { sleep, type ServiceCluster } from './service-cluster.js';
import { party, uuid } from './fixtures.js';
import { grpcTransport, httpTransport, type Result, type Transport } from './transports.js';

export interface LoadOptions {
  /** Queue of the n-th ticket (default: the first queue of `queues` for all). */
  queueOf?: (n: number) => string;
  /** Requests in flight at once (default 24). */
  concurrency?: number;
  /** Pause of each worker between two tickets (default 0). */
  paceMs?: number;
  /** How long one ticket is retried before it counts as not acknowledged (default 30 s). */
  retryForMs?: number;
  /** Replicas not to send to (paused ones). */
  skip?: ReadonlySet<number>;
}

export interface Acked {
  id: string;
  queueId: string;
  /** When the acknowledgement arrived (Date.now()). */
  at: number;
}

/** Clients of every replica; made anew for a replica that was restarted. */
export class ClusterClients {
  private readonly byService = new Map<TestService, Transport[]>();

  constructor(private readonly cluster: ServiceCluster) {}

  /** Replica `i`'s transports (gRPC and HTTP), or none while it is not running. */
  of(i: number): Transport[] {
    const service = this.cluster.replicas[i]?.service;
    if (!service) return [];
    let transports = this.byService.get(service);
    if (!transports) {
      transports = [grpcTransport(service), httpTransport(service)];
      this.byService.set(service, transports);
    }
    return transports;
  }

  close(): void {
    for (const transports of this.byService.values()) for (const t of transports) t.close();
    this.byService.clear();
  }

  /** CreateTicket with retries (see the file comment); resolves whether it was acknowledged. */
  async createTicket(
    ticket: { id: string; queueId: string },
    start: number,
    retryForMs: number,
    skip?: ReadonlySet<number>,
  ): Promise<boolean> {
    const deadline = Date.now() + retryForMs;
    const size = this.cluster.replicas.length;
    for (let attempt = 0, backoff = 50; ; attempt++, backoff = Math.min(backoff * 2, 1000)) {
      const replica = (start + attempt) % size;
      const transports = skip?.has(replica) ? [] : this.of(replica);
      let result: Result<unknown> | undefined;
      if (transports.length > 0) {
        const t = transports[(start + attempt) % transports.length]!;
        result = await t.createTicket({ ...ticket, engineInput: party(1) }).catch(() => undefined);
      }
      if (result?.ok) return true;
      if (result && result.code !== 'UNAVAILABLE') throw new Error(`CreateTicket ${ticket.id}: ${result.code} ${result.message}`);
      if (transports.length === 0 && attempt % size !== size - 1) continue; // try the next replica at once
      if (Date.now() + backoff >= deadline) return false;
      await sleep(backoff);
    }
  }
}

/** Tickets created continuously until stop(); what was acknowledged and what was not. */
export class TicketLoad {
  readonly acked: Acked[] = [];
  readonly unacked: { id: string; queueId: string }[] = [];
  private stopped = false;
  private created = 0;
  private readonly workers: Promise<void>[];

  constructor(clients: ClusterClients, queueId: string, options: LoadOptions & { count?: number } = {}) {
    const queueOf = options.queueOf ?? (() => queueId);
    const worker = async () => {
      while (!this.stopped && (options.count === undefined || this.created < options.count)) {
        const n = this.created++;
        const ticket = { id: uuid(), queueId: queueOf(n) };
        const ok = await clients.createTicket(ticket, n, options.retryForMs ?? 30_000, options.skip);
        if (ok) this.acked.push({ ...ticket, at: Date.now() });
        else this.unacked.push(ticket);
        if (options.paceMs) await sleep(options.paceMs);
      }
    };
    this.workers = Array.from({ length: options.concurrency ?? 24 }, worker);
  }

  /** Resolves once `count` tickets (if given) are answered. */
  async done(): Promise<this> {
    await Promise.all(this.workers);
    return this;
  }

  /** Stops creating; resolves once the requests in flight are answered. */
  stop(): Promise<this> {
    this.stopped = true;
    return this.done();
  }

  ackedIn(queueId: string): Acked[] {
    return this.acked.filter((a) => a.queueId === queueId);
  }
}
