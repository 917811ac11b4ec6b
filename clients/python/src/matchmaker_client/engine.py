"""The standard engine's payloads without bytes: an EngineInput builder for tickets and backfill requests, and the
decoder of a match's EngineOutput (teams and host selection). Both are the generated messages of
matchmaker.engines.standard.v1; the client serializes and parses them, callers never see the bytes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import json_format

from .gen.core.v1.resources_pb2 import Match, Ticket
from .gen.engines.standard.v1.engine_pb2 import EngineInput, EngineOutput

_UINT32_MAX = 0xFFFF_FFFF


class EngineInputBuilder:
    """Builds an EngineInput: one player for a solo ticket, several for a party, plus attribute filters."""

    def __init__(self) -> None:
        self._input = EngineInput()

    def player(self, player_id: str, mmr: float, latencies: Mapping[str, int] | None = None) -> EngineInputBuilder:
        """Adds a player (a party is one ticket with several). ``latencies``: host key to round-trip time in whole
        milliseconds. Refuses a non-finite mmr and latencies that are not uint32, before anything is sent."""
        if isinstance(mmr, bool) or not isinstance(mmr, (int, float)) or not math.isfinite(mmr):
            raise ValueError(f"player {player_id}: mmr must be a finite number, got {mmr!r}")
        checked: dict[str, int] = {}
        for host, ms in (latencies or {}).items():
            if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= _UINT32_MAX:
                raise ValueError(
                    f"player {player_id}: latency of host {host} must be whole milliseconds (uint32), got {ms!r}"
                )
            checked[host] = ms
        self._input.players.add(player_id=player_id, mmr=float(mmr), latencies=checked)
        return self

    def attribute(self, name: str, *, values: Iterable[str] = (), accepts: Iterable[str] = ()) -> EngineInputBuilder:
        """Sets the attribute filter ``name``: what this ticket is (``values``) and what it accepts (``accepts``)."""
        attribute = self._input.attributes[name]
        attribute.Clear()
        attribute.values.extend(values)
        attribute.accepts.extend(accepts)
        return self

    def build(self) -> EngineInput:
        """The message built so far (a copy: the builder can go on)."""
        copy = EngineInput()
        copy.CopyFrom(self._input)
        return copy

    def to_bytes(self) -> bytes:
        """The serialized message, as ``Ticket.engine_input`` carries it."""
        return self._input.SerializeToString()


EngineInputLike = EngineInputBuilder | EngineInput | Mapping[str, Any] | bytes
"""What an operation takes as ``engine_input``: a builder, a message, its canonical JSON as a dict
(``{"players": [{"playerId": "a", "mmr": 0.5}]}``, snake_case names work too), or the serialized bytes."""


def engine_input() -> EngineInputBuilder:
    """A new EngineInput builder."""
    return EngineInputBuilder()


def encode_engine_input(value: EngineInputLike) -> bytes:
    """Serializes an engine input given as a builder, a message, a dict or bytes (taken as they are)."""
    if isinstance(value, EngineInputBuilder):
        return value.to_bytes()
    if isinstance(value, EngineInput):
        return value.SerializeToString()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Mapping):
        return json_format.ParseDict(dict(value), EngineInput()).SerializeToString()
    raise TypeError(f"engine_input must be an EngineInputBuilder, an EngineInput, a dict or bytes, got {type(value)}")


def decode_engine_input(data: bytes) -> EngineInput:
    """Parses a serialized EngineInput (e.g. the engine_input of a ticket in a ticket.orphaned outcome)."""
    return EngineInput.FromString(data)


def decode_engine_output(data: bytes | None) -> EngineOutput | None:
    """Parses a serialized EngineOutput; None when there is none."""
    return None if data is None else EngineOutput.FromString(data)


def match_engine_output(match: Match) -> EngineOutput | None:
    """A match's engine output: its teams (player ids), the attribute intersections and the chosen host."""
    return decode_engine_output(match.engine_output) if match.HasField("engine_output") else None


def ticket_engine_input(ticket: Ticket) -> EngineInput | None:
    """A ticket's engine input, when it has one."""
    return decode_engine_input(ticket.engine_input) if ticket.HasField("engine_input") else None


def encode_metadata(metadata: str | bytes) -> bytes:
    """Metadata as bytes: a string is taken as its UTF-8 encoding."""
    return metadata.encode("utf-8") if isinstance(metadata, str) else bytes(metadata)


def metadata_text(ticket: Ticket) -> str | None:
    """A ticket's metadata read as UTF-8 text (what encode_metadata made of a string); None when it has none."""
    return ticket.metadata.decode("utf-8") if ticket.HasField("metadata") else None
