"""The webhook signature check: the worked example of docs/outcomes-webhook.md, every refusal (bad signature,
stale or malformed timestamp, missing header), secret rotation; and signed deliveries from the real service to a
receiver that checks them and decodes the body, refusing the ones signed with a secret it does not know."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from matchmaker_client import (
    MatchmakerClient,
    Outcome,
    OutcomeList,
    check_webhook_signature,
    decode_webhook_body,
    sign_webhook,
    verify_webhook_signature,
)
from support.consumers import queue_duel
from support.service import Service, duel_queue

SECRET = "whsec-py-7d1e"


def test_signs_the_worked_example_of_the_docs() -> None:
    body = b'{"id":"4f2d","kind":"ticket.removed"}'
    expected = "sha256=68ba2335eb4f6bc5d81505aef6881a0d6da78ea029b46b1bbc53416f503da616"
    assert sign_webhook("whsec_test", 1767225600, body) == expected
    assert verify_webhook_signature("whsec_test", "1767225600", expected, body, now_secs=1767225600)


@pytest.mark.parametrize(
    ("timestamp", "signature", "now", "reason"),
    [
        (None, "sig", 1000, "missing_header"),
        ("1000", None, 1000, "missing_header"),
        ("10e3", "sig", 1000, "malformed_timestamp"),
        ("-1000", "sig", 1000, "malformed_timestamp"),
        ("1000", "SIGNED", 1301, "stale_timestamp"),
        ("1000", "SIGNED", 699, "stale_timestamp"),
        ("1000", "sha256=abc", 1000, "malformed_signature"),
        ("1000", "OTHER", 1000, "signature_mismatch"),
        ("1000", "SIGNED_OTHER_BODY", 1000, "signature_mismatch"),
    ],
)
def test_refuses_and_says_why(timestamp: str | None, signature: str | None, now: int, reason: str) -> None:
    body = b"\x0a\x04abcd"
    signature = {
        "SIGNED": sign_webhook(SECRET, "1000", body),
        "OTHER": sign_webhook("another-secret", "1000", body),
        "SIGNED_OTHER_BODY": sign_webhook(SECRET, "1000", body + b"x"),
    }.get(signature or "", signature)
    check = check_webhook_signature(SECRET, timestamp, signature, body, now_secs=now)
    assert (check.ok, check.reason) == (False, reason)


def test_accepts_within_the_window_either_way_any_hex_case_and_either_secret_of_a_rotation() -> None:
    body = b"payload"
    signed = sign_webhook(SECRET, "1000", body)
    for now in (700, 1000, 1300):
        assert verify_webhook_signature(SECRET, "1000", signed, body, now_secs=now)
    assert verify_webhook_signature(SECRET.encode(), "1000", "sha256=" + signed[7:].upper(), body, now_secs=1000)
    assert verify_webhook_signature(["old-secret", SECRET], "1000", signed, body, now_secs=1000)
    assert verify_webhook_signature([SECRET, "new-secret"], "1000", signed, body, now_secs=1000)
    assert not verify_webhook_signature(["old-secret", "new-secret"], "1000", signed, body, now_secs=1000)
    now = int(time.time())
    assert verify_webhook_signature(SECRET, str(now), sign_webhook(SECRET, now, body), body)


def test_decodes_each_body_layout() -> None:
    outcome = Outcome(id=str(uuid.uuid4()), kind="ticket.expired", queue_id="q", producer_sequence=3)
    listed = OutcomeList(outcomes=[outcome, outcome])
    assert decode_webhook_body(
        "application/x-protobuf", "matchmaker.outcomes.v1.Outcome", outcome.SerializeToString()
    ) == [outcome]
    assert decode_webhook_body(
        "application/x-protobuf", "matchmaker.outcomes.v1.OutcomeList", listed.SerializeToString()
    ) == [outcome, outcome]
    json_one = (
        b'{"id":"%s","kind":"ticket.expired","queueId":"q","producerSequence":"3","addedLater":1}' % outcome.id.encode()
    )
    assert decode_webhook_body("application/json; charset=utf-8", None, json_one) == [outcome]
    json_list = b'{"outcomes":[' + json_one + b"]}"
    assert decode_webhook_body("application/json", "matchmaker.outcomes.v1.OutcomeList", json_list) == [outcome]


class Receiver:
    """A webhook endpoint on the standard library's HTTP server: checks each request, decodes it, answers 204, or
    401 when the signature does not hold."""

    def __init__(self, secret: str) -> None:
        self.received: list[tuple[str, list[Outcome]]] = []
        self.refused: list[str | None] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                check = check_webhook_signature(
                    secret, self.headers.get("X-SVC-Timestamp"), self.headers.get("X-SVC-Signature"), body
                )
                if not check.ok:
                    receiver.refused.append(check.reason)
                    self.send_response(401)
                else:
                    outcomes = decode_webhook_body(
                        self.headers.get("Content-Type"), self.headers.get("X-SVC-Message-Type"), body
                    )
                    receiver.received.append((self.headers.get("X-SVC-Queue-Id", ""), outcomes))
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hooked() -> Iterator[tuple[Service, Receiver]]:
    receiver = Receiver(SECRET)
    webhook = {
        "url": receiver.url,
        "timeout_ms": 1000,
        "max_retries": 3,
        "retry_base_delay_ms": 20,
        "retry_max_delay_ms": 100,
    }
    service = Service(
        {
            "hook.duel": duel_queue(50, outcomes={"sink": "webhook", "webhook": {**webhook, "secret": SECRET}}),
            "hook.json": duel_queue(
                50,
                outcomes={
                    "sink": "webhook",
                    "webhook": {**webhook, "secret": SECRET, "encoding": "json", "max_batch_size": 10},
                },
            ),
            "hook.wrong": duel_queue(
                50, outcomes={"sink": "webhook", "webhook": {**webhook, "secret": "not-the-secret"}}
            ),
        }
    )
    try:
        yield service, receiver
    finally:
        service.close()
        receiver.close()


async def _until(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not seen in time"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("queue_id", ["hook.duel", "hook.json"])
async def test_verifies_and_decodes_signed_deliveries_of_the_service(
    hooked: tuple[Service, Receiver], queue_id: str
) -> None:
    service, receiver = hooked
    async with MatchmakerClient(service.grpc_address) as api:
        ticket_ids, _ = await queue_duel(api, queue_id)

    def matched() -> list[Outcome]:
        return [o for q, outcomes in receiver.received if q == queue_id for o in outcomes if o.kind == "match.created"]

    await _until(lambda: len(matched()) >= 1)
    [outcome] = matched()
    assert sorted(t.id for t in outcome.match_created.match.tickets) == sorted(ticket_ids)


async def test_refuses_deliveries_signed_with_another_secret(hooked: tuple[Service, Receiver]) -> None:
    service, receiver = hooked
    async with MatchmakerClient(service.grpc_address) as api:
        await queue_duel(api, "hook.wrong")
    await _until(lambda: "signature_mismatch" in receiver.refused)
    assert all(q != "hook.wrong" for q, _ in receiver.received)
