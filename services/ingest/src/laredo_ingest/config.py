"""Ingest options from the shared Laredo settings: pick the source, its tables, its stream; read only by main.py."""

from __future__ import annotations

import re

from laredo_core.config import ENDPOINT_KEYS, SOURCE_COMMON_KEYS, LaredoSettings, service_reader
from laredo_core.errors import ConfigError

from laredo_ingest.application.options import IngestOptions
from laredo_ingest.domain.start_plan import SlotMode

_SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")


def ingest_options(settings: LaredoSettings, source_id: str | None = None) -> IngestOptions:
    """Options for the one source this process ingests; raises ConfigError listing every problem."""
    source_id = _choose_source(settings, source_id)
    source = settings.sources[source_id]
    problems: list[str] = []
    source_section = service_reader(source.options, f"sources.{source_id}", problems, known=SOURCE_COMMON_KEYS)
    source_section.section("publication").check_unknown(also_known=("name", "create"))
    source_section.check_unknown()
    service_reader(settings.ingest.options, "ingest", problems,
                   known=tuple(k for k in ENDPOINT_KEYS if k != "grpc")).check_unknown()
    tables = tuple(dict.fromkeys(t.table for t in settings.tables if t.source_id == source_id))
    if not tables:
        problems.append(f"tables: no table names source {source_id!r}; add one with source = {source_id}")
    if not _SLOT_NAME.fullmatch(source.slot_name):
        problems.append(f"sources.{source_id}.slot_name: {source.slot_name!r} is not a valid replication slot "
                        "name; use 1-63 lowercase letters, digits and '_'")
    if not source.publication_name:
        problems.append(f"sources.{source_id}.publication.name: must not be empty")
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
    )


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
