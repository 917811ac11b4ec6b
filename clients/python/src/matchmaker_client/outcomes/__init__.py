"""Outcome consumers: the WebSocket stream, the webhook signature check, and the core they share."""

from .consumer import DEFAULT_HIGH_WATER_MARK, OutcomeHandler, QueuedConsumer
from .core import (
    DEFAULT_DEDUPE_SIZE,
    DEFAULT_MAX_PENDING_BATCHES,
    OutcomeCore,
    OutcomeDelivery,
    SequenceGap,
    batched_ids,
    outcome_batch,
)
from .webhook import (
    DEFAULT_TOLERANCE_SECS,
    WebhookCheck,
    WebhookRejection,
    WebhookSecret,
    check_webhook_signature,
    decode_webhook_body,
    sign_webhook,
    verify_webhook_signature,
)
from .websocket import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_RECONNECT,
    ConsumerClosedError,
    OutcomeStreamError,
    WebSocketOutcomeConsumer,
    websocket_consumer,
)

__all__ = [
    "DEFAULT_DEDUPE_SIZE",
    "DEFAULT_HIGH_WATER_MARK",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_PENDING_BATCHES",
    "DEFAULT_RECONNECT",
    "DEFAULT_TOLERANCE_SECS",
    "ConsumerClosedError",
    "OutcomeCore",
    "OutcomeDelivery",
    "OutcomeHandler",
    "OutcomeStreamError",
    "QueuedConsumer",
    "SequenceGap",
    "WebSocketOutcomeConsumer",
    "WebhookCheck",
    "WebhookRejection",
    "WebhookSecret",
    "batched_ids",
    "check_webhook_signature",
    "decode_webhook_body",
    "outcome_batch",
    "sign_webhook",
    "verify_webhook_signature",
    "websocket_consumer",
]
