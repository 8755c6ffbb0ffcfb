"""Closing what a service holds when it stops: bounded in time, and a failure to close is no reason to fail."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

#: Seconds one close may take: a connection to a server that stopped answering never finishes closing.
CLOSE_TIMEOUT = 3.0


async def close_quietly(what: str, close: Callable[[], Awaitable[object] | object],
                        timeout: float = CLOSE_TIMEOUT) -> None:
    """Run `close()` (a coroutine function or a plain one) for at most `timeout` seconds; a timeout or an error is
    logged (naming `what`), not raised: the server at the other end may be gone, and a connection that cannot say
    goodbye is closed by the process ending."""
    try:
        async with asyncio.timeout(timeout):
            result = close()
            if inspect.isawaitable(result):
                await result
    except TimeoutError:
        log.warning("%s did not close within %gs (its server does not answer); going on", what, timeout)
    except Exception as exc:  # noqa: BLE001 - stopping: a failed close is logged, not raised
        log.warning("%s: closing failed (%s: %s); going on", what, type(exc).__name__, exc)
