"""OAM errors; each maps to one gRPC status code in entrypoints/grpc/errors.py."""

from __future__ import annotations

from laredo_kernel.errors import ErrorKind, LaredoError


class OamError(LaredoError):
    """Base of the OAM service's own errors."""


class InvalidRequest(OamError):
    """A required field is missing or malformed (INVALID_ARGUMENT)."""

    kind = ErrorKind.INVALID_REQUEST


class NotFound(OamError):
    """The named source, table or pipeline does not exist (NOT_FOUND)."""

    kind = ErrorKind.NOT_FOUND


class PreconditionFailed(OamError):
    """The operation needs something first, e.g. confirm=true for a destructive one (FAILED_PRECONDITION)."""

    kind = ErrorKind.PRECONDITION_FAILED


class CommandTimedOut(OamError):
    """A command was sent but no instance answered in time (DEADLINE_EXCEEDED); it may still be carried out."""

    kind = ErrorKind.TIMED_OUT
    retryable = True


class SnapshotStoreFailed(OamError):
    """A snapshot store failed or holds a damaged snapshot (INTERNAL); the message names the store and the step."""

    kind = ErrorKind.INTERNAL
    retryable = True
