"""The game backend: queues players through the matchmaker client and reacts to every outcome kind. The players it
knows are kept by ticket id; each ticket's metadata carries its player id as well, so outcomes that carry tickets
can be read without that map. The Python twin of examples/game-backend/backend.ts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from provisioner import Provisioner

from matchmaker_client import (
    EngineOutput,
    MatchmakerClient,
    MatchmakerError,
    Outcome,
    QueueRetiringError,
    RemovalReason,
    engine_input,
    match_engine_output,
    metadata_text,
)

Log = Callable[..., None]
"""One JSON line per event: ``log("queued", playerId=..., ticketId=...)``."""


@dataclass
class Player:
    player_id: str
    mmr: float
    latencies: dict[str, int]


@dataclass
class Counts:
    queued: int = 0
    provisioned: int = 0
    reactivated: int = 0
    requeued: int = 0
    timed_out: int = 0


@dataclass
class GameBackend:
    client: MatchmakerClient
    queue_id: str
    provisioner: Provisioner
    log: Log
    counts: Counts = field(default_factory=Counts)
    waiting: dict[str, Player] = field(default_factory=dict)
    """Waiting players by ticket id."""
    retired: bool = False

    async def queue(self, player: Player) -> None:
        """Submits a ticket for one player (a new ticket id each time)."""
        if self.retired:
            return self.log("not_queued", playerId=player.player_id, why="queue retired")
        request = (
            engine_input()
            .player(player.player_id, player.mmr, player.latencies)
            .attribute("game_mode", values=["ranked"])
        )
        try:
            created = await self.client.create_ticket(self.queue_id, engine_input=request, metadata=player.player_id)
        except QueueRetiringError as err:
            self.retired = True
            return self.log("queue_retiring", queueId=err.queue_id)
        self.waiting[created.ticket_id] = player
        self.counts.queued += 1
        self.log("queued", playerId=player.player_id, ticketId=created.ticket_id)

    async def handle(self, outcome: Outcome) -> None:
        """Handles one outcome; the consumer acknowledges it once this returns."""
        kind = outcome.WhichOneof("payload")
        if kind == "match_created":
            match = outcome.match_created.match
            return await self._start_match(match.id, [t.id for t in match.tickets], match_engine_output(match))
        if kind == "backfill_created":
            backfill = outcome.backfill_created.backfill
            for ticket in backfill.assigned_tickets:
                self.waiting.pop(ticket.id, None)
            players = [metadata_text(t) for t in backfill.assigned_tickets]
            return self.log("backfill_filled", matchId=backfill.request.match_id, players=players)
        if kind == "tickets_expired":
            for ticket_id in outcome.tickets_expired.ticket_ids:
                player = self.waiting.pop(ticket_id, None)
                self.counts.timed_out += 1
                self.log("search_timed_out", ticketId=ticket_id, playerId=player and player.player_id)
            return None
        if kind == "tickets_removed":
            removed = outcome.tickets_removed
            if removed.reason == RemovalReason.QUEUE_RETIRED:
                self.retired = True
                for ticket_id in removed.ticket_ids:
                    self.waiting.pop(ticket_id, None)
                return self.log("queue_retired", queueId=outcome.queue_id, tickets=len(removed.ticket_ids))
            # Cleared, or the queue's configuration changed under them: queue the players again.
            return await self._requeue(list(removed.ticket_ids), RemovalReason.Name(removed.reason))
        if kind in ("backfill_requests_expired", "backfill_requests_removed"):
            requests = list(getattr(outcome, kind).backfill_request_ids)
            return self.log("backfill_stopped", kind=outcome.kind, requests=requests)
        if kind == "ticket_orphaned":
            orphaned = outcome.ticket_orphaned
            return await self._requeue([orphaned.ticket.id], f"ruleset {orphaned.ruleset_id} removed")
        if kind == "backfill_request_orphaned":
            request = outcome.backfill_request_orphaned.backfill_request
            # Post it again without the removed ruleset (fine in a single-ruleset queue).
            created = await self.client.create_backfill_request(
                request.queue_id, request.match_id, slots_requested=request.slots_requested
            )
            return self.log("backfill_reposted", matchId=request.match_id, backfillId=created.backfill_id)
        return self.log("unknown_outcome", kind=outcome.kind)

    async def _start_match(self, match_id: str, ticket_ids: list[str], output: EngineOutput | None) -> None:
        """Provisions the match's server; when that fails, gives the players their place back (ReactivateTickets)."""
        hosts: list[str] = []
        if output is not None and output.HasField("host"):
            hosts = [output.host.preferred, *(h for h in output.host.acceptable if h != output.host.preferred)]
        server = await self.provisioner.provision(match_id, hosts)
        if server is not None:
            for ticket_id in ticket_ids:
                self.waiting.pop(ticket_id, None)
            self.counts.provisioned += 1
            teams = [list(t.player_ids) for t in output.teams] if output is not None else []
            return self.log(
                "provisioned",
                matchId=match_id,
                host=server.host,
                address=server.address,
                teams=teams,
                ticketIds=ticket_ids,
            )
        self.log("provisioning_failed", matchId=match_id, hosts=hosts)
        reactivated = await self.client.reactivate_tickets(self.queue_id, ticket_ids)
        failed = list(reactivated.failed_ticket_ids)
        self.counts.reactivated += 1
        self.log("reactivated", matchId=match_id, ticketIds=ticket_ids, failedTicketIds=failed)
        # Past terminal_retention_ttl_secs a ticket cannot come back: those players need a new ticket.
        if failed:
            await self._requeue(failed, "not reactivatable")
        return None

    async def _requeue(self, ticket_ids: list[str], why: str) -> None:
        for ticket_id in ticket_ids:
            player = self.waiting.pop(ticket_id, None)
            if player is None:
                continue  # not one of ours (or already handled)
            self.counts.requeued += 1
            self.log("requeue", playerId=player.player_id, oldTicketId=ticket_id, why=why)
            try:
                await self.queue(player)
            except MatchmakerError as err:
                self.log("requeue_failed", playerId=player.player_id, code=err.code, message=err.details)


def summary(counts: Counts) -> dict[str, Any]:
    return {
        "queued": counts.queued,
        "provisioned": counts.provisioned,
        "reactivated": counts.reactivated,
        "requeued": counts.requeued,
        "timedOut": counts.timed_out,
    }
