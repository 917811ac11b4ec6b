"""Exponential backoff with full jitter: the n-th wait is random in [0, min(max, initial * 2^(n-1))), so many
clients retrying after the same outage spread out instead of arriving together."""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class BackoffPolicy:
    initial_delay: float = 0.1
    """Bound of the first wait, in seconds."""
    max_delay: float = 5.0
    """Largest bound of a wait, in seconds."""


def backoff_delay(retry: int, policy: BackoffPolicy, random: Callable[[], float] = _random.random) -> float:
    """The wait in seconds before retry number ``retry`` (1 for the first). ``random`` is in [0, 1)."""
    bound = min(policy.max_delay, policy.initial_delay * 2.0 ** max(0, retry - 1))
    return random() * bound
