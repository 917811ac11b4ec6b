// A replica's lease on the leadership of one queue, held in the coordination KV bucket. The bucket's TTL is
// the lease (nats-server 2.9 has no per-key TTL): a key is created by the one replica that wins it, renewed
// by compare-and-set on its revision well before it ages out, and taken by another replica once it has.
//
// The lease gives liveness only. Safety comes from the replication log: a new leader claims a term there,
// and every record a leader appends carries its term, so a deposed leader's late records are ignored by
// every replica. The lease still stops acting on its own clock: once a renewal has not been confirmed for
// (lease - margin) since it was sent, `leading` turns false, before the key can have aged out on the server.
import type { KV } from '@nats-io/kv';
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

/** The compare-and-set lost: another replica holds the key, or ours moved on. */
const lostRace = (err: unknown) =>
  err instanceof JetStreamApiError &&
  (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown);

export class LeaderLease {
  private revision: number | undefined;
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

  /** Called with true when this replica becomes leader, false when it stops being one. */
  onChange(listener: (leading: boolean) => void): void {
    this.listeners.push(listener);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.options.share?.campaigning(true);
    void this.step();
  }

  /** Stops campaigning; a held lease is released at once, so another replica need not wait for it to age out. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    this.options.share?.campaigning(false);
    // A renewal in flight moves the key to a new revision: release that one, or the key stays ours until it
    // ages out (the delete of the older revision is refused). Not waited for longer than a renewal period.
    await Promise.race([this.claiming, new Promise((resolve) => setTimeout(resolve, this.renewEveryMs))]);
    await this.release();
  }

  /** Gives the key up at once, so another replica need not wait for it to age out. */
  private async release(): Promise<void> {
    const revision = this.revision;
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
    return Math.floor(this.options.leaseMs / 2 + Math.random() * (this.options.leaseMs / 4));
  }

  /** Confirmed renewals count from when they were sent; this much is kept back for clock rate and delays. */
  private get marginMs(): number {
    return Math.floor(this.options.leaseMs / 5);
  }

  private async step(): Promise<void> {
    if (this.stopped) return;
    const { share } = this.options;
    if (this.revision === undefined && (this.now() < this.holdOffUntil || (share && !share.mayCampaign(this.deferred)))) {
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
    this.timer = setTimeout(() => void this.step(), this.revision === undefined ? this.campaignEveryMs : this.renewEveryMs);
  }

  /** Creates the key (a campaign) or renews it; settles once the revision it got is recorded. */
  private async claimOrRenew(): Promise<void> {
    const sentAt = this.now();
    try {
      this.revision =
        this.revision === undefined
          ? await this.kv.create(this.key, this.value)
          : await this.kv.update(this.key, this.value, this.revision, this.renewEveryMs);
      if (this.stopped) return;
      this.deferred = 0;
      this.confirm(sentAt);
    } catch (err) {
      if (lostRace(err)) {
        if (this.revision !== undefined) this.options.log.warn({ key: this.key }, 'leader lease lost to another replica');
        this.lose();
      } else {
        this.options.log.warn({ key: this.key, err }, 'leader lease could not be renewed or claimed');
      }
    }
  }

  private confirm(sentAt: number): void {
    this.validUntil = sentAt + this.options.leaseMs - this.marginMs;
    clearTimeout(this.expiry);
    // Without a confirmed renewal by then, stop leading on our own clock.
    this.expiry = setTimeout(() => this.expire(), Math.max(0, this.validUntil - this.now()));
    this.emit();
  }

  private expire(): void {
    if (this.revision !== undefined && this.now() >= this.validUntil) {
      this.options.log.warn({ key: this.key }, 'leader lease expired unrenewed: no longer acting as leader');
      this.lose();
    }
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
    this.options.share?.changed(leading);
    for (const listener of this.listeners) listener(leading);
  }
}
