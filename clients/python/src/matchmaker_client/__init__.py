"""matchmaker-client: a Python (asyncio) client for the matchmaker service.

The six operations over gRPC with deadlines and retries of UNAVAILABLE (``MatchmakerClient``), the standard engine's
input builder and output decoder, the WebSocket outcome consumer and the webhook signature check. The generated
messages of the contract are under ``matchmaker_client.gen`` (made from proto/ at build time); the ones a game
backend handles most are re-exported here. Guide: docs/client-python.md.
"""

from .backoff import BackoffPolicy, backoff_delay
from .client import DEFAULT_CHANNEL_OPTIONS, DEFAULT_RETRY, DEFAULT_TIMEOUT, MatchmakerClient, RetryEvent, RetryPolicy
from .engine import (
    EngineInputBuilder,
    EngineInputLike,
    decode_engine_input,
    decode_engine_output,
    encode_engine_input,
    encode_metadata,
    engine_input,
    match_engine_output,
    metadata_text,
    ticket_engine_input,
)
from .errors import REASON_KEY, MatchmakerError, QueueRetiringError
from .gen.admin.v1.admin_pb2 import ExplainTicketResponse, GetQueueStatisticsResponse
from .gen.core.v1.resources_pb2 import Backfill, BackfillRequest, Match, Ticket
from .gen.engines.standard.v1.engine_pb2 import EngineInput, EngineOutput, HostSelection, Team
from .gen.outcomes.v1.outcomes_pb2 import Outcome, OutcomeBatch, OutcomeList, RemovalReason
from .outcomes import (
    ConsumerClosedError,
    OutcomeCore,
    OutcomeDelivery,
    OutcomeStreamError,
    SequenceGap,
    WebhookCheck,
    WebSocketOutcomeConsumer,
    batched_ids,
    check_webhook_signature,
    decode_webhook_body,
    outcome_batch,
    sign_webhook,
    verify_webhook_signature,
    websocket_consumer,
)

__all__ = [
    "DEFAULT_CHANNEL_OPTIONS",
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUT",
    "REASON_KEY",
    "Backfill",
    "BackfillRequest",
    "BackoffPolicy",
    "ConsumerClosedError",
    "EngineInput",
    "EngineInputBuilder",
    "EngineInputLike",
    "EngineOutput",
    "ExplainTicketResponse",
    "GetQueueStatisticsResponse",
    "HostSelection",
    "Match",
    "MatchmakerClient",
    "MatchmakerError",
    "Outcome",
    "OutcomeBatch",
    "OutcomeCore",
    "OutcomeDelivery",
    "OutcomeList",
    "OutcomeStreamError",
    "QueueRetiringError",
    "RemovalReason",
    "RetryEvent",
    "RetryPolicy",
    "SequenceGap",
    "Team",
    "Ticket",
    "WebSocketOutcomeConsumer",
    "WebhookCheck",
    "backoff_delay",
    "batched_ids",
    "check_webhook_signature",
    "decode_engine_input",
    "decode_engine_output",
    "decode_webhook_body",
    "encode_engine_input",
    "encode_metadata",
    "engine_input",
    "match_engine_output",
    "metadata_text",
    "outcome_batch",
    "sign_webhook",
    "ticket_engine_input",
    "verify_webhook_signature",
    "websocket_consumer",
]
