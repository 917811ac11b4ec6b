"""Plain HTTP calls to the service's admin routes, for what the client itself does not read (a stored ticket)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")


async def get(url: str) -> tuple[int, Any]:
    """GET ``url``: the status and the JSON body (off the event loop)."""
    return await asyncio.to_thread(_get, url)


async def admin_ticket(base_url: str, queue_id: str, ticket_id: str) -> tuple[int, Any]:
    return await get(f"{base_url}/admin/v1/queues/{queue_id}/tickets/{ticket_id}")


async def active_tickets(base_url: str, queue_id: str) -> int:
    _, body = await get(f"{base_url}/admin/v1/queues")
    return next(q["activeTickets"] for q in body["queues"] if q["queueId"] == queue_id)


async def poll_until(attempt: Any, done: Any, timeout: float = 10.0, interval: float = 0.05) -> Any:
    """Calls the coroutine function ``attempt`` until ``done`` accepts its result, or the time is up: then the last
    result is returned, so the caller's assertion fails with what was actually seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await attempt()
        if done(value) or loop.time() >= deadline:
            return value
        await asyncio.sleep(interval)
