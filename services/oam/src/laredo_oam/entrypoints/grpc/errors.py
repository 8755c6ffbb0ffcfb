"""One map from OAM's errors to gRPC status codes, applied around every implemented RPC."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from laredo_oam.domain.errors import CommandTimedOut, InvalidRequest, NotFound, PreconditionFailed, SnapshotStoreFailed
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


def mapped_errors(handler: Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]
                  ) -> Callable[[Any, Any, grpc.aio.ServicerContext], Awaitable[R]]:
    """Abort with the mapped status for a known error; anything else propagates (INTERNAL, logged by grpc)."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> R:
        try:
            return await handler(self, request, context)
        except Exception as exc:
            code = status_code_for(exc)
            if code is None:
                raise
            message = str(exc)
            if isinstance(exc, CoordinationUnavailable):
                message = f"the coordination store (Redis) is unavailable: {exc}"
            elif isinstance(exc, DeadLetterStoreUnavailable):
                message = f"the dead-letter store (NATS JetStream) is unavailable: {exc}"
            log.info("%s answered %s: %s", handler.__name__, code.name, message)
            await context.abort(code, message)
            raise AssertionError("unreachable: abort raises") from exc

    return wrapper
