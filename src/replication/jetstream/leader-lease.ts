// A replica's lease on the leadership of one queue, held in the coordination KV bucket. The bucket's TTL is
// the lease (nats-server 2.9 has no per-key TTL): a key is created by the one replica that wins it, renewed
// by compare-and-set on its revision well before it ages out, and taken by another replica once it has.
//
// The lease gives liveness only. Safety comes from the replication log: a new leader claims a term there,
// and every record a leader appends carries its term, so a deposed leader's late records are ignored by
// every replica. The lease still stops acting on its own clock: once a renewal has not been confirmed for
// (lease - margin) since it was sent, `leading` turns false, before the key can have aged out on the server.
//
// A replica that does not hold the key watches it: each renewal it sees means the key ages out one lease
// later at the latest, so it campaigns then (and a few times shortly after), rather than at its next periodic
// campaign, which could come up to three quarters of a lease later; a released key is campaigned for at once.
// The periodic campaigns go on beside it, so a watch that stalls costs speed, never liveness.
import type { KV, KvWatchEntry } from '@nats-io/kv';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import type { LeaseShare } from './leadership-share.js';

export interface LeaderLeaseOptions {
  /** The bucket's TTL: how long a lease lasts without renewal. */
  leaseMs: number;
  /** Who holds the lease (stored as the key's value, for operators). */
  replicaId: string;
  log: Logger;
  /** A monotonic clock in milliseconds (tests may drive it). */
  now?: () => number;
  /** The replica's share of its queues' leadership (leadership-share.ts); without it, every lease campaigns alike. */
  share?: LeaseShare;
}

/** How soon a lease of ours is tried again after its renewal went unanswered... */
const TROUBLED_RETRY_MS = 500;
/** ...and how long a lapsed lease's renewal waits for its answer. */
const LAPSED_RENEWAL_TIMEOUT_MS = 1_000;

/** The compare-and-set lost: another replica holds the key, or ours moved on. */
const lostRace = (err: unknown) =>
  err instanceof JetStreamApiError &&
  (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);

export class LeaderLease {
  private revision: number | undefined;
  /**
   * The revision of a lease that lapsed on this replica's clock because its renewals went unanswered (the
   * bucket had no leader: a NATS node lost or returning). Nobody could take the key meanwhile, so it may
   * still be ours: the next step renews it, rather than campaigning and waiting for it to age out.
   */
  private lapsed: number | undefined;
  /** The last claim or renewal failed for want of an answer (not because another replica holds the key). */
  private troubled = false;
  /** Monotonic time after which this replica no longer counts as leader, renewed or not. */
  private validUntil = 0;
  private timer: NodeJS.Timeout | undefined;
  private expiry: NodeJS.Timeout | undefined;
  private stopped = true;
  /** The claim or renewal in flight, if any (settled once its revision is recorded). */
  private claiming: Promise<void> = Promise.resolve();
  private wasLeading = false;
  /** Campaigns skipped because the replica leads its share already. */
  private deferred = 0;
  /** After handing the lease over, this replica does not campaign for it again before then. */
  private holdOffUntil = 0;
  private readonly listeners: ((leading: boolean) => void)[] = [];
  private readonly now: () => number;
  private readonly value: string;
  /** When the key, as last seen put by another replica (or deleted), is gone from the server at the latest. */
  private ageOutAt: number | undefined;
  /** A step runs (it schedules the next itself). */
  private stepping = false;
  private watcher: { stop(): void } | undefined;

  constructor(
    private readonly kv: KV,
    readonly key: string,
    private readonly options: LeaderLeaseOptions,
  ) {
    this.now = options.now ?? (() => performance.now());
    this.value = JSON.stringify({ replica: options.replicaId });
  }

  /** Whether this replica leads now: it holds the key and its last confirmed renewal is recent enough. */
  get leading(): boolean {
    return this.revision !== undefined && this.now() < this.validUntil;
  }

  /** Whether the key is this replica's as far as it knows: held, or lapsed unanswered. */
  private get holds(): boolean {
    return this.revision !== undefined || this.lapsed !== undefined;
  }

  /** Called with true when this replica becomes leader, false when it stops being one. */
  onChange(listener: (leading: boolean) => void): void {
    this.listeners.push(listener);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.options.share?.campaigning(true);
    void this.step();
    void this.watchKey();
  }

  /** Stops campaigning; a held lease is released at once, so another replica need not wait for it to age out. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    this.watcher?.stop();
    this.options.share?.campaigning(false);
    // A renewal in flight moves the key to a new revision: release that one, or the key stays ours until it
    // ages out (the delete of the older revision is refused). Not waited for longer than a renewal period.
    await Promise.race([this.claiming, new Promise((resolve) => setTimeout(resolve, this.renewEveryMs))]);
    await this.release();
  }

  /** Gives the key up at once, so another replica need not wait for it to age out. */
  private async release(): Promise<void> {
    const revision = this.revision ?? this.lapsed;
    this.lapsed = undefined;
    this.lose();
    if (revision === undefined) return;
    try {
      await this.kv.delete(this.key, { previousSeq: revision });
    } catch (err) {
      // Someone else holds it already, or the broker is gone: the lease ages out by itself.
      this.options.log.debug({ key: this.key, err }, 'leader lease not released');
    }
  }

  /** Renew well inside the lease; campaign less often, with jitter, so replicas do not collide in step. */
  private get renewEveryMs(): number {
    return Math.max(50, Math.floor(this.options.leaseMs / 3));
  }

  private get campaignEveryMs(): number {
    const periodic = Math.floor(this.options.leaseMs / 2 + Math.random() * (this.options.leaseMs / 4));
    if (this.ageOutAt === undefined) return periodic;
    // The key seen last ages out by then: campaign at that moment, and again every ageOutRetryMs for a
    // lease (a renewal this replica has not seen yet, the server's expiry late, a campaign that failed).
    const untilAgeOut = this.ageOutAt - this.now();
    if (untilAgeOut > 0) return Math.min(periodic, Math.ceil(untilAgeOut));
    if (-untilAgeOut < this.options.leaseMs) return Math.min(periodic, this.ageOutRetryMs);
    return periodic;
  }

  /** Campaigns shortly after the key should have aged out, this often. */
  private get ageOutRetryMs(): number {
    return Math.max(25, Math.floor(this.options.leaseMs / 40));
  }

  /**
   * Follows the key while this replica runs: a put by another replica moves the moment it ages out to a lease
   * from now; a delete or purge, to now. Reopened when it ends or fails.
   */
  private async watchKey(): Promise<void> {
    while (!this.stopped) {
      try {
        const entries = await this.kv.watch({ key: this.key });
        this.watcher = entries;
        if (this.stopped) entries.stop();
        for await (const entry of entries) this.observed(entry);
      } catch (err) {
        this.options.log.debug({ key: this.key, err }, 'leader lease key not watched; watching again');
      }
      if (!this.stopped) await new Promise((resolve) => setTimeout(resolve, this.renewEveryMs));
    }
  }

  private observed(entry: KvWatchEntry): void {
    // While this replica holds the key (or its lapsed lease may still be its), what the watch sees is its own.
    if (this.stopped || this.holds) return;
    this.ageOutAt = this.now() + (entry.operation === 'PUT' ? this.options.leaseMs : 0);
    // The next campaign comes at the new moment (or the periodic one, if sooner); a step under way does this itself.
    if (this.stepping) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.step(), this.campaignEveryMs);
  }

  /** Confirmed renewals count from when they were sent; this much is kept back for clock rate and delays. */
  private get marginMs(): number {
    return Math.floor(this.options.leaseMs / 5);
  }

  /** One step of the lease (stepOnce), marked so that what the watch sees waits for its end. */
  private async step(): Promise<void> {
    this.stepping = true;
    try {
      await this.stepOnce();
    } finally {
      this.stepping = false;
    }
  }

  private async stepOnce(): Promise<void> {
    if (this.stopped) return;
    const { share } = this.options;
    if (!this.holds && (this.now() < this.holdOffUntil || (share && !share.mayCampaign(this.deferred)))) {
      this.deferred++;
      this.timer = setTimeout(() => void this.step(), this.campaignEveryMs);
      return;
    }
    if (this.revision !== undefined && share?.shouldRelease()) {
      this.options.log.info({ key: this.key }, 'leader lease handed over: this replica leads more than its share of queues');
      this.holdOffUntil = this.now() + 2 * this.options.leaseMs;
      await this.release();
      if (!this.stopped) this.timer = setTimeout(() => void this.step(), this.campaignEveryMs);
      return;
    }
    this.claiming = this.claimOrRenew();
    await this.claiming;
    if (this.stopped) return;
    // A lease of ours whose renewal went unanswered is tried again soon: the bucket may be back any moment.
    const every = this.holds ? (this.troubled ? Math.min(this.renewEveryMs, TROUBLED_RETRY_MS) : this.renewEveryMs) : this.campaignEveryMs;
    this.timer = setTimeout(() => void this.step(), every);
  }

  /** Creates the key (a campaign) or renews it; settles once the revision it got is recorded. */
  private async claimOrRenew(): Promise<void> {
    const sentAt = this.now();
    this.troubled = false;
    try {
      if (this.revision !== undefined) {
        this.revision = await this.kv.update(this.key, this.value, this.revision, this.renewEveryMs);
      } else if (this.lapsed !== undefined) {
        this.revision = await this.renewLapsed(this.lapsed);
      } else {
        this.revision = await this.kv.create(this.key, this.value);
      }
      if (this.stopped) return;
      this.deferred = 0;
      this.confirm(sentAt);
    } catch (err) {
      if (lostRace(err)) {
        if (this.revision !== undefined || this.lapsed !== undefined) {
          this.options.log.warn({ key: this.key }, 'leader lease lost to another replica');
        }
        this.lapsed = undefined;
        this.lose();
      } else {
        this.troubled = true;
        this.options.log.warn({ key: this.key, err }, 'leader lease could not be renewed or claimed');
      }
    }
  }

  /**
   * Renews a lapsed lease by its revision; if the key has aged out on the server meanwhile (its revision is
   * gone), campaigns for it at once. Fails with a lost race when another replica holds it.
   */
  private async renewLapsed(lapsed: number): Promise<number> {
    let revision: number;
    try {
      // Waits less than a renewal: one sent before the bucket had a leader again is dropped, not answered.
      revision = await this.kv.update(this.key, this.value, lapsed, Math.min(this.renewEveryMs, LAPSED_RENEWAL_TIMEOUT_MS));
    } catch (err) {
      if (!lostRace(err)) throw err;
      this.lapsed = undefined;
      revision = await this.kv.create(this.key, this.value);
    }
    this.lapsed = undefined;
    this.options.log.info({ key: this.key }, 'leader lease renewed after it had lapsed');
    return revision;
  }

  private confirm(sentAt: number): void {
    this.validUntil = sentAt + this.options.leaseMs - this.marginMs;
    clearTimeout(this.expiry);
    // Without a confirmed renewal by then, stop leading on our own clock.
    this.expiry = setTimeout(() => this.expire(), Math.max(0, this.validUntil - this.now()));
    this.emit();
  }

  private expire(): void {
    if (this.revision === undefined) return;
    // A timer may fire a little before its time by this clock (the event loop's cached time): wait the rest.
    const left = this.validUntil - this.now();
    if (left > 0) {
      this.expiry = setTimeout(() => this.expire(), left);
      return;
    }
    this.options.log.warn({ key: this.key }, 'leader lease expired unrenewed: no longer acting as leader');
    const revision = this.revision;
    this.lose();
    this.lapsed = revision;
  }

  private lose(): void {
    this.revision = undefined;
    this.validUntil = 0;
    clearTimeout(this.expiry);
    this.emit();
  }

  private emit(): void {
    const leading = this.leading;
    if (leading === this.wasLeading) return;
    this.wasLeading = leading;
    if (leading) this.options.log.info({ key: this.key }, 'leader lease won');
    this.options.share?.changed(leading);
    for (const listener of this.listeners) listener(leading);
  }
}
