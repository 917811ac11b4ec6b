"""Outcomes from the service's WebSocket stream (``GET /v1/outcomes/stream`` on the HTTP port;
docs/outcomes-websocket.md). Frames are JSON: ``ready``, ``outcome`` (the canonical protobuf JSON of an Outcome
under its offset, the producer_sequence), ``acked``, ``heartbeat``, ``error``; the client sends
``{"type": "ack", "offset": ...}``, an ack covering every earlier outcome of the stream.

The consumer acknowledges the highest offset below which every delivery is handled, reconnects with backoff after
any loss of the connection (or none heard for ``idle_timeout``) and resumes right after the last offset it
received, so nothing recorded meanwhile is skipped, named consumer or not. The same behaviour as the TypeScript
client's packages/client/src/outcomes/websocket-consumer.ts.
"""

from __future__ import annotations

import asyncio
import json
import ssl as _ssl
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from google.protobuf import json_format
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from ..backoff import BackoffPolicy, backoff_delay
from ..gen.outcomes.v1.outcomes_pb2 import Outcome
from .consumer import DEFAULT_HIGH_WATER_MARK, QueuedConsumer
from .core import DEFAULT_DEDUPE_SIZE, DEFAULT_MAX_PENDING_BATCHES, OutcomeCore, OutcomeDelivery, SequenceGap

DEFAULT_RECONNECT = BackoffPolicy(initial_delay=0.25, max_delay=10.0)
DEFAULT_IDLE_TIMEOUT = 45.0
"""Seconds without a frame before the connection counts as dead: three of the service's heartbeat intervals."""

# Refusals of the upgrade that a reconnection cannot fix (the request itself is wrong).
_FATAL_STATUS = frozenset({400, 404})
# A match.created carries the whole match; the TypeScript client's ws library allows 100 MiB as well.
_MAX_FRAME_BYTES = 100 * 1024 * 1024


class OutcomeStreamError(Exception):
    """A problem of the outcome stream: a refused upgrade (``status`` is its HTTP status), a refused frame, a lost
    connection. Given to ``on_error``; a refusal with status 400 or 404 ends the consumer with it."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ConsumerClosedError(Exception):
    """The consumer was closed before it was ready."""


class WebSocketOutcomeConsumer(QueuedConsumer):
    """A consumer of the WebSocket outcome stream. Start it with ``async with``, ``start()``, ``ready()``, ``run()``
    or by iterating; it reconnects on its own until ``close()``.

    - ``url``: the service's HTTP address, e.g. ``http://127.0.0.1:8080`` (``ws://`` and ``wss://`` work too).
    - ``queue_id``: one queue id, a namespace ``eu.>``, or None for every queue with the websocket sink.
    - ``consumer``: a durable consumer name: its position is the last acknowledged offset, kept by the service.
    - ``from_offset``: where the first connection starts (inclusive). None: a named consumer's stored position,
      else the newest outcome. Reconnections always resume after the last offset received.
    - ``access_token``: sent as ``Authorization: Bearer <token>`` (a token with the ``outcomes`` scope).
    - ``detect_gaps``: report gaps in producer_sequence to ``on_gap``. Default: on for a stream of every queue
      (it sees every number of the producer) and when the service says its offsets are per queue (the
      replicated mode), off otherwise (a filtered stream skips the other queues' numbers).
    - ``ssl``: an ``ssl.SSLContext`` for ``wss://`` (a private CA, a client certificate).
    - ``connect_options``: more keyword arguments of ``websockets.asyncio.client.connect``.
    """

    def __init__(
        self,
        url: str,
        *,
        queue_id: str | None = None,
        consumer: str | None = None,
        from_offset: int | None = None,
        access_token: str | None = None,
        reconnect: BackoffPolicy = DEFAULT_RECONNECT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        on_error: Callable[[Exception], None] | None = None,
        detect_gaps: bool | None = None,
        on_gap: Callable[[SequenceGap], None] | None = None,
        dedupe_size: int = DEFAULT_DEDUPE_SIZE,
        max_pending_batches: int = DEFAULT_MAX_PENDING_BATCHES,
        high_water_mark: int = DEFAULT_HIGH_WATER_MARK,
        ssl: _ssl.SSLContext | None = None,
        connect_options: Mapping[str, Any] | None = None,
    ) -> None:
        core = OutcomeCore(
            dedupe_size=dedupe_size,
            detect_gaps=detect_gaps if detect_gaps is not None else queue_id is None,
            on_gap=on_gap,
            max_pending_batches=max_pending_batches,
        )
        super().__init__(core, high_water_mark)
        self._url = url
        self._queue_id = queue_id
        self._consumer = consumer
        self._access_token = access_token
        self._reconnect = reconnect
        self._idle_timeout = idle_timeout
        self._on_error = on_error
        self._detect_gaps_chosen = detect_gaps is not None
        self._ssl = ssl
        self._connect_options = dict(connect_options or {})
        # The last offset this stream has passed (ready.after or the last outcome received).
        self._position: int | None = None if from_offset is None else from_offset - 1
        # Offsets handed to the core and not yet acknowledged by the caller, in order.
        self._outstanding: deque[int] = deque()
        self._handled: set[int] = set()
        # Highest offset every delivery up to which is handled, and the highest the service confirmed.
        self._watermark = -1
        self._confirmed = -1
        self._confirm_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._ready_waiters: list[asyncio.Future[None]] = []
        self._is_ready = False
        self._attempts = 0
        self._ws: ClientConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def __aenter__(self) -> WebSocketOutcomeConsumer:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start(self) -> None:
        """Starts connecting (in the running event loop); does nothing when started or closed."""
        if self._task is None and not self._closing:
            self._task = asyncio.get_running_loop().create_task(self._connect_loop())

    async def ready(self) -> None:
        """Returns once a connection is open and the service sent ``ready``; raises if the consumer ends first."""
        self.start()
        if self._is_ready:
            return
        if self._closing:
            raise self._failure or ConsumerClosedError("the outcome stream consumer is closed")
        waiter = asyncio.get_running_loop().create_future()
        self._ready_waiters.append(waiter)
        await waiter

    async def next(self) -> OutcomeDelivery | None:
        self.start()
        return await super().next()

    @property
    def position(self) -> int | None:
        """The last offset this stream has passed: the ``after`` of the service's ``ready``, or the last outcome
        received. A reconnection resumes right after it."""
        return self._position

    def stream_url(self) -> str:
        """The stream URL of the next connection."""
        parts = urlsplit(self._url)
        scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
        query: dict[str, str] = {}
        if self._queue_id is not None:
            query["queue_id"] = self._queue_id
        if self._consumer is not None:
            query["consumer"] = self._consumer
        # Resume right after what was received; the first connection of a named consumer without from_offset
        # starts at its stored position.
        if self._position is not None:
            query["from_offset"] = str(max(0, self._position + 1))
        return urlunsplit((scheme, parts.netloc, "/v1/outcomes/stream", urlencode(query), ""))

    def _report(self, err: Exception) -> None:
        if self._on_error is not None:
            self._on_error(err)

    def _report_error(self, err: BaseException) -> None:
        self._report(err if isinstance(err, Exception) else OutcomeStreamError(repr(err)))

    async def _connect_loop(self) -> None:
        headers = {} if self._access_token is None else {"Authorization": f"Bearer {self._access_token}"}
        options: dict[str, Any] = {
            "ping_interval": None,
            "max_size": _MAX_FRAME_BYTES,
            "close_timeout": 2,
            **self._connect_options,
        }
        if self._ssl is not None:
            options["ssl"] = self._ssl
        while not self._closing:
            try:
                async with connect(self.stream_url(), additional_headers=headers, **options) as ws:
                    self._ws = ws
                    await self._read(ws)
            except InvalidStatus as refused:
                status = refused.response.status_code
                body = bytes(refused.response.body or b"").decode("utf-8", "replace")
                err = OutcomeStreamError(f"outcome stream refused the connection: HTTP {status} {body}".strip(), status)
                if status in _FATAL_STATUS:
                    self._fail(err)
                    return
                self._report(err)
            except ConnectionClosed as closed:
                if not self._closing:
                    code = closed.rcvd.code if closed.rcvd is not None else 1006
                    self._report(OutcomeStreamError(f"outcome stream closed ({code}); reconnecting"))
            except (OSError, InvalidHandshake, asyncio.TimeoutError) as failed:
                if not self._closing:
                    self._report(OutcomeStreamError(f"outcome stream connection failed: {failed!r}"))
            finally:
                self._ws = None
                self._is_ready = False
            if self._closing:
                return
            self._attempts += 1
            await asyncio.sleep(backoff_delay(self._attempts, self._reconnect))

    async def _read(self, ws: ClientConnection) -> None:
        while not self._closing:
            # A full buffer stops the reading (the service then holds the stream back), not the idle watchdog.
            await self._until_space()
            if self._closing:
                return
            try:
                data = await asyncio.wait_for(ws.recv(), self._idle_timeout)
            except asyncio.TimeoutError:
                self._report(OutcomeStreamError(f"outcome stream silent for {self._idle_timeout} s; reconnecting"))
                ws.transport.abort()  # a dead peer would not answer a close handshake
                return
            if isinstance(data, bytes):
                continue
            try:
                frame = json.loads(data)
            except ValueError:
                self._report(OutcomeStreamError("outcome stream sent a frame that is not JSON"))
                continue
            if isinstance(frame, dict):
                await self._on_frame(frame)

    async def _on_frame(self, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "ready":
            # Offsets numbered per queue (the replicated mode): a stream of one queue sees every number of its
            # producer, so a jump is a gap, unless the caller chose otherwise.
            if not self._detect_gaps_chosen and frame.get("offsets") == "queue":
                self.core.detect_gaps = True
            after = int(frame["after"])
            if self._position is None or after > self._position:
                self._position = after
            self._attempts = 0
            self._is_ready = True
            for waiter in self._ready_waiters:
                if not waiter.done():
                    waiter.set_result(None)
            self._ready_waiters.clear()
            # Acknowledgements not confirmed before the connection was lost go again.
            if self._watermark > self._confirmed:
                await self._send_ack()
        elif kind == "outcome":
            offset = int(frame["offset"])
            if self._position is not None and offset <= self._position:
                return  # already received
            self._position = offset
            outcome = json_format.ParseDict(frame["outcome"], Outcome(), ignore_unknown_fields=True)
            self._outstanding.append(offset)
            self._receive(outcome, lambda: self._handle(offset))
        elif kind == "acked":
            offset = int(frame["offset"])
            self._confirmed = max(self._confirmed, offset)
            still: list[tuple[int, asyncio.Future[None]]] = []
            for waiting, future in self._confirm_waiters:
                if waiting <= self._confirmed:
                    if not future.done():
                        future.set_result(None)
                else:
                    still.append((waiting, future))
            self._confirm_waiters = still
        elif kind == "error":
            self._report(
                OutcomeStreamError(f"outcome stream refused a frame: {frame.get('code')}: {frame.get('message')}")
            )
        # heartbeat, or a frame type added later: nothing to do

    async def _handle(self, offset: int) -> None:
        """The caller handled the delivery at ``offset``: advance the watermark and acknowledge it to the service."""
        self._handled.add(offset)
        while self._outstanding and self._outstanding[0] in self._handled:
            done = self._outstanding.popleft()
            self._handled.discard(done)
            self._watermark = done
        if offset <= self._confirmed:
            return
        if self._closing:
            # Sent if the socket is still open, but not waited for: a named consumer resumes from its last
            # confirmed position, and dedupe or the handler's idempotence covers the rest.
            if self._watermark >= offset:
                await self._send_ack()
            return
        confirmed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._confirm_waiters.append((offset, confirmed))
        if self._watermark >= offset:
            await self._send_ack()
        await confirmed

    async def _send_ack(self) -> None:
        ws = self._ws
        if not self._is_ready or ws is None:
            return  # sent again once the next connection is ready
        try:
            await ws.send(json.dumps({"type": "ack", "offset": str(self._watermark)}))
        except ConnectionClosed:
            pass  # likewise

    def _fail(self, err: Exception) -> None:
        self._closing = True
        for waiter in self._ready_waiters:
            if not waiter.done():
                waiter.set_exception(err)
        self._ready_waiters.clear()
        self._finish(err)

    async def close(self) -> None:
        """Stops the stream. Acknowledgements sent and not yet confirmed get up to 2 s to be confirmed first; the
        acks still waiting then return anyway (a named consumer resumes from its last confirmed position, and
        dedupe drops what was handled twice)."""
        if self._closing and self._task is None:
            return
        self._closing = True
        for waiter in self._ready_waiters:
            if not waiter.done():
                waiter.set_exception(ConsumerClosedError("the outcome stream consumer was closed before it was ready"))
        self._ready_waiters.clear()
        self._finish()
        waiting = [future for _, future in self._confirm_waiters if not future.done()]
        if waiting and self._is_ready:
            await asyncio.wait(waiting, timeout=2.0)
        for _, future in self._confirm_waiters:
            if not future.done():
                future.set_result(None)
        self._confirm_waiters.clear()
        ws, task, self._task = self._ws, self._task, None
        if ws is not None:
            await ws.close(1000)
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass


def websocket_consumer(url: str, **options: Any) -> WebSocketOutcomeConsumer:
    """Opens a consumer of the WebSocket outcome stream (inside a running event loop): it connects at once and
    reconnects on its own. The keyword arguments are WebSocketOutcomeConsumer's."""
    consumer = WebSocketOutcomeConsumer(url, **options)
    consumer.start()
    return consumer
