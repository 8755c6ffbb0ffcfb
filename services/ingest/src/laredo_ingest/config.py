"""Ingest options from the shared Laredo settings: pick the source, its tables, its stream; read only by main.py."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from laredo_kernel.changes import TableId
from laredo_core.config import ENDPOINT_KEYS, SOURCE_COMMON_KEYS, LaredoSettings, Reader, service_reader
from laredo_kernel.errors import ConfigError

from laredo_ingest.application.coordination import CoordinationSettings
from laredo_ingest.application.options import IngestOptions, KeylessPolicy
from laredo_ingest.domain.prerequisites import PublishedTableSpec
from laredo_ingest.domain.start_plan import SlotMode

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")


def ingest_options(settings: LaredoSettings, source_id: str | None = None) -> IngestOptions:
    """Options for the one source this process ingests; raises ConfigError listing every problem."""
    source_id = _choose_source(settings, source_id)
    source = settings.sources[source_id]
    problems: list[str] = []
    section = service_reader(source.options, f"sources.{source_id}", problems, known=SOURCE_COMMON_KEYS)
    extra = _source_extras(section)
    _read_ingest_section(settings, problems)[0].check_unknown()
    tables = tuple(dict.fromkeys(t.table for t in settings.tables if t.source_id == source_id))
    if not tables:
        problems.append(f"tables: no table names source {source_id!r}; add one with source = {source_id}")
    if not _SLOT_NAME.fullmatch(source.slot_name):
        problems.append(f"sources.{source_id}.slot_name: {source.slot_name!r} is not a valid replication slot "
                        "name; use 1-63 lowercase letters, digits and '_'")
    if not source.publication_name:
        problems.append(f"sources.{source_id}.publication.name: must not be empty")
    if extra["stream_in_progress"] and extra["protocol_version"] < 2 and section.has("stream_in_progress"):
        problems.append(f"sources.{source_id}.stream_in_progress: needs protocol_version = 2")
    if problems:
        raise ConfigError(problems)
    stream, reconnect = settings.stream, source.reconnect
    return IngestOptions(
        source_id=source_id, tables=tables, slot_mode=SlotMode(source.slot_mode), slot_name=source.slot_name,
        publication_name=source.publication_name, publication_create=source.publication_create,
        always_baseline=source.always_baseline, baseline_chunk_rows=source.baseline_chunk_rows,
        status_interval=source.status_interval, subject_prefix=stream.subject_prefix,
        max_batch_changes=stream.max_batch_changes, max_batch_bytes=stream.max_batch_bytes,
        stream_replicas=stream.replicas, stream_max_age=stream.max_age, stream_max_bytes=stream.max_bytes,
        duplicate_window=stream.duplicate_window, reconnect_initial=reconnect.initial_backoff,
        reconnect_max=reconnect.max_backoff, reconnect_multiplier=reconnect.multiplier,
        reconnect_max_attempts=reconnect.max_attempts,
        **{**extra, "stream_in_progress": extra["stream_in_progress"] and extra["protocol_version"] >= 2},
    )


def _source_extras(section: Reader) -> dict[str, Any]:
    """The keys of a source section only ingest reads (see docs/configuration.md for each default)."""
    extras = {
        "protocol_version": section.integer("protocol_version", 2, minimum=1, maximum=2),
        "stream_in_progress": section.boolean("stream_in_progress", True),
        "spool_memory": section.size("spool_memory", 64 * 1024 * 1024),
        "spool_dir": section.string("spool_dir", ""),
        "receive_timeout": section.duration("receive_timeout", 60.0),
        "slot_check_interval": section.duration("slot_check_interval", 10.0),
        "keyless_tables": _keyless_policy(section),
        "inactive_slot_wal_warning": section.size("inactive_slot_wal_warning", 1024 * 1024 * 1024),
        "rebaseline_on_schema_change": section.boolean("rebaseline_on_schema_change", True),
        "published": _publication_restrictions(section.section("publication")),
    }
    section.section("publication").check_unknown(also_known=("name", "create", "row_filters", "column_lists"))
    section.check_unknown()
    return extras


def _keyless_policy(section: Reader) -> KeylessPolicy:
    """`deadletter`, the former default, reads as `refuse`: a keyless table is no longer published at all."""
    value = section.string("keyless_tables", "refuse", choices=(*(p.value for p in KeylessPolicy), "deadletter"))
    return KeylessPolicy.FAIL if value == "fail" else KeylessPolicy.REFUSE


def _publication_restrictions(publication: Reader) -> tuple[PublishedTableSpec, ...]:
    """publication.row_filters { "schema.table" = "expr" } and publication.column_lists { "schema.table" = [..] }."""
    filters, columns = publication.raw("row_filters", {}), publication.raw("column_lists", {})
    specs: dict[TableId, PublishedTableSpec] = {}
    for key, what in (("row_filters", filters), ("column_lists", columns)):
        if not isinstance(what, Mapping):
            publication.problem(key, 'expected a section like { "public.items" = ... }')
            continue
        for name, value in what.items():
            try:
                table = TableId.parse(str(name))
            except ValueError as exc:
                publication.problem(f"{key}.{name}", str(exc) + ' (quote it: "public.items" = ...)')
                continue
            spec = specs.get(table, PublishedTableSpec(table))
            if key == "row_filters" and isinstance(value, str) and value.strip():
                specs[table] = dataclasses.replace(spec, row_filter=value.strip())
            elif key == "column_lists" and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                specs[table] = dataclasses.replace(spec, columns=tuple(value))
            else:
                publication.problem(f"{key}.{name}", "expected a non-empty SQL expression" if key == "row_filters"
                                    else "expected a non-empty list of column names")
    return tuple(specs[t] for t in sorted(specs, key=str))


def _choose_source(settings: LaredoSettings, source_id: str | None) -> str:
    known = ", ".join(settings.sources) or "none"
    if source_id is not None:
        if source_id not in settings.sources:
            raise ConfigError([f"--source {source_id!r}: no such source under sources (configured: {known})"])
        return source_id
    if not settings.sources:
        raise ConfigError(["sources: no source is configured; add one, e.g. sources { main { type = postgresql, "
                           "connection = \"host=... dbname=...\" } }"])
    if len(settings.sources) > 1:
        raise ConfigError([f"sources: {len(settings.sources)} sources are configured ({known}); one ingest process "
                           "serves one source: pass --source ID"])
    return next(iter(settings.sources))


def coordination_settings(settings: LaredoSettings) -> CoordinationSettings:
    problems: list[str] = []
    _, coordination = _read_ingest_section(settings, problems)
    if problems:
        raise ConfigError(problems)
    return coordination


def _read_ingest_section(settings: LaredoSettings, problems: list[str]) -> tuple[Reader, CoordinationSettings]:
    """The ingest section: leader_election / commands / heartbeats (default: on when a redis section is
    configured), lease timing, heartbeat interval."""
    section = service_reader(settings.ingest.options, "ingest", problems,
                             known=tuple(k for k in ENDPOINT_KEYS if k != "grpc"))
    has_redis = "redis" in settings.raw
    coordination = CoordinationSettings(
        leader_election=section.boolean("leader_election", has_redis),
        commands=section.boolean("commands", has_redis),
        heartbeats=section.boolean("heartbeats", has_redis),
        lease_ttl=section.duration("lease_ttl", 10.0),
        lease_renew_every=section.duration("lease_renew_every", 3.0),
        heartbeat_interval=section.duration("heartbeat_interval", 5.0),
    )
    if not 0 < coordination.lease_renew_every <= coordination.lease_ttl / 2:
        section.problem("lease_renew_every", f"must be positive and at most half of lease_ttl "
                                             f"({coordination.lease_ttl:g}s), so one failed renewal does not lose it")
    if coordination.heartbeat_interval <= 0:
        section.problem("heartbeat_interval", "must be positive")
    return section, coordination
