"""Fixtures: the real service (one per test module that asks for it), started from the repository's build."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from matchmaker_client import MatchmakerClient, RetryEvent, RetryPolicy
from support.service import BASIC_QUEUE, Service, duel_queue

# Short waits: a test that retries should not take the default policy's seconds.
FAST_RETRY = RetryPolicy(max_attempts=40, initial_delay=0.02, max_delay=0.25)


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    started = Service(
        {
            "py.basic": BASIC_QUEUE,
            "py.duel": duel_queue(50),
            "py.retiring": BASIC_QUEUE,
            # Never ticks; ClearQueuePool turns its tickets into ticket.removed outcomes, two ids a chunk.
            "py.lobby": duel_queue(3_600_000, outcomes={"batch_chunk_size": 2}),
        }
    )
    try:
        yield started
    finally:
        started.close()


ClientFactory = Callable[..., MatchmakerClient]


@pytest.fixture
async def make_client() -> AsyncIterator[ClientFactory]:
    """Makes clients (closed after the test); ``retries`` collects their RetryEvents."""
    made: list[MatchmakerClient] = []

    def make(address: str, retries: list[RetryEvent] | None = None, **options: object) -> MatchmakerClient:
        options.setdefault("retry", FAST_RETRY)
        client = MatchmakerClient(address, on_retry=retries.append if retries is not None else None, **options)  # type: ignore[arg-type]
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
