"""Every service answers its errors with the status codes of one map (laredo_core.grpc_errors), by the kind
each error declares; unexpected errors are UNKNOWN with a scrubbed message."""

from __future__ import annotations

import grpc
import pytest

from laredo_core.coordination.ports import CoordinationUnavailable
from laredo_core.deadletters.model import DeadLetterStoreError, DeadLetterStoreUnavailable
from laredo_core.grpc_errors import CODES, status_for
from laredo_core.snapshots.errors import SnapshotCorrupt, SnapshotNotFound, SnapshotStoreUnavailable
from laredo_kernel.errors import ErrorKind, LaredoError, ProtocolError

from laredo_fanout.domain import errors as fanout
from laredo_oam.domain import errors as oam
from laredo_oam.entrypoints.grpc.errors import status_for as oam_status_for
from laredo_query.domain import errors as query

S = grpc.StatusCode


def test_every_kind_has_a_status_code() -> None:
    assert set(CODES) == set(ErrorKind)


@pytest.mark.parametrize(("error", "code"), [
    (fanout.InvalidSyncRequest("table is required"), S.INVALID_ARGUMENT),
    (fanout.TargetNotFound("public", "nope"), S.NOT_FOUND),
    (fanout.TooManyClients("full"), S.RESOURCE_EXHAUSTED),
    (fanout.ClientTooSlow("c1", 10, 5), S.RESOURCE_EXHAUSTED),
    (fanout.ClientFellBehind("c1", 5, 9), S.ABORTED),
    (fanout.SnapshotsNotConfigured("no store"), S.FAILED_PRECONDITION),
    (fanout.NotAvailableYet("later"), S.UNIMPLEMENTED),
    (fanout.JournalError("bug"), S.INTERNAL),
    (query.InvalidKey("bad key"), S.INVALID_ARGUMENT),
    (query.IndexUnavailable("building"), S.FAILED_PRECONDITION),
    (query.TableNotReady("loading"), S.UNAVAILABLE),
    (query.SubscriberOverflowed("too slow"), S.ABORTED),
    (query.ServiceStopping("bye"), S.UNAVAILABLE),
    (query.RowWithoutKey("no key"), S.INTERNAL),
    (oam.InvalidRequest("bad"), S.INVALID_ARGUMENT),
    (oam.NotFound("none"), S.NOT_FOUND),
    (oam.PreconditionFailed("not now"), S.FAILED_PRECONDITION),
    (oam.CommandTimedOut("slow"), S.DEADLINE_EXCEEDED),
    (oam.SnapshotStoreFailed("s3"), S.INTERNAL),
    (SnapshotNotFound("gone"), S.NOT_FOUND),
    (SnapshotCorrupt("bad bytes"), S.INTERNAL),
    (SnapshotStoreUnavailable("down"), S.INTERNAL),
    (CoordinationUnavailable("redis down"), S.UNAVAILABLE),
    (DeadLetterStoreUnavailable("nats down"), S.UNAVAILABLE),
    (DeadLetterStoreError("broken"), S.INTERNAL),
    (ProtocolError("corrupt"), S.INTERNAL),
    (LaredoError("anything else on purpose"), S.INTERNAL),
])
def test_each_error_kind_maps_to_its_status(error: LaredoError, code: grpc.StatusCode) -> None:
    assert status_for(error) == (code, str(error))


def test_an_unexpected_error_is_unknown_and_scrubbed() -> None:
    code, message = status_for(ValueError("connect to postgresql://app:hunter2@db/app failed"))
    assert code is S.UNKNOWN and "ValueError" in message and "hunter2" not in message


def test_oam_names_the_store_that_is_down() -> None:
    assert oam_status_for(CoordinationUnavailable("timeout")) == (
        S.UNAVAILABLE, "the coordination store (Redis) is unavailable: timeout")
    code, message = oam_status_for(DeadLetterStoreUnavailable("no responders"))
    assert code is S.UNAVAILABLE and message.startswith("the dead-letter store (NATS JetStream)")
