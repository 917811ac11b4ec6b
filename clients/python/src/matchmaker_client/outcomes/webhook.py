"""The webhook sink's signature (docs/outcomes-webhook.md), and its body:

    signature = lowercase hex of HMAC-SHA256(key = the secret's UTF-8 bytes, message = "<timestamp>." + raw body)
    X-SVC-Signature: sha256=<signature>

A request is accepted when the signature matches under one of the secrets (a list during a rotation) and
X-SVC-Timestamp is within the tolerance of the receiver's clock, either way (it bounds replays). The same rules as
the TypeScript client's packages/client/src/outcomes/webhook-signature.ts. Framework-neutral: pass the headers and
the raw body bytes from Flask, FastAPI, aiohttp or the standard library.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from google.protobuf import json_format

from ..gen.outcomes.v1.outcomes_pb2 import Outcome, OutcomeList

DEFAULT_TOLERANCE_SECS = 300
OUTCOME_LIST = "matchmaker.outcomes.v1.OutcomeList"

WebhookSecret = str | bytes | Sequence[str | bytes]
WebhookRejection = Literal[
    "missing_header", "malformed_timestamp", "stale_timestamp", "malformed_signature", "signature_mismatch"
]

_DIGITS = re.compile(r"[0-9]{1,15}")
_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")


@dataclass(frozen=True)
class WebhookCheck:
    """The verdict: ``ok``, or why not (for logs, not for the answer: answer 401 either way)."""

    ok: bool
    reason: WebhookRejection | None = None


def _key(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)


def sign_webhook(secret: str | bytes, timestamp: str | int, body: bytes | str) -> str:
    """The X-SVC-Signature value for a timestamp and body (what the service sends; for tests of a receiver)."""
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    digest = hmac.new(_key(secret), f"{timestamp}.".encode("ascii") + data, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def check_webhook_signature(
    secret: WebhookSecret,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    *,
    tolerance_secs: float = DEFAULT_TOLERANCE_SECS,
    now_secs: float | None = None,
) -> WebhookCheck:
    """Checks a request: ``timestamp`` and ``signature`` are the X-SVC-Timestamp and X-SVC-Signature headers as
    received (None when missing), ``body`` the raw body bytes (never a parsed and re-serialized body)."""
    if not timestamp or not signature:
        return WebhookCheck(False, "missing_header")
    if not _DIGITS.fullmatch(timestamp):
        return WebhookCheck(False, "malformed_timestamp")
    now = time.time() if now_secs is None else now_secs
    if abs(int(now) - int(timestamp)) > tolerance_secs:
        return WebhookCheck(False, "stale_timestamp")
    match = _SIGNATURE.fullmatch(signature)
    if match is None:
        return WebhookCheck(False, "malformed_signature")
    received = bytes.fromhex(match.group(1))
    secrets = [secret] if isinstance(secret, (str, bytes)) else list(secret)
    matched = False
    for candidate in secrets:
        expected = bytes.fromhex(sign_webhook(candidate, timestamp, body)[len("sha256=") :])
        # Every secret is compared, in constant time, whatever the earlier ones gave.
        matched = hmac.compare_digest(expected, received) or matched
    return WebhookCheck(True) if matched else WebhookCheck(False, "signature_mismatch")


def verify_webhook_signature(
    secret: WebhookSecret,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    *,
    tolerance_secs: float = DEFAULT_TOLERANCE_SECS,
    now_secs: float | None = None,
) -> bool:
    """True when X-SVC-Signature matches the raw body under a secret and X-SVC-Timestamp is fresh."""
    return check_webhook_signature(
        secret, timestamp, signature, body, tolerance_secs=tolerance_secs, now_secs=now_secs
    ).ok


def decode_webhook_body(content_type: str | None, message_type: str | None, body: bytes) -> list[Outcome]:
    """The outcomes of a verified request: a binary or JSON ``Outcome``, or an ``OutcomeList`` when
    X-SVC-Message-Type says so (their bytes cannot be told apart). Unknown JSON fields are ignored, as fields may
    be added. Raises ``google.protobuf.message.DecodeError`` or ``json_format.ParseError`` on a body that does not
    decode (answer 400)."""
    is_list = message_type == OUTCOME_LIST
    if (content_type or "").split(";")[0].strip().lower() == "application/json":
        document = json.loads(body)
        if is_list:
            return list(json_format.ParseDict(document, OutcomeList(), ignore_unknown_fields=True).outcomes)
        return [json_format.ParseDict(document, Outcome(), ignore_unknown_fields=True)]
    if is_list:
        return list(OutcomeList.FromString(body).outcomes)
    return [Outcome.FromString(body)]
