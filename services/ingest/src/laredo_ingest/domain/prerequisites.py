"""Start-up checks of the source server and the publication plan, as pure decisions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from laredo_core.changes import TableId

from laredo_ingest.domain.errors import (
    MissingReplicationPrivilege,
    PublicationError,
    TableNotFound,
    WalLevelNotLogical,
)


@dataclass(frozen=True, slots=True)
class ServerFacts:
    where: str  # host:port/dbname, never the password
    role: str
    wal_level: str
    is_superuser: bool
    has_replication: bool


def check_server(facts: ServerFacts) -> None:
    if facts.wal_level != "logical":
        raise WalLevelNotLogical(
            f"PostgreSQL at {facts.where} has wal_level = {facts.wal_level!r}; logical replication needs "
            "wal_level = logical: run ALTER SYSTEM SET wal_level = logical (or set it in postgresql.conf) "
            "and restart the server")
    if not (facts.is_superuser or facts.has_replication):
        raise MissingReplicationPrivilege(
            f"role {facts.role!r} on {facts.where} has neither REPLICATION nor SUPERUSER; run "
            f"ALTER ROLE {_quote_ident(facts.role)} REPLICATION as a superuser, or connect as a role that has it")


def check_tables_exist(wanted: Iterable[TableId], found: Iterable[TableId], where: str) -> None:
    missing = sorted(str(t) for t in set(wanted) - set(found))
    if missing:
        raise TableNotFound(
            f"configured table(s) {', '.join(missing)} do not exist in {where}; create them, or fix "
            "schema/table in the tables section of the configuration")


@dataclass(frozen=True, slots=True)
class PublicationState:
    all_tables: bool
    tables: frozenset[TableId]


@dataclass(frozen=True, slots=True)
class PublicationChange:
    create: bool = False
    add: tuple[TableId, ...] = ()
    drop: tuple[TableId, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.create or self.add or self.drop)


def plan_publication(name: str, current: PublicationState | None, wanted: Iterable[TableId], *,
                     manage: bool, source_id: str) -> PublicationChange:
    """What to run so the publication publishes exactly the configured tables (manage), or check it does."""
    wanted_set = frozenset(wanted)
    if current is None:
        if manage:
            return PublicationChange(create=True, add=_sorted(wanted_set))
        raise PublicationError(
            f"publication {name!r} does not exist; create it with CREATE PUBLICATION {_quote_ident(name)} "
            f"FOR TABLE {', '.join(str(t) for t in _sorted(wanted_set))}, or set "
            f"sources.{source_id}.publication.create = true")
    if current.all_tables:
        return PublicationChange()
    missing = wanted_set - current.tables
    if manage:
        return PublicationChange(add=_sorted(missing), drop=_sorted(current.tables - wanted_set))
    if missing:
        raise PublicationError(
            f"publication {name!r} does not publish {', '.join(str(t) for t in _sorted(missing))}; run "
            f"ALTER PUBLICATION {_quote_ident(name)} ADD TABLE ..., or set "
            f"sources.{source_id}.publication.create = true")
    return PublicationChange()


def _sorted(tables: Iterable[TableId]) -> tuple[TableId, ...]:
    return tuple(sorted(tables, key=str))


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
