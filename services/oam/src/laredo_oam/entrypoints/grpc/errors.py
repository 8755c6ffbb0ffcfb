"""One map from OAM's errors to gRPC status codes, applied around every implemented RPC, whose answers and
error messages leave scrubbed (entrypoints/grpc/redacted.py)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc
from laredo_core.redaction import scrub

from laredo_oam.domain.errors import CommandTimedOut, InvalidRequest, NotFound, PreconditionFailed, SnapshotStoreFailed
from laredo_oam.entrypoints.grpc.redacted import redacted
from laredo_oam.ports import CoordinationUnavailable, DeadLetterStoreError, DeadLetterStoreUnavailable

log = logging.getLogger(__name__)

_CODES: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (PreconditionFailed, grpc.StatusCode.FAILED_PRECONDITION),
    (CommandTimedOut, grpc.StatusCode.DEADLINE_EXCEEDED),
    (CoordinationUnavailable, grpc.StatusCode.UNAVAILABLE),
    (DeadLetterStoreUnavailable, grpc.StatusCode.UNAVAILABLE),
    (DeadLetterStoreError, grpc.StatusCode.INTERNAL),
    (SnapshotStoreFailed, grpc.StatusCode.INTERNAL),
)

R = TypeVar("R")


def status_code_for(error: Exception) -> grpc.StatusCode | None:
    return next((code for kind, code in _CODES if isinstance(error, kind)), None)


def status_for(error: Exception) -> tuple[grpc.StatusCode, str]:
    """The status code and scrubbed message OAM answers `error` with; an unexpected error is UNKNOWN (as grpc
    would answer it, but without quoting a secret the error may hold) and logged with its traceback."""
    code = status_code_for(error)
    if code is None:
        log.error("unexpected error answered UNKNOWN", exc_info=error)
        return grpc.StatusCode.UNKNOWN, scrub(f"Unexpected {type(error)}: {error}")
    message = str(error)
    if isinstance(error, CoordinationUnavailable):
        message = f"the coordination store (Redis) is unavailable: {error}"
    elif isinstance(error, DeadLetterStoreUnavailable):
        message = f"the dead-letter store (NATS JetStream) is unavailable: {error}"
    return code, scrub(message)


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
