"""Typed errors and retries: codes other than UNAVAILABLE fail at once with their name (QUEUE_RETIRING among the
reasons); UNAVAILABLE is retried with backoff, the ticket id chosen once, so a CreateTicket whose answer was lost
creates one ticket, and a call made while the service is not up yet succeeds once it is."""

from __future__ import annotations

import asyncio
import socket
import uuid

import grpc

from matchmaker_client import BackoffPolicy, MatchmakerError, QueueRetiringError, RetryEvent, RetryPolicy, backoff_delay
from support.http import active_tickets, admin_ticket, poll_until
from support.proxy import TcpProxy
from support.service import BASIC_QUEUE, Service


async def test_fails_at_once_typed_on_codes_other_than_unavailable(service: Service, make_client) -> None:
    retries: list[RetryEvent] = []
    api = make_client(service.grpc_address, retries)
    try:
        await api.create_ticket("py.nowhere")
        raise AssertionError("expected NOT_FOUND")
    except MatchmakerError as err:
        assert (err.code, err.grpc_code, err.status, err.attempts, err.method, err.retryable) == (
            "NOT_FOUND",
            5,
            grpc.StatusCode.NOT_FOUND,
            1,
            "CreateTicket",
            False,
        )
    try:
        await api.create_ticket("py.basic", ticket_id="not-a-uuid")
        raise AssertionError("expected INVALID_ARGUMENT")
    except MatchmakerError as err:
        assert (err.code, err.attempts, err.reason) == ("INVALID_ARGUMENT", 1, None)
        assert "ticket.id must be a UUID" in err.details
    assert retries == []


async def test_reports_a_retiring_queue_as_queue_retiring_error_not_retried(service: Service, make_client) -> None:
    retries: list[RetryEvent] = []
    api = make_client(service.grpc_address, retries)
    await api.create_ticket("py.retiring")
    (service.queue_dir / "py.retiring.yaml").unlink()

    async def attempt() -> MatchmakerError | None:
        try:
            await api.create_ticket("py.retiring")
        except MatchmakerError as err:
            return err
        return None

    refused = await poll_until(attempt, lambda e: e is not None, timeout=15)
    assert isinstance(refused, QueueRetiringError)
    assert (refused.code, refused.reason, refused.queue_id, refused.attempts) == (
        "FAILED_PRECONDITION",
        "QUEUE_RETIRING",
        "py.retiring",
        1,
    )
    assert retries == []


async def test_sends_a_create_ticket_whose_answer_was_lost_again_with_the_same_id(
    service: Service, make_client
) -> None:
    proxy = await TcpProxy(service.grpc_port).start()
    try:
        retries: list[RetryEvent] = []
        api = make_client(proxy.address, retries)
        await api.clear_queue_pool("py.basic")  # connects, and starts from an empty pool
        proxy.drop_responses()
        pending = asyncio.ensure_future(api.create_ticket("py.basic"))
        # The service has stored it; its answer is lost, then the connection drops.
        assert await poll_until(lambda: active_tickets(service.base_url, "py.basic"), lambda n: n == 1) == 1
        proxy.cut()
        ticket_id = (await pending).ticket_id
        assert [(r.method, r.error.code) for r in retries] == [("CreateTicket", "UNAVAILABLE")]
        assert (await admin_ticket(service.base_url, "py.basic", ticket_id))[0] == 200
        assert await active_tickets(service.base_url, "py.basic") == 1
    finally:
        await proxy.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_retries_unavailable_until_a_starting_service_answers(make_client) -> None:
    port = _free_port()
    retries: list[RetryEvent] = []
    api = make_client(
        f"127.0.0.1:{port}", retries, retry=RetryPolicy(max_attempts=2000, initial_delay=0.02, max_delay=0.1)
    )
    ticket_id = str(uuid.uuid4())
    pending = asyncio.ensure_future(api.create_ticket("py.basic", ticket_id=ticket_id))
    await poll_until(lambda: asyncio.sleep(0, len(retries)), lambda n: n >= 2)  # refused while nothing listens
    started = await asyncio.to_thread(Service, {"py.basic": BASIC_QUEUE}, env={"GRPC_PORT": str(port)})
    try:
        assert (await asyncio.wait_for(pending, 60)).ticket_id == ticket_id
        assert len(retries) >= 2
        assert {r.error.code for r in retries} == {"UNAVAILABLE"}
        assert [r.attempt for r in retries] == list(range(1, len(retries) + 1))
        assert await active_tickets(started.base_url, "py.basic") == 1
    finally:
        await asyncio.to_thread(started.close)


async def test_gives_up_after_max_attempts_with_the_last_error(make_client) -> None:
    retries: list[RetryEvent] = []
    api = make_client(
        f"127.0.0.1:{_free_port()}", retries, retry=RetryPolicy(max_attempts=3, initial_delay=0.01, max_delay=0.02)
    )
    try:
        await api.cancel_ticket("py.basic", str(uuid.uuid4()))
        raise AssertionError("expected UNAVAILABLE")
    except MatchmakerError as err:
        assert (err.code, err.attempts, err.retryable) == ("UNAVAILABLE", 3, True)
    assert [r.attempt for r in retries] == [1, 2]


async def test_applies_the_deadline_to_each_attempt(service: Service, make_client) -> None:
    proxy = await TcpProxy(service.grpc_port).start()
    try:
        api = make_client(proxy.address, timeout=0.3)
        await api.clear_queue_pool("py.basic")
        proxy.drop_responses()
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            await api.clear_queue_pool("py.basic")
            raise AssertionError("expected DEADLINE_EXCEEDED")
        except MatchmakerError as err:
            # ClearQueuePool answers NOT_FOUND for its own failures; a deadline is the transport's.
            assert (err.code, err.attempts) == ("DEADLINE_EXCEEDED", 1)
        assert 0.25 <= loop.time() - began < 2
    finally:
        await proxy.close()


def test_waits_with_exponential_backoff_and_full_jitter() -> None:
    policy = BackoffPolicy(initial_delay=0.1, max_delay=1.0)
    delays = [backoff_delay(n, policy, lambda: 0.999999) for n in range(1, 7)]
    assert [round(d, 3) for d in delays] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff_delay(3, policy, lambda: 0.0) == 0
