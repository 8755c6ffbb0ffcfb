"""Query errors: one base class, typed subclasses, each of a kind (laredo_core.grpc_errors maps kinds to codes)."""

from __future__ import annotations

from collections.abc import Iterable

from laredo_kernel.errors import ErrorKind, LaredoError


class QueryError(LaredoError):
    """Base of every error the query service raises on purpose."""


class InvalidRequest(QueryError):
    """A request lacks a required field or carries a malformed one (INVALID_ARGUMENT)."""

    kind = ErrorKind.INVALID_REQUEST


class InvalidKey(InvalidRequest):
    """Key values that do not fit the index's columns."""


class InvalidPageToken(InvalidRequest):
    """A ListRows page token this service did not issue, or issued for another table or key."""


class TableNotFound(QueryError):
    """No indexed-memory target is configured for the table (NOT_FOUND)."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, schema: str, table: str, known: Iterable[str]) -> None:
        names = ", ".join(sorted(known)) or "none"
        super().__init__(f"no indexed-memory target for {schema}.{table} on this query service "
                         f"(tables served: {names})")


class IndexNotFound(QueryError):
    """The table has no index of that name (NOT_FOUND)."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, table: str, index_name: str, known: Iterable[str]) -> None:
        super().__init__(f"{table} has no index named {index_name!r} (indexes: {', '.join(known)})")


class IndexUnavailable(QueryError):
    """The index is configured but cannot work with the table's columns (FAILED_PRECONDITION)."""

    kind = ErrorKind.PRECONDITION_FAILED


class TableNotReady(QueryError):
    """The table's first baseline is not loaded yet, so answers would be incomplete (UNAVAILABLE)."""

    kind = ErrorKind.UNAVAILABLE
    retryable = True


class SubscriptionEnded(QueryError):
    """A Subscribe stream ends on the server's side."""


class SubscriberOverflowed(SubscriptionEnded):
    """The subscriber's buffer overflowed under the close-on-overflow policy (ABORTED)."""

    kind = ErrorKind.ABORTED
    retryable = True


class ServiceStopping(SubscriptionEnded):
    """The service is shutting down (UNAVAILABLE)."""

    kind = ErrorKind.UNAVAILABLE
    retryable = True


class ChangeRejected(QueryError):
    """A change from the stream cannot be applied to the table; it becomes a dead letter (never raised to a client)."""


class RowWithoutKey(ChangeRejected):
    """A change names no usable key: it cannot be applied."""


class UniqueIndexViolation(ChangeRejected):
    """A change would give a row the key of a unique index that another row holds; `row_key` is the changed row's
    primary key (canonical)."""

    def __init__(self, message: str, row_key: object) -> None:
        super().__init__(message)
        self.row_key = row_key
