"""A small game backend on the Python matchmaker client: queues players, "provisions" a server for every
match.created, reactivates the match's tickets when provisioning fails, and handles every other outcome kind.
Outcomes come from the WebSocket stream as a named consumer, so a restart resumes after the last handled outcome.

    npm start                                          # the service, serving queues/ (eu.ranked)
    python examples/python-game-backend/main.py        # this backend (with matchmaker-client installed)

Settings (environment): MATCHMAKER_GRPC (127.0.0.1:9001), MATCHMAKER_HTTP (http://127.0.0.1:8080), QUEUE_ID
(eu.ranked), PLAYERS (20), PROVISION_FAIL_EVERY (0: never; N: every N-th provisioning fails), RUN_SECS (0: until
interrupted), STOP_AFTER_PROVISIONED (0: never; N: stop once N matches are provisioned), CONSUMER (game-backend),
MATCHMAKER_TOKEN and MATCHMAKER_OUTCOMES_TOKEN (bearer tokens, when the service has them on).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from backend import GameBackend, Player, summary
from provisioner import Provisioner

from matchmaker_client import MatchmakerClient, Outcome, OutcomeDelivery, websocket_consumer

env = os.environ


@dataclass(frozen=True)
class Settings:
    """Read from the environment once, at start."""

    grpc: str = env.get("MATCHMAKER_GRPC", "127.0.0.1:9001")
    http: str = env.get("MATCHMAKER_HTTP", "http://127.0.0.1:8080")
    queue_id: str = env.get("QUEUE_ID", "eu.ranked")
    players: int = int(env.get("PLAYERS", "20"))
    fail_every: int = int(env.get("PROVISION_FAIL_EVERY", "0"))
    run_secs: float = float(env.get("RUN_SECS", "0"))
    stop_after_provisioned: int = int(env.get("STOP_AFTER_PROVISIONED", "0"))
    consumer: str = env.get("CONSUMER", "game-backend")


SETTINGS = Settings()


def log(event: str, **fields: Any) -> None:
    time = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    print(json.dumps({"time": time, "event": event, **fields}), flush=True)


def player(i: int) -> Player:
    """A player near 0.5 mmr with measured latencies to two hosts."""
    return Player(
        player_id=f"player-{i}-{uuid.uuid4().hex[:8]}",
        mmr=0.45 + random.random() * 0.1,
        latencies={"eu-west": 20 + random.randrange(40), "eu-central": 30 + random.randrange(40)},
    )


async def main() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if SETTINGS.run_secs > 0:
        loop.call_later(SETTINGS.run_secs, stop.set)

    async with MatchmakerClient(SETTINGS.grpc, access_token=env.get("MATCHMAKER_TOKEN")) as client:
        backend = GameBackend(client, SETTINGS.queue_id, Provisioner(SETTINGS.fail_every), log)

        async def handle(outcome: Outcome, _: OutcomeDelivery) -> None:
            await backend.handle(outcome)
            wanted = SETTINGS.stop_after_provisioned
            if wanted > 0 and backend.counts.provisioned >= wanted:
                stop.set()

        consumer = websocket_consumer(
            SETTINGS.http,
            queue_id=SETTINGS.queue_id,
            consumer=SETTINGS.consumer,
            access_token=env.get("MATCHMAKER_OUTCOMES_TOKEN"),
            on_error=lambda err: log("stream_problem", message=str(err)),
        )
        handling: asyncio.Future[None] | None = None
        try:
            await consumer.ready()
            log("started", **asdict(SETTINGS))
            # Handled one at a time, each acknowledged once handled; a handler that raises stops the backend, and
            # the stream's position (this consumer's last acknowledgement) makes a restart handle that outcome again.
            handling = asyncio.ensure_future(consumer.run(handle))
            for i in range(SETTINGS.players):
                await backend.queue(player(i))
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({handling, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if handling.done():
                handling.result()  # the handler's failure, if that is what ended it
        finally:
            await consumer.close()
            if handling is not None:
                with contextlib.suppress(Exception):
                    await handling
        log("stopped", **summary(backend.counts))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as err:  # one line in the event log, and a failing exit status
        log("failed", message=str(err))
        raise SystemExit(1) from err
