"""MatchmakerClient against the real service over gRPC: the six operations, the two admin calls, and the engine
input builder (as test/client/client-operations.test.ts does for the TypeScript client)."""

from __future__ import annotations

import base64
import re
import uuid
from typing import Any

import pytest

from matchmaker_client import (
    EngineInput,
    decode_engine_input,
    encode_engine_input,
    engine_input,
)
from support.http import active_tickets, admin_ticket, poll_until
from support.service import Service

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def solo(player_id: str, mmr: float = 0.5):
    return engine_input().player(player_id, mmr, {"eu-west": 30})


async def test_creates_tickets_cancels_them_and_clears_the_pool(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    ticket_id = str(uuid.uuid4())
    created = await api.create_ticket("py.basic", ticket_id=ticket_id, engine_input=solo("alice"), metadata="session-1")
    assert created.ticket_id == ticket_id
    status, body = await admin_ticket(service.base_url, "py.basic", ticket_id)
    assert (status, body["state"], body["ticket"]["metadata"]) == (
        200,
        "active",
        base64.b64encode(b"session-1").decode(),
    )
    stored = decode_engine_input(base64.b64decode(body["ticket"]["engineInput"]))
    assert [(p.player_id, p.mmr, dict(p.latencies)) for p in stored.players] == [("alice", 0.5, {"eu-west": 30})]

    chosen = await api.create_ticket("py.basic")
    assert UUID4.fullmatch(chosen.ticket_id)
    assert (await admin_ticket(service.base_url, "py.basic", chosen.ticket_id))[0] == 200

    await api.cancel_ticket("py.basic", ticket_id)
    assert (await admin_ticket(service.base_url, "py.basic", ticket_id))[0] == 404

    cleared = await api.clear_queue_pool("py.basic")
    assert cleared.tickets_cleared == 1
    assert await active_tickets(service.base_url, "py.basic") == 0


async def test_creates_and_cancels_backfill_requests(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    created = await api.create_backfill_request(
        "py.basic", str(uuid.uuid4()), slots_requested=2, engine_input=solo("host")
    )
    assert UUID4.fullmatch(created.backfill_id)
    unknown = str(uuid.uuid4())
    cancelled = await api.cancel_backfill_requests("py.basic", [created.backfill_id, unknown])
    assert list(cancelled.failed_backfill_ids) == [unknown]


async def test_reactivates_the_tickets_of_a_formed_match(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    ids = [(await api.create_ticket("py.duel", engine_input=solo(f"p{i}"))).ticket_id for i in range(2)]

    async def lookups() -> list[Any]:
        return [(await admin_ticket(service.base_url, "py.duel", i))[1] for i in ids]

    def states(found: list[Any]) -> list[str]:
        return [lookup.get("state") for lookup in found]

    matched = await poll_until(lookups, lambda found: states(found) == ["resolved", "resolved"])
    assert states(matched) == ["resolved", "resolved"]
    unknown = str(uuid.uuid4())
    reactivated = await api.reactivate_tickets("py.duel", [*ids, unknown])
    assert list(reactivated.failed_ticket_ids) == [unknown]
    # Back in the pool: active, unless the queue's next tick (every 50 ms) has already matched the two
    # again, and then in a match of its own, not the one they were reactivated from.
    first_match = {lookup["matchId"] for lookup in matched}
    after = await lookups()
    assert all(lookup.get("state") == "active" or lookup.get("matchId") not in first_match for lookup in after), after
    await api.clear_queue_pool("py.duel")


async def test_explains_a_waiting_ticket_and_reads_queue_statistics(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    ticket_id = (await api.create_ticket("py.basic", engine_input=solo("waiting"))).ticket_id
    why = await api.explain_ticket("py.basic", ticket_id)
    assert (why.ticket_id, why.state, [r.ruleset_id for r in why.rulesets]) == (ticket_id, "active", ["5v5"])
    stats = await api.get_queue_statistics("py.basic")
    assert (stats.queue_id, stats.queue.tickets_waiting) == ("py.basic", 1)
    await api.clear_queue_pool("py.basic")


def test_builds_engine_inputs_a_party_with_attributes_round_trips() -> None:
    builder = (
        engine_input()
        .player("a", 0.61, {"eu-west": 28, "eu-central": 41})
        .player("b", 0.58)
        .attribute("game_mode", values=["ranked"], accepts=["ranked", "casual"])
    )
    decoded = decode_engine_input(builder.to_bytes())
    assert decoded == builder.build()
    assert [(p.player_id, p.mmr, dict(p.latencies)) for p in decoded.players] == [
        ("a", 0.61, {"eu-west": 28, "eu-central": 41}),
        ("b", 0.58, {}),
    ]
    assert (list(decoded.attributes["game_mode"].values), list(decoded.attributes["game_mode"].accepts)) == (
        ["ranked"],
        ["ranked", "casual"],
    )
    # The same message from its canonical JSON (either field spelling) and from a message.
    as_json = {"players": [{"playerId": "a", "mmr": 0.61}], "attributes": {"game_mode": {"values": ["ranked"]}}}
    snake = {"players": [{"player_id": "a", "mmr": 0.61}], "attributes": {"game_mode": {"values": ["ranked"]}}}
    expected = engine_input().player("a", 0.61).attribute("game_mode", values=["ranked"]).to_bytes()
    assert encode_engine_input(as_json) == encode_engine_input(snake) == expected
    assert encode_engine_input(EngineInput.FromString(expected)) == expected


@pytest.mark.parametrize(
    ("mmr", "latencies"),
    [(float("nan"), None), (float("inf"), None), (1.0, {"h": 1.5}), (1.0, {"h": -1}), (1.0, {"h": 2**32})],
)
def test_refuses_nonsense_before_sending(mmr: float, latencies: dict | None) -> None:
    with pytest.raises(ValueError):
        engine_input().player("x", mmr, latencies)
