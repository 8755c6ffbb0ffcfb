"""The one place query errors become gRPC status codes."""

from __future__ import annotations

import grpc

from laredo_query.domain.errors import (
    IndexNotFound,
    IndexUnavailable,
    InvalidRequest,
    QueryError,
    ServiceStopping,
    SubscriberOverflowed,
    TableNotFound,
    TableNotReady,
)

_STATUS: tuple[tuple[type[QueryError], grpc.StatusCode], ...] = (
    (InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT),  # also InvalidKey, InvalidPageToken
    (TableNotFound, grpc.StatusCode.NOT_FOUND),
    (IndexNotFound, grpc.StatusCode.NOT_FOUND),
    (IndexUnavailable, grpc.StatusCode.FAILED_PRECONDITION),
    (TableNotReady, grpc.StatusCode.UNAVAILABLE),
    (SubscriberOverflowed, grpc.StatusCode.ABORTED),
    (ServiceStopping, grpc.StatusCode.UNAVAILABLE),
)


def status_for(error: QueryError) -> tuple[grpc.StatusCode, str]:
    for error_type, code in _STATUS:
        if isinstance(error, error_type):
            return code, str(error)
    return grpc.StatusCode.INTERNAL, str(error)
