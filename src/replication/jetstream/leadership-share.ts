// How many of its queues one replica should lead, so that leadership (and the engine's work) spreads over
// the replicas instead of piling onto whichever started first. Each replica keeps a presence key
// `replica.<id>` in the coordination bucket (renewed like a lease; it ages out with the bucket's TTL when
// the replica is gone) and counts the replicas present. Its fair share is ceil(its queues / replicas). A
// replica at or over its share does not campaign for more (unless a queue has gone leaderless for a while:
// liveness first), and one over its share releases one lease at a time, so a replica that joins late gets
// its share within a few leases. The presence key also carries what the replica says about itself (its
// queue files' hashes), so each replica sees the others' (`peers`).
import type { KV } from '@nats-io/kv';
import type { Logger } from 'pino';

/** What a lease asks of its replica's share. */
export interface LeaseShare {
  /** Whether a lease that does not hold its key may campaign now; `deferred` counts its skipped campaigns. */
  mayCampaign(deferred: number): boolean;
  /** Whether a held lease should be handed over now (its replica leads more than its share). */
  shouldRelease(): boolean;
  /** The lease won (true) or lost or released (false) its key. */
  changed(leading: boolean): void;
  /** A lease of this replica starts (true) or stops (false) campaigning. */
  campaigning(active: boolean): void;
}

/** Campaigns skipped for fairness before a lease campaigns anyway: a queue is never left without a leader. */
const MAX_DEFERRALS = 3;

export class LeadershipShare implements LeaseShare {
  private leases = 0;
  private held = 0;
  private replicas = 1;
  /** One release per third of a lease, so the replica does not drop all its queues at once. */
  private nextReleaseAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = true;
  private peerStates = new Map<string, unknown>();

  constructor(
    private readonly kv: KV,
    private readonly replicaId: string,
    private readonly leaseMs: number,
    private readonly log: Logger,
    /** What this replica announces with its presence (JSON-serializable). */
    private readonly announce: () => unknown = () => undefined,
  ) {}

  /** What each present replica (this one included) announced at the last refresh, by replica id. */
  get peers(): ReadonlyMap<string, unknown> {
    return this.peerStates;
  }

  get fairShare(): number {
    return Math.max(1, Math.ceil(this.leases / this.replicas));
  }

  get leading(): number {
    return this.held;
  }

  /** Announces this replica and counts the others, every third of a lease. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.refresh();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.kv.delete(this.presenceKey).catch(() => undefined);
  }

  mayCampaign(deferred: number): boolean {
    return this.held < this.fairShare || deferred >= MAX_DEFERRALS;
  }

  shouldRelease(): boolean {
    const now = performance.now();
    if (this.held <= this.fairShare || now < this.nextReleaseAt) return false;
    this.nextReleaseAt = now + this.leaseMs / 3;
    return true;
  }

  changed(leading: boolean): void {
    this.held += leading ? 1 : -1;
  }

  campaigning(active: boolean): void {
    this.leases += active ? 1 : -1;
  }

  private get presenceKey(): string {
    return `replica.${this.replicaId}`;
  }

  private async refresh(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.kv.put(this.presenceKey, JSON.stringify({ replica: this.replicaId, state: this.announce() }));
      const peers = new Map<string, unknown>();
      for await (const key of await this.kv.keys('replica.>')) {
        const entry = await this.kv.get(key);
        if (!entry || entry.length === 0) continue;
        const value = entry.json<{ replica?: string; state?: unknown }>();
        peers.set(value.replica ?? key.slice('replica.'.length), value.state);
      }
      this.peerStates = peers;
      this.replicas = Math.max(1, peers.size);
    } catch (err) {
      // Without the count the share stays as it was: leadership still works, it just spreads less well.
      this.log.debug({ replica: this.replicaId, err }, 'replica presence not refreshed');
    }
    if (!this.stopped) this.timer = setTimeout(() => void this.refresh(), Math.max(50, Math.floor(this.leaseMs / 3)));
  }
}
