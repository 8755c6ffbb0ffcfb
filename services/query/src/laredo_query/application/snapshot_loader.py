"""One snapshot's rows into a private IndexedTable, part by part, every part checked against the manifest.

Runs in a worker thread: the table it builds is seen by nobody until the caller installs it on the event loop,
so a snapshot that turns out damaged half-way changes nothing. Its JSON values are the rows' values as the
stream gives them, so a loaded table equals one built from the stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from laredo_kernel.position import Position
from laredo_core.snapshots.errors import SnapshotCorrupt
from laredo_core.snapshots.format import Checksum, SnapshotManifest, SnapshotPart, decode_part, verify_part

from laredo_query.domain.errors import RowWithoutKey
from laredo_query.domain.indexed_table import IndexedTable
from laredo_query.domain.indexes import IndexDefinition


class SnapshotLoader:
    """Feed it every part in manifest order (add_part), then call finish(); SnapshotCorrupt when anything does
    not match the manifest (a part's size or sha256, the checksum, the row count) or a row has no key. A row that
    would break a unique index (two rows sharing a `lookup_fields` value) is left out, as the stream's change
    would become a dead letter: `rejected` counts them, `first_rejection` says why."""

    def __init__(self, name: str, definitions: Sequence[IndexDefinition], manifest: SnapshotManifest) -> None:
        self.manifest = manifest
        self.indexed = IndexedTable(name, definitions)
        self.indexed.set_columns(manifest.columns, manifest.key_columns)
        self.position = Position.parse(manifest.source_position)
        self.rows = 0
        self.rejected = 0
        self.first_rejection = ""
        self._where = f"snapshot {manifest.snapshot_id} of {manifest.table}"
        self._checksum = Checksum()
        self._parts = 0

    def add_part(self, part: SnapshotPart, data: bytes) -> None:
        """Check one part and load its rows (the parts must come in manifest order)."""
        self._checksum.update(data)
        verify_part(part, data, self._where)
        self._parts += 1
        rows = decode_part(self.manifest.format, data, self._where)
        self.rows += len(rows)
        try:
            rejected = self.indexed.load(rows, self.position)
        except RowWithoutKey as exc:
            raise SnapshotCorrupt(f"{self._where}: {exc}") from None
        if rejected:
            self.rejected += len(rejected)
            self.first_rejection = self.first_rejection or str(rejected[0])

    def finish(self) -> IndexedTable:
        """The loaded table, once every part was added and the whole matches the manifest."""
        manifest = self.manifest
        if self._parts != len(manifest.parts):
            raise SnapshotCorrupt(f"{self._where}: {self._parts} of its {len(manifest.parts)} parts were loaded")
        if manifest.checksum and self._checksum.value != manifest.checksum:
            raise SnapshotCorrupt(f"{self._where}: checksum {self._checksum.value} differs from the manifest's "
                                  f"{manifest.checksum}")
        if self.rows != manifest.row_count:
            raise SnapshotCorrupt(f"{self._where}: {self.rows} rows, the manifest says {manifest.row_count}")
        return self.indexed
