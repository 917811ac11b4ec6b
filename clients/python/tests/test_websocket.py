"""The WebSocket outcome consumer against the real service: a match.created made through the client, handed out
and acknowledged (the service stores the position); a resume after lost connections that loses nothing; a removal
split into chunks handed out as one delivery (as test/client/client-outcomes.test.ts does for the TypeScript client)."""

from __future__ import annotations

import asyncio

from matchmaker_client import (
    BackoffPolicy,
    MatchmakerClient,
    OutcomeDelivery,
    OutcomeStreamError,
    SequenceGap,
    match_engine_output,
    metadata_text,
    websocket_consumer,
)
from support.consumers import next_delivery, queue_duel
from support.proxy import TcpProxy
from support.service import Service


def removed_ids(delivery: OutcomeDelivery) -> list[str]:
    return list(delivery.outcome.tickets_removed.ticket_ids)


async def removed(api: MatchmakerClient, count: int) -> list[str]:
    """``count`` tickets created in py.lobby and cleared: their ids, in the removal outcome(s)."""
    ids = [(await api.create_ticket("py.lobby")).ticket_id for _ in range(count)]
    assert (await api.clear_queue_pool("py.lobby")).tickets_cleared == count
    return ids


async def test_hands_out_a_match_created_and_acknowledges_it(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    async with websocket_consumer(service.base_url, queue_id="py.duel", consumer="py-ws") as consumer:
        await consumer.ready()
        ticket_ids, player_ids = await queue_duel(api, "py.duel")
        delivery = await next_delivery(consumer)
        assert delivery.outcome.kind == "match.created"
        match = delivery.outcome.match_created.match
        output = match_engine_output(match)
        assert output is not None
        assert sorted(p for team in output.teams for p in team.player_ids) == sorted(player_ids)
        assert sorted(t.id for t in match.tickets) == sorted(ticket_ids)
        assert sorted(metadata_text(t) or "" for t in match.tickets) == sorted(f"session:{p}" for p in player_ids)
        assert output.host.preferred == "eu-west"
        await asyncio.wait_for(delivery.ack(), 5)  # returns once the service confirmed the position
        offset = delivery.outcome.producer_sequence

    # The named consumer's stored position is that outcome: a new connection starts after it.
    async with websocket_consumer(service.base_url, queue_id="py.duel", consumer="py-ws") as again:
        await again.ready()
        assert again.position == offset


async def test_resumes_after_a_lost_connection_without_losing_what_was_recorded_meanwhile(
    service: Service, make_client
) -> None:
    api = make_client(service.grpc_address)
    proxy = await TcpProxy(service.http_port).start()
    errors: list[Exception] = []
    # No consumer name: without the client's own from_offset the service would start at the newest outcome.
    consumer = websocket_consumer(
        f"ws://{proxy.address}",
        queue_id="py.lobby",
        reconnect=BackoffPolicy(initial_delay=0.05, max_delay=0.2),
        on_error=errors.append,
    )
    try:
        await consumer.ready()
        before = await removed(api, 1)
        first = await next_delivery(consumer)
        assert removed_ids(first) == before
        await first.ack()

        proxy.refuse(True)
        proxy.cut()
        meanwhile = [await removed(api, 1) for _ in range(3)]
        await asyncio.sleep(0.3)  # a few refused reconnections
        proxy.refuse(False)
        received = []
        for _ in meanwhile:
            delivery = await next_delivery(consumer)
            received.append(removed_ids(delivery))
            await asyncio.wait_for(delivery.ack(), 5)
        assert received == meanwhile
        assert proxy.accepted >= 2
        assert (consumer.buffered, consumer.duplicates) == (0, 0)
        assert any(isinstance(e, OutcomeStreamError) for e in errors)
    finally:
        await consumer.close()
        await proxy.close()


async def test_sends_an_ack_made_while_disconnected_once_reconnected(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    proxy = await TcpProxy(service.http_port).start()
    consumer = websocket_consumer(
        f"ws://{proxy.address}", queue_id="py.lobby", consumer="py-late-ack", reconnect=BackoffPolicy(0.05, 0.2)
    )
    try:
        await consumer.ready()
        await removed(api, 1)
        delivery = await next_delivery(consumer)
        proxy.refuse(True)
        proxy.cut()
        acked = delivery.ack()  # the connection is gone: nothing to send it on yet
        await asyncio.sleep(0.3)
        assert not acked.done()
        proxy.refuse(False)
        await asyncio.wait_for(acked, 10)  # sent on the next connection, then confirmed
    finally:
        await consumer.close()
        await proxy.close()
    async with websocket_consumer(service.base_url, queue_id="py.lobby", consumer="py-late-ack") as again:
        await again.ready()
        assert again.position == delivery.outcome.producer_sequence


async def test_hands_out_a_removal_split_into_chunks_as_one_delivery(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    async with websocket_consumer(service.base_url, queue_id="py.lobby") as consumer:
        await consumer.ready()
        ids = await removed(api, 5)
        delivery = await next_delivery(consumer)
        assert delivery.complete
        assert [len(c.tickets_removed.ticket_ids) for c in delivery.chunks] == [2, 2, 1]
        assert len({c.tickets_removed.batch.operation_id for c in delivery.chunks}) == 1
        assert sorted(removed_ids(delivery)) == sorted(ids)
        await delivery.ack()


async def test_run_handles_one_at_a_time_and_acknowledges_each(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    consumer = websocket_consumer(service.base_url, queue_id="py.lobby", consumer="py-run")
    await consumer.ready()
    handled: list[list[str]] = []

    async def handle(outcome, delivery) -> None:
        handled.append(list(outcome.tickets_removed.ticket_ids))
        if len(handled) == 2:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(consumer.close()))

    running = asyncio.ensure_future(consumer.run(handle))
    expected = [await removed(api, 1), await removed(api, 1)]
    await asyncio.wait_for(running, 10)
    assert handled == expected


async def test_detects_gaps_only_where_it_sees_every_offset(service: Service, make_client) -> None:
    api = make_client(service.grpc_address)
    everything_gaps: list[SequenceGap] = []
    lobby_gaps: list[SequenceGap] = []
    # Every queue: every offset of the producer arrives, so gap detection is on by default and finds none.
    everything = websocket_consumer(service.base_url, on_gap=everything_gaps.append)
    # One queue: the other queues' offsets are missing by design; detection asked for anyway, it reports them.
    lobby = websocket_consumer(service.base_url, queue_id="py.lobby", detect_gaps=True, on_gap=lobby_gaps.append)
    try:
        await everything.ready()
        await lobby.ready()
        await removed(api, 1)
        assert (await next_delivery(everything)).outcome.kind == "ticket.removed"
        await queue_duel(api, "py.duel")
        assert (await next_delivery(everything)).outcome.kind == "match.created"
        await removed(api, 1)
        assert (await next_delivery(everything)).outcome.kind == "ticket.removed"
        first, second = await next_delivery(lobby), await next_delivery(lobby)
        assert second.outcome.producer_sequence == first.outcome.producer_sequence + 2
        assert (everything_gaps, everything.gaps) == ([], 0)
        assert [(g.after, g.next, g.missing, g.queue_id) for g in lobby_gaps] == [
            (first.outcome.producer_sequence, second.outcome.producer_sequence, 1, "py.lobby")
        ]
    finally:
        await everything.close()
        await lobby.close()


async def test_replaces_a_connection_silent_for_idle_timeout_and_follows_a_namespace(
    service: Service, make_client
) -> None:
    api = make_client(service.grpc_address)
    errors: list[Exception] = []
    # The service's heartbeat comes every 15 s: with a 0.3 s idle timeout every quiet moment is a dead connection.
    consumer = websocket_consumer(
        service.base_url, queue_id="py.>", idle_timeout=0.3, reconnect=BackoffPolicy(0.01, 0.05), on_error=errors.append
    )
    try:
        await consumer.ready()
        await asyncio.sleep(1)
        assert any("silent" in str(e) for e in errors)
        ids = await removed(api, 1)
        delivery = await next_delivery(consumer)
        assert (delivery.outcome.queue_id, removed_ids(delivery)) == ("py.lobby", ids)
    finally:
        await consumer.close()


async def test_ends_with_the_refusal_of_a_malformed_request(service: Service) -> None:
    consumer = websocket_consumer(service.base_url, queue_id="a..b")
    try:
        await asyncio.wait_for(consumer.ready(), 5)
        raise AssertionError("expected a refusal")
    except OutcomeStreamError as err:
        assert err.status == 400
    finally:
        await consumer.close()
