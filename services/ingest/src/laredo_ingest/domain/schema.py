"""Table schemas as the stream describes them: catalog facts merged with pgoutput Relation messages."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass

from laredo_kernel.changes import ColumnInfo, TableId

from laredo_ingest.domain.pgoutput import Relation

TEXT_OID = 25
_MAX_DOMAIN_DEPTH = 32


class ReplicaIdentity(enum.Enum):
    """How the table identifies rows in UPDATE/DELETE (pg_class.relreplident)."""

    DEFAULT = "d"
    NOTHING = "n"
    FULL = "f"
    INDEX = "i"


@dataclass(frozen=True, slots=True)
class TableSchema:
    """One table: the columns every stream message of it carries, in tuple order."""

    table: TableId
    relation_id: int
    columns: tuple[ColumnInfo, ...]
    replica_identity: ReplicaIdentity
    #: Rows can be told apart downstream: a primary key, a replica identity index, or FULL identity.
    #: Derived once (it is read for every published message).
    has_usable_key: bool = dataclasses.field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        usable = self.replica_identity is not ReplicaIdentity.NOTHING and any(c.is_identity_key for c in self.columns)
        object.__setattr__(self, "has_usable_key", usable)

    @property
    def signature(self) -> tuple[object, ...]:
        """What a Relation message can change: column names, types, modifiers, key flags, identity."""
        return (self.replica_identity,
                tuple((c.name, c.type_oid, c.type_modifier, c.is_identity_key) for c in self.columns))


def key_problem(schema: TableSchema) -> str:
    """Why a table has no usable key, with the fix; empty when it has one."""
    if schema.has_usable_key:
        return ""
    why = ("REPLICA IDENTITY NOTHING" if schema.replica_identity is ReplicaIdentity.NOTHING
           else "no primary key and REPLICA IDENTITY DEFAULT")
    return (f"table {schema.table} has {why}: downstream cannot tell its rows apart, and PostgreSQL rejects "
            "UPDATE and DELETE on it while a publication publishes them; add a primary key, or run ALTER TABLE "
            f"{schema.table} REPLICA IDENTITY FULL (or USING INDEX <unique index>)")


@dataclass(frozen=True, slots=True)
class CatalogType:
    """The pg_type facts needed to find the type whose text form a value uses."""

    oid: int
    name: str
    kind: str  # typtype: b base, d domain, e enum, c composite, r range, m multirange, p pseudo
    category: str  # typcategory: 'A' for arrays
    element_oid: int  # typelem
    base_oid: int  # typbasetype (domains)


def resolve_base_type(type_oid: int, types: Mapping[int, CatalogType]) -> int:
    """Element type for arrays, base type for domains, text for enums (resolved through nesting); 0 = itself."""
    found = types.get(type_oid)
    if found is None:
        return 0
    target = _value_type(found.element_oid, types) if found.category == "A" and found.element_oid else (
        _value_type(type_oid, types))
    return 0 if target == type_oid else target


def _value_type(type_oid: int, types: Mapping[int, CatalogType]) -> int:
    for _ in range(_MAX_DOMAIN_DEPTH):
        found = types.get(type_oid)
        if found is None:
            return type_oid
        if found.kind == "e":
            return TEXT_OID
        if found.kind != "d" or not found.base_oid:
            return type_oid
        type_oid = found.base_oid
    return type_oid


def identity_key_flags(columns: tuple[ColumnInfo, ...], identity: ReplicaIdentity,
                       index_columns: frozenset[str]) -> tuple[ColumnInfo, ...]:
    """Mark the replica identity key the way pgoutput's Relation message does (FULL: every column)."""
    def is_key(column: ColumnInfo) -> bool:
        if identity is ReplicaIdentity.FULL:
            return True
        if identity is ReplicaIdentity.DEFAULT:
            return column.primary_key_ordinal > 0
        if identity is ReplicaIdentity.INDEX:
            return column.name in index_columns
        return False

    return tuple(dataclasses.replace(c, is_identity_key=is_key(c)) for c in columns)


def restrict_columns(schema: TableSchema, published: tuple[str, ...]) -> TableSchema:
    """The schema with only the published columns (a publication's column list), in table order."""
    wanted = set(published)
    return dataclasses.replace(schema, columns=tuple(c for c in schema.columns if c.name in wanted))


def schema_from_relation(relation: Relation, catalog: TableSchema | None,
                         type_names: Mapping[int, str]) -> TableSchema:
    """The schema for stream messages: the Relation's columns (its order, types and key flags are what the
    tuples follow), enriched with catalog facts (not null, primary key, type name, base type) by name."""
    known = {c.name: c for c in catalog.columns} if catalog else {}
    columns = []
    for rc in relation.columns:
        column = known.get(rc.name)
        if column is not None and column.type_oid == rc.type_oid:
            column = dataclasses.replace(column, type_modifier=rc.type_modifier, is_identity_key=rc.is_key)
        else:
            column = ColumnInfo(rc.name, rc.type_oid, type_names.get(rc.type_oid, ""), rc.type_modifier,
                                is_identity_key=rc.is_key)
        columns.append(column)
    return TableSchema(
        table=TableId(relation.namespace, relation.name),
        relation_id=relation.relation_id,
        columns=tuple(columns),
        replica_identity=ReplicaIdentity(relation.replica_identity),
    )
