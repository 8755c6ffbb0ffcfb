"""Whether a snapshot's columns fit the table as it is now: the differences, in words, for refusals and warnings."""

from __future__ import annotations

from collections.abc import Sequence

from laredo_kernel.changes import ColumnInfo


def column_differences(snapshot_columns: Sequence[ColumnInfo], snapshot_key: Sequence[str],
                       current_columns: Sequence[ColumnInfo], current_key: Sequence[str]) -> list[str]:
    """Every difference between the snapshot's columns and key and the table's current ones ([] = they fit).

    Columns compare by name, type (name, OID, modifier) and NOT NULL; order does not matter for rows keyed by
    column name. A table that reported no columns yet cannot be compared and yields one difference saying so.
    """
    if not current_columns:
        return ["the table's current columns are not known yet (no stream message applied), so the snapshot's "
                "columns could not be checked"]
    differences = []
    before = {c.name: c for c in snapshot_columns}
    now = {c.name: c for c in current_columns}
    for name in before.keys() - now.keys():
        differences.append(f"column {name!r} is in the snapshot but no longer in the table")
    for name in now.keys() - before.keys():
        differences.append(f"column {name!r} is in the table but not in the snapshot (its rows will lack it)")
    for name in before.keys() & now.keys():
        old, new = before[name], now[name]
        if (old.type_oid, old.type_modifier) != (new.type_oid, new.type_modifier):
            differences.append(f"column {name!r} is {_type(old)} in the snapshot but {_type(new)} in the table")
        elif old.not_null != new.not_null:
            differences.append(f"column {name!r} is {'NOT NULL' if old.not_null else 'nullable'} in the snapshot "
                               f"but {'NOT NULL' if new.not_null else 'nullable'} in the table")
    if tuple(snapshot_key) != tuple(current_key):
        differences.append(f"the key is ({', '.join(snapshot_key)}) in the snapshot but ({', '.join(current_key)}) "
                           "in the table")
    return sorted(differences)


def _type(column: ColumnInfo) -> str:
    name = column.type_name or f"type {column.type_oid}"
    return f"{name}({column.type_modifier})" if column.type_modifier >= 0 else name
