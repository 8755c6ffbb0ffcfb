"""OAM's errors as gRPC statuses (the shared map of laredo_core.grpc_errors), applied around every implemented
RPC, whose answers and error messages leave scrubbed (entrypoints/grpc/redacted.py)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from laredo_core.grpc_errors import status_for as shared_status_for
from laredo_core.redaction import scrub

from laredo_oam.entrypoints.grpc.redacted import redacted
from laredo_oam.ports import CoordinationUnavailable, DeadLetterStoreUnavailable

log = logging.getLogger(__name__)
R = TypeVar("R")


def status_for(error: Exception) -> tuple[grpc.StatusCode, str]:
    """The status code (laredo_core.grpc_errors, as every service) and scrubbed message OAM answers `error`
    with; the stores it depends on are named, so an operator knows which one is down."""
    code, message = shared_status_for(error)
    if isinstance(error, CoordinationUnavailable):
        message = scrub(f"the coordination store (Redis) is unavailable: {error}")
    elif isinstance(error, DeadLetterStoreUnavailable):
        message = scrub(f"the dead-letter store (NATS JetStream) is unavailable: {error}")
    return code, message


def mapped_errors(handler: Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]
                  ) -> Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]:
    """Abort with the mapped status for a known error (UNKNOWN for anything else); the answer is scrubbed."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            response = await handler(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            code, message = status_for(exc)
            log.info("%s answered %s: %s", handler.__name__, code.name, message)
            await context.abort(code, message)
            raise AssertionError("unreachable: abort raises") from exc
        return redacted(response)

    return wrapper
