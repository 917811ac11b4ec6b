"""examples/python-game-backend against the real service serving the repository's queues/ (as ``npm start`` does):
it queues players, provisions a server for each match.created, and when provisioning fails (every second one
here, PROVISION_FAIL_EVERY=2) reactivates the match's tickets, which then play in a later match. The example stops
by itself after two provisioned matches (as test/client/client-example.test.ts checks the TypeScript one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from support.service import REPO, Service

EXAMPLE = REPO / "examples" / "python-game-backend" / "main.py"


def test_provisions_matches_and_reactivates_the_tickets_of_a_failed_provisioning() -> None:
    queue_dir = Path(tempfile.mkdtemp(prefix="mm-py-queues-"))
    shutil.copytree(REPO / "queues", queue_dir, dirs_exist_ok=True)
    service = Service(queue_dir=queue_dir)
    try:
        run = subprocess.run(
            [sys.executable, str(EXAMPLE)],
            env={
                **os.environ,
                "MATCHMAKER_GRPC": service.grpc_address,
                "MATCHMAKER_HTTP": service.base_url,
                "QUEUE_ID": "eu.ranked",
                "PLAYERS": "20",
                "PROVISION_FAIL_EVERY": "2",
                "STOP_AFTER_PROVISIONED": "2",
                "RUN_SECS": "40",  # only if something is wrong
            },
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        service.close()
        shutil.rmtree(queue_dir, ignore_errors=True)
    assert (run.returncode, run.stderr) == (0, "")
    events = [json.loads(line) for line in run.stdout.splitlines() if line]

    def of(name: str) -> list[dict]:
        return [e for e in events if e["event"] == name]

    assert len(of("queued")) == 20
    [failed, *_] = of("provisioning_failed")
    [reactivated, *_] = of("reactivated")
    assert (reactivated["matchId"], reactivated["failedTicketIds"], len(reactivated["ticketIds"])) == (
        failed["matchId"],
        [],
        10,
    )
    # Of two full matches the second fails; its players, back in the pool, make the second provisioned match.
    provisioned = of("provisioned")
    assert len(provisioned) == 2
    assert any(
        p["matchId"] != failed["matchId"] and set(reactivated["ticketIds"]) <= set(p["ticketIds"]) for p in provisioned
    )
    assert events[-1] | {"time": None} == {
        "time": None,
        "event": "stopped",
        "queued": 20,
        "provisioned": 2,
        "reactivated": 1,
        "requeued": 0,
        "timedOut": 0,
    }
