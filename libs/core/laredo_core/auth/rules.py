"""The role every RPC needs and the tables it touches, for every service name Laredo serves.

Rules are written once per API (OAM, Query, Replication) by method name and applied to the spec's and
upstream's service names alike; `method_rules()` checks them against the proto descriptors, so a method added
to a proto without a rule stops the service at start (and fails tests/test_auth_rules.py).

A rule's `tables` reads the request: the tables it names ("schema.table"), or None when it spans every table
(no table named, or it names things that are not tables: snapshots, sources, replays). A credential limited to
some tables may call only RPCs whose request names tables, all of them within its list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from laredo_core.auth.identity import ALL_TABLES, Role, table_name

TableScope = Callable[[Any], "frozenset[str] | None"]

OAM_SERVICES = ("laredo.v1.TableSyncOAM", "laredo.v1.LaredoOAMService")
QUERY_SERVICES = ("laredo.v1.TableSyncQuery", "laredo.v1.LaredoQueryService")
REPLICATION_SERVICES = ("laredo.replication.v1.TableSyncReplication",
                        "laredo.replication.v1.LaredoReplicationService")
#: Probes: open to every caller, so load balancers and orchestrators need no credential.
OPEN_METHODS = frozenset({"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"})
REFLECTION_METHODS = ("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo")


def every_table(_: Any) -> None:
    return ALL_TABLES


def schema_and_table(request: Any) -> frozenset[str] | None:
    """`schema` + `table` fields (schema defaults to public); every table when no table is named."""
    return frozenset({table_name(request.schema, request.table)}) if request.table else ALL_TABLES


def table_field(request: Any) -> frozenset[str] | None:
    """A `table` field holding "schema.table" (or "table", schema public)."""
    return frozenset({table_name("", request.table)}) if request.table.strip() else ALL_TABLES


def _pipeline_table(pipeline_id: str) -> str:
    """The table of a pipeline id "<source>:<schema>.<table>:<target>"; a malformed id names "" (no table)."""
    parts = pipeline_id.split(":")
    return parts[1] if len(parts) == 3 and "." in parts[1] else ""


def pipeline(request: Any) -> frozenset[str] | None:
    table = _pipeline_table(request.pipeline_id)
    return frozenset({table}) if table else ALL_TABLES


def _named(tables: Iterable[str], pipeline_ids: Iterable[str] = ()) -> frozenset[str] | None:
    named = [table_name("", t) for t in tables if t.strip()]
    from_pipelines = [_pipeline_table(p) for p in pipeline_ids]
    if "" in from_pipelines or not named + from_pipelines:
        return ALL_TABLES
    return frozenset(named + from_pipelines)


def tables_list(request: Any) -> frozenset[str] | None:
    """A repeated `tables` field; every table when empty."""
    return _named(request.tables)


def watched(request: Any) -> frozenset[str] | None:
    return _named(request.tables, request.pipeline_ids)


def readiness(request: Any) -> frozenset[str] | None:
    """CheckReady: one pipeline, else one table, else (a source or everything) every table."""
    return pipeline(request) if request.pipeline_id else table_field(request)


@dataclass(frozen=True, slots=True)
class MethodRule:
    """`tables` None: the method is about the API, not data (reflection), so table limits do not apply."""

    role: Role
    tables: TableScope | None = every_table


READ, ADMIN = Role.READ, Role.ADMIN
OAM_RULES: Mapping[str, MethodRule] = {
    "GetStatus": MethodRule(READ),
    "GetTableStatus": MethodRule(READ, schema_and_table),
    "GetPipelineStatus": MethodRule(READ, pipeline),
    "WatchStatus": MethodRule(READ, watched),
    "CheckReady": MethodRule(READ, readiness),
    "GetSourceInfo": MethodRule(READ),
    "ListInstances": MethodRule(READ),
    "ListTables": MethodRule(READ),
    "GetTableSchema": MethodRule(READ, schema_and_table),
    "ListSnapshots": MethodRule(READ, table_field),
    "InspectSnapshot": MethodRule(READ),
    "ListDeadLetters": MethodRule(READ, pipeline),
    "GetReplayStatus": MethodRule(READ),
    "ReloadTable": MethodRule(ADMIN, schema_and_table),
    "ReloadAll": MethodRule(ADMIN),
    "PauseSync": MethodRule(ADMIN),
    "ResumeSync": MethodRule(ADMIN),
    "ResetSource": MethodRule(ADMIN),
    "DrainReplication": MethodRule(ADMIN, schema_and_table),
    "CreateSnapshot": MethodRule(ADMIN, tables_list),
    "RestoreSnapshot": MethodRule(ADMIN),
    "DeleteSnapshot": MethodRule(ADMIN),
    "PruneSnapshots": MethodRule(ADMIN, table_field),
    "ReplayDeadLetters": MethodRule(ADMIN, pipeline),
    "PurgeDeadLetters": MethodRule(ADMIN, pipeline),
    "StartReplay": MethodRule(ADMIN),  # replays a snapshot into a pipeline: not confined to named tables
    "StopReplay": MethodRule(ADMIN),
}
QUERY_RULES: Mapping[str, MethodRule] = {
    name: MethodRule(READ, schema_and_table)
    for name in ("Lookup", "LookupAll", "GetRow", "ListRows", "CountRows", "Subscribe")
}
REPLICATION_RULES: Mapping[str, MethodRule] = {
    "Sync": MethodRule(READ, schema_and_table),
    "ListSnapshots": MethodRule(READ, schema_and_table),
    "FetchSnapshot": MethodRule(READ),  # a snapshot id names no table
    "GetReplicationStatus": MethodRule(READ, schema_and_table),
}
API_RULES: tuple[tuple[tuple[str, ...], Mapping[str, MethodRule]], ...] = (
    (OAM_SERVICES, OAM_RULES), (QUERY_SERVICES, QUERY_RULES), (REPLICATION_SERVICES, REPLICATION_RULES))


def method_rules() -> dict[str, MethodRule]:
    """"/package.Service/Method" -> rule, for every method of every service name; ValueError when a method
    of a proto has no rule (or a rule names no method)."""
    from google.protobuf import descriptor_pool

    from laredo.replication.v1 import replication_pb2  # noqa: F401 - registers the descriptors
    from laredo.v1 import oam_pb2, query_pb2  # noqa: F401

    pool = descriptor_pool.Default()
    rules: dict[str, MethodRule] = {m: MethodRule(READ, None) for m in REFLECTION_METHODS}
    for services, by_name in API_RULES:
        for service in services:
            methods = {m.name for m in pool.FindServiceByName(service).methods}
            if methods != set(by_name):
                raise ValueError(f"access rules and {service} differ: without a rule "
                                 f"{sorted(methods - set(by_name))}, rules for no method "
                                 f"{sorted(set(by_name) - methods)}; add them to laredo_core/auth/rules.py")
            rules.update({f"/{service}/{name}": by_name[name] for name in methods})
    return rules
