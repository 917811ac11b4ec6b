"""Bearer tokens (docs/security.md) against a service started with AUTH_TOKENS_FILE: the client's access_token
travels as gRPC metadata and on the WebSocket upgrade; no token is UNAUTHENTICATED, a token without the call's
scope PERMISSION_DENIED, neither retried."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from matchmaker_client import MatchmakerError, OutcomeStreamError, RetryEvent, websocket_consumer
from support.consumers import next_delivery, queue_duel
from support.service import Service, duel_queue

TICKETS = secrets.token_hex(32)
OUTCOMES = secrets.token_hex(32)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tokens: Path = tmp_path_factory.mktemp("auth") / "tokens.yaml"
    entries = [
        {"name": "py-backend", "sha256": hashlib.sha256(TICKETS.encode()).hexdigest(), "scopes": ["tickets"]},
        {"name": "py-outcomes", "sha256": hashlib.sha256(OUTCOMES.encode()).hexdigest(), "scopes": ["outcomes"]},
    ]
    tokens.write_text(json.dumps({"tokens": entries}))
    service = Service({"auth.duel": duel_queue(50)}, env={"AUTH_TOKENS_FILE": str(tokens)})
    try:
        yield service
    finally:
        service.close()


async def test_calls_with_a_token_of_the_tickets_scope(guarded: Service, make_client) -> None:
    retries: list[RetryEvent] = []
    for token, code in ((None, "UNAUTHENTICATED"), ("not-a-token", "UNAUTHENTICATED"), (OUTCOMES, "PERMISSION_DENIED")):
        api = make_client(guarded.grpc_address, retries, access_token=token)
        with pytest.raises(MatchmakerError) as refused:
            await api.create_ticket("auth.duel")
        assert (refused.value.code, refused.value.attempts) == (code, 1)
    assert retries == []
    api = make_client(guarded.grpc_address, access_token=TICKETS)
    assert (await api.create_ticket("auth.duel")).ticket_id
    assert (await api.clear_queue_pool("auth.duel")).tickets_cleared == 1


async def test_consumes_outcomes_with_a_token_of_the_outcomes_scope(guarded: Service, make_client) -> None:
    # Refused with 401 or 403, which a reconnection may cure (the tokens file is re-read): the consumer keeps
    # trying, and tells on_error each time.
    for token, status in ((None, 401), (TICKETS, 403)):
        errors: list[Exception] = []
        refused = websocket_consumer(guarded.base_url, queue_id="auth.duel", access_token=token, on_error=errors.append)
        try:
            for _ in range(100):
                if errors:
                    break
                await asyncio.sleep(0.05)
        finally:
            await refused.close()
        assert isinstance(errors[0], OutcomeStreamError)
        assert errors[0].status == status

    api = make_client(guarded.grpc_address, access_token=TICKETS)
    async with websocket_consumer(
        guarded.base_url, queue_id="auth.duel", consumer="py-owned", access_token=OUTCOMES
    ) as consumer:
        await consumer.ready()
        ticket_ids, _ = await queue_duel(api, "auth.duel")
        delivery = await next_delivery(consumer)
        assert sorted(t.id for t in delivery.outcome.match_created.match.tickets) == sorted(ticket_ids)
        await asyncio.wait_for(delivery.ack(), 5)
