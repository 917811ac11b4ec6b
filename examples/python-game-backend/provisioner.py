"""A stand-in for the game's server orchestrator: "provisions" a match's server on the host the engine chose,
falling back to the other acceptable hosts. With ``fail_every`` N, every N-th provisioning fails on every host
(deterministically: tests and demos see the compensation path, a reactivation, without chance)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass(frozen=True)
class Provisioned:
    host: str
    address: str
    """Where the players connect."""


class Provisioner:
    def __init__(self, fail_every: int) -> None:
        self._fail_every = fail_every
        self._attempts = 0

    async def provision(self, match_id: str, hosts: list[str]) -> Provisioned | None:
        """The server, or None when no host could take the match."""
        self._attempts += 1
        if self._fail_every > 0 and self._attempts % self._fail_every == 0:
            return None
        if not hosts:
            return None
        await asyncio.sleep(0.02)  # the orchestrator's round trip
        host = hosts[0]
        return Provisioned(host, f"{host}.game.example:{7000 + self._attempts % 1000}/{match_id[:8]}")
