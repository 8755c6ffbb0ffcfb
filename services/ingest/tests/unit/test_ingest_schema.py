"""Base-type resolution (arrays, domains, enums) and replica identity flags from the catalog."""

from __future__ import annotations

import pytest

from laredo_kernel.changes import ColumnInfo

from laredo_ingest.domain.backoff import Backoff
from laredo_ingest.domain.schema import CatalogType, ReplicaIdentity, identity_key_flags, resolve_base_type

TYPES = {t.oid: t for t in [
    CatalogType(23, "int4", "b", "N", 0, 0),
    CatalogType(1007, "_int4", "b", "A", 23, 0),
    CatalogType(90001, "mood", "e", "E", 0, 0),
    CatalogType(90002, "_mood", "b", "A", 90001, 0),
    CatalogType(90003, "posint", "d", "N", 0, 23),
    CatalogType(90004, "small_posint", "d", "N", 0, 90003),
    CatalogType(90005, "_small_posint", "b", "A", 90004, 0),
    CatalogType(600, "point", "b", "G", 701, 0),
]}


@pytest.mark.parametrize(("oid", "base"), [
    (23, 0), (1007, 23), (90001, 25), (90002, 25), (90003, 23), (90004, 23), (90005, 23), (600, 0), (42, 0),
])
def test_base_type(oid: int, base: int) -> None:
    assert resolve_base_type(oid, TYPES) == base


COLUMNS = (ColumnInfo("a", 23, primary_key_ordinal=2), ColumnInfo("b", 23, primary_key_ordinal=1),
           ColumnInfo("c", 25))


@pytest.mark.parametrize(("identity", "keys"), [
    (ReplicaIdentity.DEFAULT, [True, True, False]),
    (ReplicaIdentity.FULL, [True, True, True]),
    (ReplicaIdentity.INDEX, [False, False, True]),
    (ReplicaIdentity.NOTHING, [False, False, False]),
])
def test_identity_key_flags_match_what_pgoutput_sends(identity: ReplicaIdentity, keys: list[bool]) -> None:
    flagged = identity_key_flags(COLUMNS, identity, frozenset({"c"}))
    assert [c.is_identity_key for c in flagged] == keys


def test_backoff_grows_caps_jitters_and_counts_attempts() -> None:
    backoff = Backoff(1.0, 8.0, 2.0, max_attempts=5)
    delays = [backoff.next_delay() for _ in range(5)]
    for delay, bound in zip(delays, [1, 2, 4, 8, 8]):
        assert bound / 2 <= delay <= bound
    assert backoff.exhausted
    backoff.reset()
    assert not backoff.exhausted and backoff.next_delay() <= 1.0
