"""The consumer shape: an async iterator of deliveries (``async for delivery in consumer``: handle
``delivery.outcome``, then ``await delivery.ack()``), or ``await consumer.run(handler)``, which handles them one
at a time and acknowledges each after its handler returned. A sink pushes what it receives through the
OutcomeCore into a bounded buffer; the iterator takes from it."""

from __future__ import annotations

import abc
import asyncio
import inspect
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from ..gen.outcomes.v1.outcomes_pb2 import Outcome
from .core import OutcomeCore, OutcomeDelivery, SinkAck

DEFAULT_HIGH_WATER_MARK = 1_000

OutcomeHandler = Callable[[Outcome, OutcomeDelivery], Awaitable[None] | None]


class QueuedConsumer(abc.ABC):
    """The shared part of the consumers: the core, the buffer, the iterator and ``run``."""

    def __init__(self, core: OutcomeCore, high_water_mark: int = DEFAULT_HIGH_WATER_MARK) -> None:
        self.core = core
        self._high_water_mark = max(1, high_water_mark)
        self._buffer: deque[OutcomeDelivery] = deque()
        self._available = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._failure: BaseException | None = None
        self._ended = False

    @property
    def duplicates(self) -> int:
        """Copies dropped by dedupe so far."""
        return self.core.duplicates

    @property
    def gaps(self) -> int:
        """Gaps in producer_sequence reported so far."""
        return self.core.gaps

    @property
    def buffered(self) -> int:
        """Deliveries received and not yet taken by the iterator."""
        return len(self._buffer)

    def _receive(self, outcome: Outcome, ack: SinkAck) -> None:
        """Feeds one received outcome with its sink acknowledgement through the core into the buffer."""
        for delivery in self.core.receive(outcome, ack):
            self._buffer.append(delivery)
            self._available.set()
        if self._full:
            self._space.clear()

    @property
    def _full(self) -> bool:
        return len(self._buffer) >= self._high_water_mark

    async def _until_space(self) -> None:
        """Returns once the buffer is below the high-water mark (or the consumer ended): the sink stops reading
        meanwhile, so a slow handler costs bounded memory."""
        while self._full and not self._ended:
            await self._space.wait()

    @abc.abstractmethod
    def _report_error(self, err: BaseException) -> None:
        """A problem that does not end the consumer (the sink's on_error)."""

    def _finish(self, error: BaseException | None = None) -> None:
        """Ends the iteration: after the buffered deliveries, with ``error`` if given."""
        if self._ended:
            return
        self._ended = True
        self._failure = error
        self._available.set()
        self._space.set()

    async def next(self) -> OutcomeDelivery | None:
        """The next delivery; None once the consumer is closed and its buffer empty. Raises the sink's failure."""
        while True:
            if self._buffer:
                delivery = self._buffer.popleft()
                if not self._full:
                    self._space.set()
                return delivery
            if self._ended:
                if self._failure is not None:
                    raise self._failure
                return None
            self._available.clear()
            await self._available.wait()

    def __aiter__(self) -> AsyncIterator[OutcomeDelivery]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[OutcomeDelivery]:
        while (delivery := await self.next()) is not None:
            yield delivery

    async def run(self, handler: OutcomeHandler) -> None:
        """Handles every delivery with ``handler`` (a function or a coroutine function), one at a time in arrival
        order, acknowledging each once the handler returned. Returns when the consumer is closed; raises (and
        closes the consumer) when the handler or the sink fails: the delivery whose handler failed is not
        acknowledged, so the sink delivers it again later. An acknowledgement the sink could not confirm goes to
        the consumer's on_error, and the consumer goes on."""
        try:
            while (delivery := await self.next()) is not None:
                result = handler(delivery.outcome, delivery)
                if inspect.isawaitable(result):
                    await result
                # An acknowledgement the sink did not confirm is not the handler's failure: the sink delivers the
                # outcome again and it is handled again (at least once); the consumer goes on.
                try:
                    await delivery.ack()
                except Exception as err:
                    self._report_error(err)
        except BaseException:
            await self.close()
            raise

    @abc.abstractmethod
    async def close(self) -> None:
        """Stops receiving; deliveries not yet acknowledged are delivered again by the sink."""
