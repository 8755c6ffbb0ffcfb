"""The one map from Laredo's errors to gRPC status codes, used by every service's gRPC entrypoints.

An error raised on purpose says what kind of failure it is (laredo_kernel.errors.ErrorKind); anything else is
unexpected: answered UNKNOWN, as grpcio would, but logged with its traceback and without quoting a secret.
"""

from __future__ import annotations

import logging

import grpc
from laredo_kernel.errors import ErrorKind, LaredoError

from laredo_core.redaction import scrub

log = logging.getLogger(__name__)

CODES: dict[ErrorKind, grpc.StatusCode] = {
    ErrorKind.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.PRECONDITION_FAILED: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorKind.ABORTED: grpc.StatusCode.ABORTED,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorKind.TIMED_OUT: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorKind.UNIMPLEMENTED: grpc.StatusCode.UNIMPLEMENTED,
    ErrorKind.INTERNAL: grpc.StatusCode.INTERNAL,
}


def status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and the (scrubbed) message a client is answered with for `error`."""
    if isinstance(error, LaredoError):
        return CODES[error.kind], scrub(str(error))
    log.error("unexpected error answered UNKNOWN", exc_info=error)
    return grpc.StatusCode.UNKNOWN, scrub(f"Unexpected {type(error)}: {error}")
