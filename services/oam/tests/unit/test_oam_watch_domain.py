"""WatchStatus in pure terms: the differences between two status snapshots, and the watcher filter."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import Action, TableId

from laredo_oam.domain.catalog import PipelineKey
from laredo_oam.domain.states import PipelineState as P
from laredo_oam.domain.states import ServiceState as S
from laredo_oam.domain.views import SourceView
from laredo_oam.domain.watch import (
    PipelineStateChanged,
    RowChanged,
    ServiceStateChanged,
    SourceLink,
    SourceLinkState,
    SourceStateChanged,
    StatusSnapshot,
    WatchFilter,
    changes_between,
    source_link,
)

USERS = PipelineKey("pg", TableId("public", "users"), "replication-fanout")
USERS_Q = PipelineKey("pg", TableId("public", "users"), "indexed-memory")
ORDERS = PipelineKey("pg", TableId("public", "orders"), "replication-fanout")
UP, DOWN = SourceLinkState(True, "up"), SourceLinkState(False, "down")


@pytest.mark.parametrize(("before", "after", "expected"), [
    (StatusSnapshot(S.STARTING, {USERS: P.INITIALIZING}), StatusSnapshot(S.STARTING, {USERS: P.INITIALIZING}), []),
    (StatusSnapshot(S.STARTING, {USERS: P.INITIALIZING}), StatusSnapshot(S.BASELINING, {USERS: P.BASELINING}),
     [PipelineStateChanged(USERS, P.INITIALIZING, P.BASELINING, 7), ServiceStateChanged(S.STARTING, S.BASELINING, 7)]),
    (StatusSnapshot(S.BASELINING, {USERS: P.BASELINING, ORDERS: P.STREAMING}),
     StatusSnapshot(S.STREAMING, {USERS: P.STREAMING, ORDERS: P.STREAMING}),
     [PipelineStateChanged(USERS, P.BASELINING, P.STREAMING, 7), ServiceStateChanged(S.BASELINING, S.STREAMING, 7)]),
    # A pipeline absent before counts as STOPPED.
    (StatusSnapshot(S.STARTING), StatusSnapshot(S.STARTING, {USERS: P.INITIALIZING}),
     [PipelineStateChanged(USERS, P.STOPPED, P.INITIALIZING, 7)]),
    # Sources first, then pipelines, then the service; a message change alone is no event.
    (StatusSnapshot(S.STREAMING, {USERS: P.STREAMING}, {"pg": UP}),
     StatusSnapshot(S.STARTING, {USERS: P.STOPPED}, {"pg": DOWN}),
     [SourceStateChanged("pg", SourceLink.DISCONNECTED, "down", 7), PipelineStateChanged(USERS, P.STREAMING, P.STOPPED, 7),
      ServiceStateChanged(S.STREAMING, S.STARTING, 7)]),
    (StatusSnapshot(S.STARTING, sources={"pg": UP}), StatusSnapshot(S.STARTING, sources={"pg": SourceLinkState(True, "x")}),
     []),
    (StatusSnapshot(S.STARTING), StatusSnapshot(S.STARTING, sources={"pg": UP}),
     [SourceStateChanged("pg", SourceLink.CONNECTED, "up", 7)]),
    (StatusSnapshot(S.STARTING, sources={"pg": UP}), StatusSnapshot(S.STARTING),
     [SourceStateChanged("pg", SourceLink.DISCONNECTED, "no ingest instance reports source pg any more", 7)]),
])
def test_changes_between_two_snapshots(before: StatusSnapshot, after: StatusSnapshot, expected: list) -> None:
    assert changes_between(before, after, 7) == expected


@pytest.mark.parametrize(("view", "connected", "words"), [
    (SourceView("pg"), False, "no ingest instance reports source pg"),
    (SourceView("pg", details={"phase": "streaming", "instance_id": "i1"}, reporting=True), True, "i1 reads"),
    (SourceView("pg", details={"phase": "baseline", "instance_id": "i1"}, reporting=True), True, "(baseline)"),
    (SourceView("pg", details={"phase": "paused", "instance_id": "i1"}, reporting=True), True, "(paused)"),
    (SourceView("pg", details={"phase": "reconnecting", "instance_id": "i1", "last_error": "boom"}, reporting=True),
     False, "is reconnecting: boom"),
    (SourceView("pg", details={"phase": "standby", "instance_id": "i2"}, reporting=True), False, "is standby"),
])
def test_a_source_is_connected_while_its_ingest_reads_it(view: SourceView, connected: bool, words: str) -> None:
    link = source_link(view)
    assert link.connected is connected and words in link.message, link


def row(key: PipelineKey) -> RowChanged:
    return RowChanged(key, Action.INSERT, "0/1:0", 5)


@pytest.mark.parametrize(("watch_filter", "admitted"), [
    (WatchFilter(), {USERS, USERS_Q, ORDERS}),
    (WatchFilter(tables=frozenset({TableId("public", "users")})), {USERS, USERS_Q}),
    (WatchFilter(pipelines=frozenset({USERS_Q, ORDERS})), {USERS_Q, ORDERS}),
    # Both filters apply: a pipeline must pass each.
    (WatchFilter(tables=frozenset({TableId("public", "users")}), pipelines=frozenset({USERS_Q, ORDERS})), {USERS_Q}),
    (WatchFilter(tables=frozenset({TableId("public", "orders")}), pipelines=frozenset({USERS})), set()),
])
def test_filters_apply_independently_and_never_to_service_or_source_events(watch_filter: WatchFilter,
                                                                           admitted: set) -> None:
    for key in (USERS, USERS_Q, ORDERS):
        assert watch_filter.admits(row(key)) is (key in admitted), key
        assert watch_filter.admits(PipelineStateChanged(key, P.BASELINING, P.STREAMING)) is (key in admitted), key
    assert watch_filter.admits(ServiceStateChanged(S.STARTING, S.BASELINING))
    assert watch_filter.admits(SourceStateChanged("pg", SourceLink.CONNECTED))
