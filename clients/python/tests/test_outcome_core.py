"""The OutcomeCore fed directly (as test/client/client-outcome-core.test.ts): dedupe by Outcome.id, a copy joining the
delivery in flight, batch reassembly in chunk order, an incomplete batch given up, gap detection per producer, and a
sink that cannot confirm an ack."""

from __future__ import annotations

import asyncio

import pytest

from matchmaker_client import Outcome, OutcomeCore, SequenceGap


def removal(
    outcome_id: str, ids: list[str], *, operation: str = "", index: int = 0, count: int = 0, seq: int = 1
) -> Outcome:
    outcome = Outcome(id=outcome_id, kind="ticket.removed", queue_id="q", producer_id="p", producer_sequence=seq)
    outcome.tickets_removed.ticket_ids.extend(ids)
    if count:
        outcome.tickets_removed.batch.operation_id = operation
        outcome.tickets_removed.batch.chunk_index = index
        outcome.tickets_removed.batch.chunk_count = count
    return outcome


class Sink:
    """Counts the acknowledgements each outcome got; ``fail`` makes them raise."""

    def __init__(self) -> None:
        self.acks: list[str] = []
        self.fail = False

    def ack(self, outcome_id: str):
        async def acknowledge() -> None:
            if self.fail:
                raise ConnectionError("sink unreachable")
            self.acks.append(outcome_id)

        return acknowledge


async def test_drops_a_copy_of_a_handled_outcome_but_acknowledges_it_to_the_sink() -> None:
    core, sink = OutcomeCore(), Sink()
    [delivery] = core.receive(removal("a", ["t1"]), sink.ack("a"))
    await delivery.ack()
    assert core.receive(removal("a", ["t1"]), sink.ack("a")) == []
    await asyncio.sleep(0)
    assert (core.duplicates, sink.acks) == (1, ["a", "a"])


async def test_a_copy_arriving_while_the_first_is_handled_joins_it() -> None:
    core, sink = OutcomeCore(), Sink()
    [delivery] = core.receive(removal("a", ["t1"]), sink.ack("a"))
    assert core.receive(removal("a", ["t1"]), sink.ack("a")) == []
    assert sink.acks == []
    await delivery.ack()
    assert (core.duplicates, sink.acks) == (1, ["a", "a"])
    assert delivery.ack() is delivery.ack()  # the same future, done


async def test_forgets_the_oldest_ids_beyond_dedupe_size() -> None:
    core, sink = OutcomeCore(dedupe_size=2), Sink()
    for outcome_id in ("a", "b", "c"):
        [d] = core.receive(removal(outcome_id, []), sink.ack(outcome_id))
        await d.ack()
    assert len(core.receive(removal("a", []), sink.ack("a"))) == 1  # forgotten: handed out again
    assert core.receive(removal("c", []), sink.ack("c")) == []


async def test_reassembles_the_chunks_of_an_operation_in_chunk_order() -> None:
    core, sink = OutcomeCore(), Sink()
    chunks = [
        removal(f"c{i}", [f"t{2 * i}", f"t{2 * i + 1}"], operation="op", index=i, count=3, seq=i + 1) for i in range(3)
    ]
    assert core.receive(chunks[2], sink.ack("c2")) == []
    assert core.receive(chunks[0], sink.ack("c0")) == []
    [delivery] = core.receive(chunks[1], sink.ack("c1"))
    assert delivery.complete
    assert [c.id for c in delivery.chunks] == ["c0", "c1", "c2"]
    assert delivery.outcome.id == "c0"
    assert list(delivery.outcome.tickets_removed.ticket_ids) == [f"t{i}" for i in range(6)]
    assert list(chunks[0].tickets_removed.ticket_ids) == ["t0", "t1"]  # the chunk itself is left as it was
    await delivery.ack()
    assert sorted(sink.acks) == ["c0", "c1", "c2"]
    assert core.receive(chunks[1], sink.ack("c1")) == []


async def test_gives_up_the_oldest_incomplete_batch_beyond_max_pending_batches() -> None:
    core, sink = OutcomeCore(max_pending_batches=1), Sink()
    assert core.receive(removal("x0", ["a"], operation="x", index=0, count=2), sink.ack("x0")) == []
    [given_up] = core.receive(removal("y0", ["b"], operation="y", index=0, count=2), sink.ack("y0"))
    assert (given_up.complete, [c.id for c in given_up.chunks]) == (False, ["x0"])


async def test_reports_gaps_in_producer_sequence_per_producer_when_asked() -> None:
    gaps: list[SequenceGap] = []
    core, sink = OutcomeCore(detect_gaps=True, on_gap=gaps.append), Sink()
    for outcome_id, producer, seq in (("a", "p", 1), ("b", "p", 2), ("c", "other", 9), ("d", "p", 5), ("e", "p", 4)):
        outcome = removal(outcome_id, [], seq=seq)
        outcome.producer_id = producer
        core.receive(outcome, sink.ack(outcome_id))
    assert gaps == [SequenceGap(producer_id="p", after=2, next=5, missing=2, queue_id="q")]
    assert core.gaps == 1
    quiet = OutcomeCore()
    quiet.receive(removal("a", [], seq=1), sink.ack("a"))
    quiet.receive(removal("b", [], seq=7), sink.ack("b"))
    assert quiet.gaps == 0


async def test_an_ack_the_sink_cannot_confirm_fails_and_the_redelivery_is_handed_out_again() -> None:
    core, sink = OutcomeCore(), Sink()
    sink.fail = True
    [delivery] = core.receive(removal("a", ["t1"]), sink.ack("a"))
    with pytest.raises(ConnectionError):
        await delivery.ack()
    sink.fail = False
    [again] = core.receive(removal("a", ["t1"]), sink.ack("a"))
    await again.ack()
    assert sink.acks == ["a"]
