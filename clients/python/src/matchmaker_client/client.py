"""MatchmakerClient: the six operations of matchmaker.core.v1.MatchmakerService over gRPC (grpc.aio), and the two
of matchmaker.admin.v1.MatchmakerAdminService (explain a ticket, a queue's statistics) on the same channel, as
coroutines returning the generated response messages.

Each attempt has a deadline; UNAVAILABLE, and only UNAVAILABLE (the Errors table of docs/api-reference.md), is
retried with exponential backoff and full jitter. The ids that make a retry idempotent (the ticket's, the backfill
request's) are chosen once, before the first attempt, so a CreateTicket whose answer was lost creates one ticket.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from .backoff import BackoffPolicy, backoff_delay
from .engine import EngineInputLike, encode_engine_input, encode_metadata
from .errors import MatchmakerError, call_error
from .gen.admin.v1 import admin_pb2
from .gen.core.v1 import resources_pb2, service_pb2

DEFAULT_TIMEOUT = 10.0
"""The default deadline of one attempt, in seconds: CreateTicket answers in milliseconds once the ticket is durable."""

_CORE = "matchmaker.core.v1.MatchmakerService"
_ADMIN = "matchmaker.admin.v1.MatchmakerAdminService"

# gRPC core waits 1 s, growing to 120 s, before reconnecting a lost channel, and calls fail at once meanwhile:
# longer than the retry budget, so a service back after a restart would go unnoticed. Reconnect sooner.
DEFAULT_CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
)


@dataclass(frozen=True)
class RetryPolicy(BackoffPolicy):
    """Retries of UNAVAILABLE: waits below ``initial_delay`` doubling to ``max_delay`` (seconds), full jitter."""

    max_attempts: int = 6
    """Attempts in all, the first included; 1 turns retries off."""


DEFAULT_RETRY = RetryPolicy()


@dataclass(frozen=True)
class RetryEvent:
    """Told before each retry: what failed and how long the client waits."""

    method: str
    attempt: int
    """The attempt that failed, from 1."""
    delay: float
    """Seconds until the next attempt."""
    error: MatchmakerError


Metadata = Sequence[tuple[str, str]]
R = TypeVar("R", bound=Message)


class MatchmakerClient:
    """A client of one service address. Use it from one event loop; ``async with`` closes the channel.

    ``address`` is ``host:port`` of the gRPC port (self-hosted default 9001). ``credentials``: plaintext when
    omitted, ``grpc.ssl_channel_credentials()`` for TLS. ``access_token`` is sent as ``authorization: Bearer
    <token>`` on every call (a token with the ``tickets`` scope; ``admin`` for the two admin calls).
    """

    def __init__(
        self,
        address: str,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        access_token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        on_retry: Callable[[RetryEvent], None] | None = None,
        channel_options: Iterable[tuple[str, Any]] = (),
    ) -> None:
        self.address = address
        self._credentials = credentials
        self._auth: tuple[tuple[str, str], ...] = (
            () if access_token is None else (("authorization", f"Bearer {access_token}"),)
        )
        self._timeout = timeout
        self._retry = retry
        self._on_retry = on_retry
        self._options = tuple({**dict(DEFAULT_CHANNEL_OPTIONS), **dict(channel_options)}.items())
        self._channel: grpc.aio.Channel | None = None

    async def __aenter__(self) -> MatchmakerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def create_ticket(
        self,
        queue_id: str,
        *,
        ticket_id: str | None = None,
        engine_input: EngineInputLike | None = None,
        ruleset_ids: Iterable[str] = (),
        metadata: str | bytes | None = None,
        timeout: float | None = None,
        call_metadata: Metadata = (),
    ) -> service_pb2.CreateTicketResponse:
        """Submits a ticket; returns once it is durable (not when it is matched: the match comes as an outcome).
        ``ticket_id`` is chosen here (a UUID) when omitted. ``metadata`` comes back verbatim on every outcome that
        carries the ticket (a string is sent as UTF-8). ``ruleset_ids`` empty: every ruleset of the queue."""
        ticket = resources_pb2.Ticket(
            id=ticket_id if ticket_id is not None else str(uuid.uuid4()),
            queue_id=queue_id,
            ruleset_ids=list(ruleset_ids),
        )
        if engine_input is not None:
            ticket.engine_input = encode_engine_input(engine_input)
        if metadata is not None:
            ticket.metadata = encode_metadata(metadata)
        request = service_pb2.CreateTicketRequest(ticket=ticket)
        return await self._call(
            _CORE, "CreateTicket", request, service_pb2.CreateTicketResponse, queue_id, timeout, call_metadata
        )

    async def cancel_ticket(
        self, queue_id: str, ticket_id: str, *, timeout: float | None = None, call_metadata: Metadata = ()
    ) -> service_pb2.CancelTicketResponse:
        """Removes a ticket from matchmaking. FAILED_PRECONDITION when it is already in a committed match."""
        request = service_pb2.CancelTicketRequest(queue_id=queue_id, ticket_id=ticket_id)
        return await self._call(
            _CORE, "CancelTicket", request, service_pb2.CancelTicketResponse, queue_id, timeout, call_metadata
        )

    async def reactivate_tickets(
        self, queue_id: str, ticket_ids: Iterable[str], *, timeout: float | None = None, call_metadata: Metadata = ()
    ) -> service_pb2.ReactivateTicketsResponse:
        """Returns resolved tickets to the pool (a match that cannot be honoured); the rest come back in
        ``failed_ticket_ids``."""
        request = service_pb2.ReactivateTicketsRequest(queue_id=queue_id, ticket_ids=list(ticket_ids))
        return await self._call(
            _CORE, "ReactivateTickets", request, service_pb2.ReactivateTicketsResponse, queue_id, timeout, call_metadata
        )

    async def create_backfill_request(
        self,
        queue_id: str,
        match_id: str,
        *,
        backfill_id: str | None = None,
        ruleset_id: str = "",
        slots_requested: int = 0,
        engine_input: EngineInputLike | None = None,
        metadata: str | bytes | None = None,
        timeout: float | None = None,
        call_metadata: Metadata = (),
    ) -> service_pb2.CreateBackfillRequestResponse:
        """Asks for players for a running match (``match_id``); replaces an earlier request for the same match.
        ``ruleset_id`` is required when the queue has several rulesets; ``slots_requested`` 0 counts as 1;
        ``engine_input`` describes the players already in the match."""
        backfill = resources_pb2.BackfillRequest(
            id=backfill_id if backfill_id is not None else str(uuid.uuid4()),
            queue_id=queue_id,
            match_id=match_id,
            ruleset_id=ruleset_id,
            slots_requested=slots_requested,
        )
        if engine_input is not None:
            backfill.engine_input = encode_engine_input(engine_input)
        if metadata is not None:
            backfill.metadata = encode_metadata(metadata)
        request = service_pb2.CreateBackfillRequestRequest(backfill_request=backfill)
        return await self._call(
            _CORE,
            "CreateBackfillRequest",
            request,
            service_pb2.CreateBackfillRequestResponse,
            queue_id,
            timeout,
            call_metadata,
        )

    async def cancel_backfill_requests(
        self, queue_id: str, backfill_ids: Iterable[str], *, timeout: float | None = None, call_metadata: Metadata = ()
    ) -> service_pb2.CancelBackfillRequestsResponse:
        """Removes backfill requests; ids that were not active come back in ``failed_backfill_ids``."""
        request = service_pb2.CancelBackfillRequestsRequest(queue_id=queue_id, backfill_ids=list(backfill_ids))
        return await self._call(
            _CORE,
            "CancelBackfillRequests",
            request,
            service_pb2.CancelBackfillRequestsResponse,
            queue_id,
            timeout,
            call_metadata,
        )

    async def clear_queue_pool(
        self, queue_id: str, *, timeout: float | None = None, call_metadata: Metadata = ()
    ) -> service_pb2.ClearQueuePoolResponse:
        """Empties the queue (end-to-end test setup and teardown); every failure is NOT_FOUND."""
        request = service_pb2.ClearQueuePoolRequest(queue_id=queue_id)
        return await self._call(
            _CORE, "ClearQueuePool", request, service_pb2.ClearQueuePoolResponse, queue_id, timeout, call_metadata
        )

    async def explain_ticket(
        self, queue_id: str, ticket_id: str, *, timeout: float | None = None, call_metadata: Metadata = ()
    ) -> admin_pb2.ExplainTicketResponse:
        """Why a ticket waits (the admin service's ExplainTicket; docs/explain-and-statistics.md). NOT_FOUND for an
        unknown queue or ticket."""
        request = admin_pb2.ExplainTicketRequest(queue_id=queue_id, ticket_id=ticket_id)
        return await self._call(
            _ADMIN, "ExplainTicket", request, admin_pb2.ExplainTicketResponse, queue_id, timeout, call_metadata
        )

    async def get_queue_statistics(
        self, queue_id: str, *, timeout: float | None = None, call_metadata: Metadata = ()
    ) -> admin_pb2.GetQueueStatisticsResponse:
        """A queue's statistics (the admin service's GetQueueStatistics). NOT_FOUND for an unknown queue."""
        request = admin_pb2.GetQueueStatisticsRequest(queue_id=queue_id)
        return await self._call(
            _ADMIN,
            "GetQueueStatistics",
            request,
            admin_pb2.GetQueueStatisticsResponse,
            queue_id,
            timeout,
            call_metadata,
        )

    async def close(self) -> None:
        """Closes the channel; calls in flight fail with CANCELLED."""
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    def _open(self) -> grpc.aio.Channel:
        # Opened on first use, inside the caller's event loop (grpc.aio binds a channel to the loop it runs in).
        if self._channel is None:
            if self._credentials is None:
                self._channel = grpc.aio.insecure_channel(self.address, options=self._options)
            else:
                self._channel = grpc.aio.secure_channel(self.address, self._credentials, options=self._options)
        return self._channel

    async def _call(
        self,
        service: str,
        method: str,
        request: Message,
        response_type: type[R],
        queue_id: str,
        timeout: float | None,
        call_metadata: Metadata,
    ) -> R:
        rpc = self._open().unary_unary(
            f"/{service}/{method}",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        metadata = (*self._auth, *call_metadata)
        attempt = 1
        while True:
            try:
                response: R = await rpc(
                    request, timeout=timeout if timeout is not None else self._timeout, metadata=metadata
                )
                return response
            except grpc.aio.AioRpcError as err:
                error = call_error(err, method, queue_id, attempt)
                if not error.retryable or attempt >= self._retry.max_attempts:
                    raise error from err
                delay = backoff_delay(attempt, self._retry)
                if self._on_retry is not None:
                    self._on_retry(RetryEvent(method=method, attempt=attempt, delay=delay, error=error))
                await asyncio.sleep(delay)  # a cancelled caller stops here, with asyncio.CancelledError
                attempt += 1
