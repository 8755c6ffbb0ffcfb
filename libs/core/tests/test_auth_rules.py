"""Every RPC of every service name has a role; admin is exactly the mutating OAM RPCs; the tables a request
names are read the way the services read them."""

from __future__ import annotations

import pytest
from google.protobuf import descriptor_pool

from laredo.replication.v1 import replication_pb2 as rpb
from laredo.v1 import oam_pb2 as opb
from laredo.v1 import query_pb2 as qpb
from laredo_core.auth.identity import Role
from laredo_core.auth.rules import (API_RULES, OAM_RULES, OPEN_METHODS, REFLECTION_METHODS, method_rules,
                                    pipeline, readiness, schema_and_table, table_field, tables_list, watched)

ADMIN_OAM = {"ReloadTable", "ReloadAll", "PauseSync", "ResumeSync", "ResetSource", "DrainReplication",
             "CreateSnapshot", "RestoreSnapshot", "DeleteSnapshot", "PruneSnapshots", "ReplayDeadLetters",
             "PurgeDeadLetters", "StartReplay", "StopReplay"}


def test_every_method_of_every_service_name_has_a_rule() -> None:
    rules = method_rules()
    pool = descriptor_pool.Default()
    services = [s for names, _ in API_RULES for s in names]
    assert len(services) == 6
    for service in services:
        for method in pool.FindServiceByName(service).methods:
            assert f"/{service}/{method.name}" in rules, f"{service}/{method.name} has no role"
    assert all(rules[m].role is Role.READ for m in REFLECTION_METHODS)
    assert not OPEN_METHODS & set(rules)


def test_admin_is_exactly_the_mutating_oam_rpcs() -> None:
    admin = {m.rsplit("/", 1)[1] for m, r in method_rules().items() if r.role is Role.ADMIN}
    assert admin == ADMIN_OAM
    assert {n for n, r in OAM_RULES.items() if r.role is Role.ADMIN} == ADMIN_OAM


def test_a_proto_method_without_a_rule_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from laredo_core.auth import rules as module

    monkeypatch.setattr(module, "API_RULES", ((module.OAM_SERVICES, {k: v for k, v in OAM_RULES.items()
                                                                      if k != "PauseSync"}),))
    with pytest.raises(ValueError, match=r"without a rule \['PauseSync'\]"):
        module.method_rules()


@pytest.mark.parametrize("scope, request_message, tables", [
    (schema_and_table, qpb.GetRowRequest(schema="public", table="items"), {"public.items"}),
    (schema_and_table, qpb.GetRowRequest(table="items"), {"public.items"}),
    (schema_and_table, opb.GetTableStatusRequest(table="sales.orders"), {"sales.orders"}),
    (schema_and_table, rpb.SyncRequest(schema="s"), None),
    (table_field, opb.ListSnapshotsRequest(table="s.t"), {"s.t"}),
    (table_field, opb.PruneSnapshotsRequest(keep=1), None),
    (tables_list, opb.CreateSnapshotRequest(tables=["a", "s.b"]), {"public.a", "s.b"}),
    (tables_list, opb.CreateSnapshotRequest(), None),
    (pipeline, opb.ListDeadLettersRequest(pipeline_id="pg:public.items:indexed-memory"), {"public.items"}),
    (pipeline, opb.ListDeadLettersRequest(pipeline_id="malformed"), None),
    (pipeline, opb.PurgeDeadLettersRequest(), None),
    (watched, opb.WatchStatusRequest(tables=["a"], pipeline_ids=["pg:s.b:replication-fanout"]), {"public.a", "s.b"}),
    (watched, opb.WatchStatusRequest(tables=["a"], pipeline_ids=["bad"]), None),
    (watched, opb.WatchStatusRequest(), None),
    (readiness, opb.CheckReadyRequest(table="s.t", source="pg"), {"s.t"}),
    (readiness, opb.CheckReadyRequest(pipeline_id="pg:s.u:replication-fanout"), {"s.u"}),
    (readiness, opb.CheckReadyRequest(source="pg"), None),
])
def test_the_tables_a_request_names(scope, request_message, tables) -> None:  # noqa: ANN001
    assert scope(request_message) == (frozenset(tables) if tables is not None else None)
