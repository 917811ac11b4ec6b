"""Helpers for the outcome tests: the next delivery within a time limit, two players queued into a 1v1 queue."""

from __future__ import annotations

import asyncio
import uuid

from matchmaker_client import MatchmakerClient, OutcomeDelivery, engine_input
from matchmaker_client.outcomes import QueuedConsumer


async def next_delivery(consumer: QueuedConsumer, timeout: float = 10.0) -> OutcomeDelivery:
    delivery = await asyncio.wait_for(consumer.next(), timeout)
    assert delivery is not None, "the consumer ended"
    return delivery


async def queue_duel(api: MatchmakerClient, queue_id: str) -> tuple[list[str], list[str]]:
    """Two players queued through the client in a 1v1 queue (one match.created): their ticket and player ids."""
    player_ids = [f"p-{uuid.uuid4()}", f"p-{uuid.uuid4()}"]
    ticket_ids = []
    for player_id in player_ids:
        created = await api.create_ticket(
            queue_id,
            engine_input=engine_input().player(player_id, 0.5, {"eu-west": 25}),
            metadata=f"session:{player_id}",
        )
        ticket_ids.append(created.ticket_id)
    return ticket_ids, player_ids
