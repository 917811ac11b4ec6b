// The game backend: queues players through the matchmaker client and reacts to every outcome kind. The
// players it knows are kept by ticket id; each ticket's metadata carries its player id as well, so outcomes
// that carry tickets can be read without that map.
import {
  type EngineOutput,
  engineInput,
  type MatchmakerClient,
  matchEngineOutput,
  MatchmakerError,
  metadataText,
  type Outcome,
  QueueRetiringError,
  RemovalReason,
} from '@matchmaker/client';
import type { Provisioner } from './provisioner.js';

export interface Player {
  playerId: string;
  mmr: number;
  latencies: Record<string, number>;
}

/** One JSON line per event on stdout: what a real backend would do is described by `event`. */
export type Log = (event: string, fields?: Record<string, unknown>) => void;

export class GameBackend {
  /** Waiting players by ticket id. */
  private readonly waiting = new Map<string, Player>();
  private retired = false;
  readonly counts = { queued: 0, provisioned: 0, reactivated: 0, requeued: 0, timedOut: 0 };

  constructor(
    private readonly client: MatchmakerClient,
    private readonly queueId: string,
    private readonly provisioner: Provisioner,
    private readonly log: Log,
  ) {}

  /** Submits a ticket for one player (a new ticket id each time). */
  async queue(player: Player): Promise<void> {
    if (this.retired) return this.log('not_queued', { playerId: player.playerId, why: 'queue retired' });
    try {
      const input = engineInput()
        .player(player)
        .attribute('game_mode', { values: ['ranked'] });
      const { ticketId } = await this.client.createTicket({ queueId: this.queueId, engineInput: input, metadata: player.playerId });
      this.waiting.set(ticketId, player);
      this.counts.queued++;
      this.log('queued', { playerId: player.playerId, ticketId });
    } catch (err) {
      if (err instanceof QueueRetiringError) {
        this.retired = true;
        return this.log('queue_retiring', { queueId: err.queueId });
      }
      throw err;
    }
  }

  /** Handles one outcome; the consumer acknowledges it once this resolves. */
  async handle(outcome: Outcome): Promise<void> {
    const p = outcome.payload;
    switch (p.case) {
      case 'matchCreated':
        return this.startMatch(
          p.value.match!.id,
          p.value.match!.tickets.map((t) => t.id),
          matchEngineOutput(p.value.match!),
        );
      case 'backfillCreated': {
        const players = p.value.backfill!.assignedTickets.map((t) => metadataText(t));
        for (const t of p.value.backfill!.assignedTickets) this.waiting.delete(t.id);
        return this.log('backfill_filled', { matchId: p.value.backfill!.request!.matchId, players });
      }
      case 'ticketsExpired':
        for (const id of p.value.ticketIds) {
          const player = this.waiting.get(id);
          this.waiting.delete(id);
          this.counts.timedOut++;
          this.log('search_timed_out', { ticketId: id, playerId: player?.playerId });
        }
        return;
      case 'ticketsRemoved':
        if (p.value.reason === RemovalReason.QUEUE_RETIRED) {
          this.retired = true;
          for (const id of p.value.ticketIds) this.waiting.delete(id);
          return this.log('queue_retired', { queueId: outcome.queueId, tickets: p.value.ticketIds.length });
        }
        // Cleared, or the queue's configuration changed under them: queue the players again.
        return this.requeue(p.value.ticketIds, RemovalReason[p.value.reason]);
      case 'backfillRequestsExpired':
      case 'backfillRequestsRemoved':
        return this.log('backfill_stopped', { kind: outcome.kind, requests: p.value.backfillRequestIds });
      case 'ticketOrphaned':
        return this.requeue([p.value.ticket!.id], `ruleset ${p.value.rulesetId} removed`);
      case 'backfillRequestOrphaned': {
        const request = p.value.backfillRequest!;
        // Post it again without the removed ruleset (fine in a single-ruleset queue).
        const { backfillId } = await this.client.createBackfillRequest({
          queueId: request.queueId,
          matchId: request.matchId,
          slotsRequested: request.slotsRequested,
        });
        return this.log('backfill_reposted', { matchId: request.matchId, backfillId });
      }
      default:
        return this.log('unknown_outcome', { kind: outcome.kind });
    }
  }

  /** Provisions the match's server; when that fails, gives the players their place back (ReactivateTickets). */
  private async startMatch(matchId: string, ticketIds: string[], output: EngineOutput | undefined): Promise<void> {
    const hosts = output?.host ? [output.host.preferred, ...output.host.acceptable.filter((h) => h !== output.host!.preferred)] : [];
    const server = await this.provisioner.provision(matchId, hosts);
    if (server) {
      for (const id of ticketIds) this.waiting.delete(id);
      this.counts.provisioned++;
      const teams = output?.teams.map((t) => t.playerIds) ?? [];
      return this.log('provisioned', { matchId, host: server.host, address: server.address, teams, ticketIds });
    }
    this.log('provisioning_failed', { matchId, hosts });
    const { failedTicketIds } = await this.client.reactivateTickets(this.queueId, ticketIds);
    this.counts.reactivated++;
    this.log('reactivated', { matchId, ticketIds, failedTicketIds });
    // Past terminal_retention_ttl_secs a ticket cannot come back: those players need a new ticket.
    if (failedTicketIds.length > 0) await this.requeue(failedTicketIds, 'not reactivatable');
  }

  private async requeue(ticketIds: string[], why: string): Promise<void> {
    for (const id of ticketIds) {
      const player = this.waiting.get(id);
      this.waiting.delete(id);
      if (!player) continue; // not one of ours (or already handled)
      this.counts.requeued++;
      this.log('requeue', { playerId: player.playerId, oldTicketId: id, why });
      try {
        await this.queue(player);
      } catch (err) {
        if (!(err instanceof MatchmakerError)) throw err;
        this.log('requeue_failed', { playerId: player.playerId, code: err.code, message: err.message });
      }
    }
  }
}
