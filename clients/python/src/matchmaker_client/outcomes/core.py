"""The core beneath the outcome consumers (the WebSocket stream; a webhook receiver can use it too): it turns
received outcomes, each with its sink's acknowledgement, into deliveries of one shape. It

- drops duplicates by Outcome.id: ids of handled deliveries are remembered in a bounded LRU, and a copy that
  arrives while the first is still being handled joins it (acknowledged together) instead of being handed out;
- reassembles batched outcomes (the *.expired and *.removed kinds, split by OutcomeBatch) into one delivery once
  every chunk of the operation arrived;
- reports a gap in producer_sequence (N+2 after N: an outcome was missed) per producer_id.

The same rules as the TypeScript client's packages/client/src/outcomes/outcome-core.ts.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..gen.outcomes.v1.outcomes_pb2 import Outcome, OutcomeBatch

DEFAULT_DEDUPE_SIZE = 10_000
DEFAULT_MAX_PENDING_BATCHES = 1_000

SinkAck = Callable[[], Awaitable[None]]
"""The sink's acknowledgement of one received outcome; resolves once the sink confirmed it."""

_BATCHED_TICKETS = ("tickets_expired", "tickets_removed")
_BATCHED_BACKFILLS = ("backfill_requests_expired", "backfill_requests_removed")


@dataclass(frozen=True)
class SequenceGap:
    """producer_sequence jumped: ``missing`` outcomes of ``producer_id`` between ``after`` and ``next`` were not
    received."""

    producer_id: str
    after: int
    """The highest producer_sequence received before."""
    next: int
    """The producer_sequence that arrived."""
    missing: int
    queue_id: str
    """The queue of the outcome that showed the gap."""


def outcome_batch(outcome: Outcome) -> OutcomeBatch | None:
    """The batch of a batched kind's payload, if the outcome has one."""
    case = outcome.WhichOneof("payload")
    if case in _BATCHED_TICKETS or case in _BATCHED_BACKFILLS:
        payload = getattr(outcome, case)
        return payload.batch if payload.HasField("batch") else None
    return None


def batched_ids(outcome: Outcome) -> list[str]:
    """The ids a batched payload lists (tickets or backfill requests); empty for other kinds."""
    case = outcome.WhichOneof("payload")
    if case in _BATCHED_TICKETS:
        return list(getattr(outcome, case).ticket_ids)
    if case in _BATCHED_BACKFILLS:
        return list(getattr(outcome, case).backfill_request_ids)
    return []


def _merge(chunks: list[Outcome]) -> Outcome:
    """The chunks of one operation as one outcome: the first chunk's envelope with every chunk's ids, in order."""
    merged = Outcome()
    merged.CopyFrom(chunks[0])
    ids = [i for chunk in chunks for i in batched_ids(chunk)]
    case = merged.WhichOneof("payload")
    if case in _BATCHED_TICKETS:
        target = getattr(merged, case).ticket_ids
    elif case in _BATCHED_BACKFILLS:
        target = getattr(merged, case).backfill_request_ids
    else:
        return merged
    del target[:]
    target.extend(ids)
    return merged


@dataclass(eq=False)
class _Pending:
    """A delivery handed out and not yet acknowledged, or a batch still collecting chunks."""

    ids: list[str] = field(default_factory=list)
    acks: list[SinkAck] = field(default_factory=list)
    chunk_count: int = 1
    chunks: dict[int, Outcome] = field(default_factory=dict)


class OutcomeDelivery:
    """One outcome to handle, then acknowledge with ``await delivery.ack()``."""

    def __init__(self, core: OutcomeCore, chunks: list[Outcome], pending: _Pending, complete: bool) -> None:
        self.outcome: Outcome = chunks[0] if len(chunks) == 1 else _merge(chunks)
        """The outcome. For a batched kind split over several chunks, the whole operation: the first chunk with
        the id lists of every chunk, in chunk order."""
        self.chunks: tuple[Outcome, ...] = tuple(chunks)
        """What it was assembled from: the outcome alone, or each chunk of the operation in chunk order."""
        self.complete = complete
        """False only for an operation handed out before all its chunks arrived (see max_pending_batches)."""
        self._core = core
        self._pending = pending
        self._acked: asyncio.Future[None] | None = None

    def ack(self) -> asyncio.Future[None]:
        """Marks it handled: acknowledges every chunk to the sink (done once the sink confirmed) and remembers the
        ids, so a later copy is dropped. Call it after handling; calling it again returns the same future. When the
        sink cannot confirm, it fails, and the sink's redelivery is handed out again."""
        if self._acked is None:
            self._acked = asyncio.ensure_future(self._ack())
        return self._acked

    async def _ack(self) -> None:
        pending = self._pending
        try:
            # Acks joined by copies that arrived meanwhile are in the list too.
            await asyncio.gather(*(ack() for ack in list(pending.acks)))
        except BaseException:
            # The sink did not confirm: it will deliver these again, and then they are handed out again (a
            # redelivery joining this delivery would wait for an ack that may never be retried).
            self._acked = None
            for i in pending.ids:
                if self._core._in_flight.get(i) is pending:
                    del self._core._in_flight[i]
            raise
        for i in pending.ids:
            self._core._in_flight.pop(i, None)
            self._core._remember(i)


class OutcomeCore:
    """Dedupe, batch reassembly and gap detection over the outcomes of one sink, in the order it delivers them.

    ``detect_gaps`` is only meaningful when the consumer receives every outcome of a producer: a consumer of some
    queues sees the other queues' numbers as gaps. Each consumer picks its default."""

    def __init__(
        self,
        *,
        dedupe_size: int = DEFAULT_DEDUPE_SIZE,
        detect_gaps: bool = False,
        on_gap: Callable[[SequenceGap], None] | None = None,
        max_pending_batches: int = DEFAULT_MAX_PENDING_BATCHES,
    ) -> None:
        self.detect_gaps = detect_gaps
        self._on_gap = on_gap
        self._dedupe_size = max(1, dedupe_size)
        self._max_pending_batches = max(1, max_pending_batches)
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._in_flight: dict[str, _Pending] = {}
        self._batches: OrderedDict[str, _Pending] = OrderedDict()
        self._last_sequence: dict[str, int] = {}
        self._background: set[asyncio.Future[None]] = set()
        self.duplicates = 0
        """Copies dropped so far (already handled, or joined to one being handled)."""
        self.gaps = 0
        """Gaps reported so far."""

    def receive(self, outcome: Outcome, ack: SinkAck) -> list[OutcomeDelivery]:
        """Takes one received outcome with the sink's acknowledgement of it. Returns what is ready to hand out:
        nothing for a duplicate or a chunk of an incomplete batch, usually one delivery, two when a batch had to be
        given up."""
        if outcome.id in self._seen:
            self.duplicates += 1
            self._remember(outcome.id)
            self._acknowledge_again(ack)  # handled before: only the sink needs to hear it again
            return []
        pending = self._in_flight.get(outcome.id)
        if pending is not None:
            self.duplicates += 1
            pending.acks.append(ack)
            return []
        self._check_sequence(outcome)
        batch = outcome_batch(outcome)
        if batch is None or batch.chunk_count <= 1:
            single = _Pending(ids=[outcome.id], acks=[ack])
            return [self._deliver([outcome], single, True)]
        return self._add_chunk(outcome, batch, ack)

    def _acknowledge_again(self, ack: SinkAck) -> None:
        task = asyncio.ensure_future(ack())
        self._background.add(task)
        task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Future[None]) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a sink that did not confirm will deliver it again

    def _check_sequence(self, outcome: Outcome) -> None:
        if not self.detect_gaps:
            return
        last = self._last_sequence.get(outcome.producer_id)
        sequence = outcome.producer_sequence
        if last is not None and sequence > last + 1:
            self.gaps += 1
            if self._on_gap is not None:
                self._on_gap(SequenceGap(outcome.producer_id, last, sequence, sequence - last - 1, outcome.queue_id))
        if last is None or sequence > last:
            self._last_sequence[outcome.producer_id] = sequence

    def _add_chunk(self, outcome: Outcome, batch: OutcomeBatch, ack: SinkAck) -> list[OutcomeDelivery]:
        ready: list[OutcomeDelivery] = []
        pending = self._batches.get(batch.operation_id)
        if pending is None:
            if len(self._batches) >= self._max_pending_batches:
                _, oldest = self._batches.popitem(last=False)
                ready.append(self._deliver_batch(oldest, False))
            pending = _Pending(chunk_count=batch.chunk_count)
            self._batches[batch.operation_id] = pending
        pending.chunks[batch.chunk_index] = outcome
        pending.ids.append(outcome.id)
        pending.acks.append(ack)
        self._in_flight[outcome.id] = pending
        if len(pending.chunks) >= pending.chunk_count:
            del self._batches[batch.operation_id]
            ready.append(self._deliver_batch(pending, True))
        return ready

    def _deliver_batch(self, pending: _Pending, complete: bool) -> OutcomeDelivery:
        chunks = [pending.chunks[i] for i in sorted(pending.chunks)]
        return self._deliver(chunks, pending, complete)

    def _deliver(self, chunks: list[Outcome], pending: _Pending, complete: bool) -> OutcomeDelivery:
        for i in pending.ids:
            self._in_flight[i] = pending
        return OutcomeDelivery(self, chunks, pending, complete)

    def _remember(self, outcome_id: str) -> None:
        self._seen.pop(outcome_id, None)
        self._seen[outcome_id] = None
        if len(self._seen) > self._dedupe_size:
            self._seen.popitem(last=False)
