"""Roles, the identities credentials prove, and the tables a call touches (pure)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_SCHEMA = "public"


class Role(enum.IntEnum):
    """What a credential may do; a higher role implies the lower ones (admin may read)."""

    READ = 1
    ADMIN = 2

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown role {text!r}: expected read or admin") from None


#: Every table: what a call that names no table (or a credential limited to none) covers.
ALL_TABLES: None = None


def table_name(schema: str, table: str) -> str:
    """"schema.table" as the services read a request: schema defaults to public, "s.t" in `table` is accepted."""
    if not schema and "." in table:
        schema, table = table.split(".", 1)
    return f"{schema or DEFAULT_SCHEMA}.{table}"


def parse_table_pattern(text: str) -> str:
    """A table a credential is limited to: "schema.table", "table" (schema public) or "schema.*"."""
    text = text.strip()
    if not text or text.startswith(".") or text.endswith(".") or text == "*":
        raise ValueError(f"invalid table {text!r}: expected schema.table, table or schema.*")
    return text if "." in text else f"{DEFAULT_SCHEMA}.{text}"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a credential proved the caller to be: `name` is safe to log and show (never the secret).

    `tables` is None for a credential that may touch every table, else the table patterns it is limited to.
    `role` is None when a verified credential carries no Laredo role (a JWT without the role claim).
    """

    name: str
    role: Role | None
    tables: frozenset[str] | None = ALL_TABLES
    kind: str = "token"  # token, jwt or client certificate

    def may(self, needed: Role) -> bool:
        return self.role is not None and self.role >= needed

    def covers(self, tables: frozenset[str] | None) -> bool:
        """Whether the call's tables (None: every table) are all within this credential's tables."""
        if self.tables is ALL_TABLES:
            return True
        if tables is ALL_TABLES or not tables:
            return False
        return not self.outside(tables)

    def outside(self, tables: frozenset[str]) -> list[str]:
        """The tables among `tables` this credential may not touch, sorted."""
        if self.tables is ALL_TABLES:
            return []
        return sorted(t for t in tables if not _matches(self.tables, t))

    def describe_tables(self) -> str:
        return "every table" if self.tables is None else ", ".join(sorted(self.tables))


def _matches(patterns: Iterable[str], table: str) -> bool:
    schema = table.split(".", 1)[0]
    return any(p == table or p == f"{schema}.*" for p in patterns)
