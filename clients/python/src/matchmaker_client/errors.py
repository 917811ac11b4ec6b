"""The one error type of the client: a failed call, with the service's status code by name, its message, and the
machine-readable reason the service sends in ``x-svc-reason`` (today only QUEUE_RETIRING)."""

from __future__ import annotations

import grpc

REASON_KEY = "x-svc-reason"
"""The trailing metadata key of the reason."""


class MatchmakerError(Exception):
    """A call that failed. ``code`` is the gRPC status code's name (``FAILED_PRECONDITION``)."""

    def __init__(
        self,
        *,
        method: str,
        status: grpc.StatusCode,
        details: str,
        attempts: int,
        reason: str | None = None,
        trailing_metadata: tuple[tuple[str, str | bytes], ...] = (),
    ) -> None:
        super().__init__(f"{method}: {status.name}: {details}")
        self.method = method
        """The RPC that failed, e.g. ``CreateTicket``."""
        self.status = status
        self.code: str = status.name
        """The status code's name, e.g. ``NOT_FOUND``."""
        self.grpc_code: int = status.value[0]
        self.details = details
        """The service's message: it names the offending field; branch on ``code`` and ``reason``, not on it."""
        self.attempts = attempts
        """Attempts made (more than 1 when UNAVAILABLE was retried)."""
        self.reason = reason
        """``x-svc-reason`` of the response, when it had one."""
        self.trailing_metadata = trailing_metadata

    @property
    def retryable(self) -> bool:
        """UNAVAILABLE is the one code the service asks callers to retry (with backoff)."""
        return bool(self.status == grpc.StatusCode.UNAVAILABLE)


class QueueRetiringError(MatchmakerError):
    """FAILED_PRECONDITION with ``x-svc-reason: QUEUE_RETIRING``: the queue's file was removed. Do not retry
    against this queue; route players elsewhere."""

    def __init__(
        self,
        *,
        queue_id: str,
        method: str,
        status: grpc.StatusCode,
        details: str,
        attempts: int,
        reason: str | None = "QUEUE_RETIRING",
        trailing_metadata: tuple[tuple[str, str | bytes], ...] = (),
    ) -> None:
        super().__init__(
            method=method,
            status=status,
            details=details,
            attempts=attempts,
            reason=reason,
            trailing_metadata=trailing_metadata,
        )
        self.queue_id = queue_id
        """The queue the call addressed."""


def call_error(err: grpc.aio.AioRpcError, method: str, queue_id: str, attempts: int) -> MatchmakerError:
    """The typed error for a failed gRPC call."""
    trailing = tuple((key, value) for key, value in (err.trailing_metadata() or ()))
    reason = next((str(value) for key, value in trailing if key == REASON_KEY), None)
    status = err.code()
    details = err.details() or ""
    if status == grpc.StatusCode.FAILED_PRECONDITION and reason == "QUEUE_RETIRING":
        return QueueRetiringError(
            queue_id=queue_id,
            method=method,
            status=status,
            details=details,
            attempts=attempts,
            reason=reason,
            trailing_metadata=trailing,
        )
    return MatchmakerError(
        method=method, status=status, details=details, attempts=attempts, reason=reason, trailing_metadata=trailing
    )
