"""Fan-out errors: one base class, typed subclasses, each of a kind (laredo_core.grpc_errors maps kinds to codes)."""

from __future__ import annotations

from laredo_kernel.errors import ErrorKind, LaredoError
# Snapshot errors are shared with every snapshot reader and writer; re-exported for the fan-out core.
from laredo_core.snapshots.errors import SnapshotCorrupt as SnapshotCorrupt
from laredo_core.snapshots.errors import SnapshotNotFound as SnapshotNotFound
from laredo_core.snapshots.errors import SnapshotStoreUnavailable as SnapshotStoreUnavailable


class FanoutError(LaredoError):
    """Base of every error the fan-out service raises on purpose."""


class ChangeNotApplicable(FanoutError):
    """A change from the stream cannot be applied to the table; it becomes a dead letter (never raised to a client)."""


class RowWithoutKey(ChangeNotApplicable):
    """A change lacks (some of) the table's key values, so the row it changes cannot be found or placed."""


class InvalidSyncRequest(FanoutError):
    """A request lacks a required field or carries a malformed one."""

    kind = ErrorKind.INVALID_REQUEST


class TargetNotFound(FanoutError):
    """No fan-out target is configured for the requested table."""

    kind = ErrorKind.NOT_FOUND

    def __init__(self, schema: str, table: str) -> None:
        super().__init__(f"no fan-out target for {schema}.{table}")


class TooManyClients(FanoutError):
    """The target already serves max_clients Sync streams."""

    kind = ErrorKind.EXHAUSTED
    retryable = True


class ClientFellBehind(FanoutError):
    """The journal was pruned past the entries a live client still needed."""

    kind = ErrorKind.ABORTED
    retryable = True

    def __init__(self, client_id: str, cursor: int, oldest: int) -> None:
        super().__init__(
            f"client {client_id} fell behind: it needs journal entries after sequence {cursor} but the "
            f"oldest retained entry is {oldest}; reconnect to resync (a new Sync call sends a fresh snapshot)"
        )


class NotAvailableYet(FanoutError):
    """A protocol feature this release does not provide."""

    kind = ErrorKind.UNIMPLEMENTED


class JournalError(FanoutError):
    """An internal invariant of the journal would be broken (a bug, never bad input)."""


class EntriesPruned(FanoutError):
    """Entries after a sequence are no longer retained."""

    def __init__(self, after_sequence: int, oldest: int) -> None:
        super().__init__(f"journal entries after sequence {after_sequence} were pruned (oldest retained: {oldest})")
        self.oldest = oldest


class ClientTooSlow(FanoutError):
    """A client's send buffer is full and the policy is drop_disconnect (in any phase of its stream)."""

    kind = ErrorKind.EXHAUSTED
    retryable = True

    def __init__(self, client_id: str, max_size: int, sequence: int, phase: str = "live") -> None:
        then = ("sync again (its snapshot was not complete)" if phase == "snapshot"
                else f"resume after sequence {sequence}")
        during = "" if phase == "live" else f" during its {phase}"
        super().__init__(
            f"client {client_id} is too slow: its send buffer of {max_size} entries is full{during} "
            f"(client_buffer.policy = drop_disconnect); reconnect to {then}"
        )


class InstanceBehind(FanoutError):
    """The client resumes at a position this instance has not applied yet, and it did not get there in time."""

    kind = ErrorKind.UNAVAILABLE
    retryable = True

    def __init__(self, table: object, position: str, applied: str, waited: float) -> None:
        super().__init__(
            f"this instance has applied {table} up to {applied or 'nothing'}, behind the client's position "
            f"{position}, and did not reach it within {waited:g}s; connect to another instance or retry later"
        )


class TargetDrained(FanoutError):
    """The target was drained and its deadline passed: clients must use another instance."""

    kind = ErrorKind.UNAVAILABLE
    retryable = True


class SnapshotsNotConfigured(FanoutError):
    """The target has no snapshot store."""

    kind = ErrorKind.PRECONDITION_FAILED
