"""One rebuild of one live table: snapshot rows + stream tail into a private copy, then installed as a re-baseline.

Steps (RebuildPhase): wait until the live table applied the snapshot's last message; load the snapshot's rows
into a private copy (a worker thread); apply the stream tail after the snapshot up to what the live table had
applied, paced by the speed; catch up at full speed with what the live table applied meanwhile, until the copy
stands exactly where the live table stands, and at that instant (no await in between) hold the table's live
messages (GatedSink); install the copy's rows into the live table as a baseline generation (rows that differ
become changes, rows absent from the copy are deleted), a slice at a time; release the held messages, which
the live table then applies after the install. Nothing the feed delivers is lost or applied twice: the copy
stands at the live table's last message when the install starts, and later messages wait in the hold.

Stopping (cancelling) before the install leaves the live table untouched. Once the install started it always
finishes (a cancellation finishes it at once), so the live table never keeps half a baseline generation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from laredo_kernel.changes import ColumnInfo, TableId
from laredo_kernel.errors import LaredoError
from laredo_core.rebuild.gate import GatedSink, Hold
from laredo_core.rebuild.pacing import ReplaySpeed
from laredo_core.rebuild.records import RebuildPhase
from laredo_core.rebuild.tail import StreamTail
from laredo_core.snapshots.format import SnapshotManifest
from laredo_core.stream.feed import FeedMessage


class RebuildFailed(LaredoError):
    """A rebuild could not be carried out; the message says why and what to do. The live table is unchanged."""


class Scratch(Protocol):
    """The private copy of one table being rebuilt: nobody reads it but the rebuild."""

    @property
    def stream_sequence(self) -> int:
        """The stream sequence of the last message applied to the copy (the snapshot's at first)."""

    def apply(self, message: FeedMessage) -> int:
        """Apply one tail message exactly as the live table applies it; returns how many changes it carried."""


class Installation(Protocol):
    """Puts a rebuilt copy into the live table as one baseline generation, on the event loop."""

    @property
    def changes(self) -> int:
        """The differences installed so far (journal entries or subscriber events)."""

    @property
    def skipped(self) -> int:
        """Rows of the copy the live table could not take (logged; the live row stays)."""

    def step(self, limit: int) -> bool:
        """Install up to `limit` more rows (after the last one: delete the rows the copy lacks); True once done."""

    def finish(self) -> None:
        """Install everything left at once."""


class RebuildTarget(Protocol):
    """One table of a running fan-out or query instance, as a rebuild sees it."""

    @property
    def table(self) -> TableId: ...

    @property
    def source_id(self) -> str: ...

    def stream_sequence(self) -> int:
        """The stream sequence of the last message the live table applied (0: none)."""

    def columns(self) -> tuple[Sequence[ColumnInfo], Sequence[str]]:
        """The live table's current columns and key columns (empty before its first message)."""

    def installable(self) -> bool:
        """False while the live table is in the middle of an ingest baseline (its own generation is open)."""

    def scratch(self, manifest: SnapshotManifest, rows: list[dict[str, Any]]) -> Scratch:
        """A private copy holding the snapshot's rows (JSON-compatible values as stored); runs in a worker
        thread, so it must not touch the live table."""

    def install(self, scratch: Scratch, rebuild_id: str) -> Installation: ...


@dataclass(frozen=True, slots=True)
class RebuildLimits:
    hold_limit: int = 10_000  # live messages held during the install before it is finished at once
    install_slice: int = 2_000  # rows installed between two turns of the event loop
    catch_up_rounds: int = 8  # full-speed rounds before the live messages are held for the last one
    wait_timeout: float = 60.0  # seconds to wait for the live table to reach the snapshot or leave a baseline
    poll_interval: float = 0.1  # seconds between checks while waiting for that (not a hot path)


@dataclass
class Progress:
    """What a running rebuild has done so far (read by the instance's heartbeat)."""

    phase: RebuildPhase = RebuildPhase.WAITING
    rows_replayed: int = 0
    changes: int = 0
    skipped: int = 0


class Rebuild:
    def __init__(self, rebuild_id: str, target: RebuildTarget, manifest: SnapshotManifest, *, tail: StreamTail,
                 gate: GatedSink, speed: ReplaySpeed, limits: RebuildLimits | None = None) -> None:
        self.rebuild_id = rebuild_id
        self.target = target
        self.manifest = manifest
        self.speed = speed
        self.progress = Progress()
        self._tail = tail
        self._gate = gate
        self._limits = limits or RebuildLimits()

    async def run(self, rows: list[dict[str, Any]]) -> None:
        """Carry the rebuild out with the snapshot's (verified) rows; RebuildFailed or TailUnavailable if it
        cannot be, CancelledError when stopped."""
        progress = self.progress
        await self._wait_for_snapshot_position()
        progress.phase = RebuildPhase.LOADING
        scratch = await asyncio.to_thread(self.target.scratch, self.manifest, rows)
        progress.rows_replayed += len(rows)
        progress.phase = RebuildPhase.TAIL
        await self._read(scratch, self.target.stream_sequence(), paced=True)
        progress.phase = RebuildPhase.CATCHING_UP
        hold = await self._catch_up_and_hold(scratch)
        try:
            progress.phase = RebuildPhase.INSTALLING  # from here on it is never given up
            await self._install(scratch, hold)
        finally:
            self._gate.release(hold)
        progress.phase = RebuildPhase.DONE

    async def _install(self, scratch: Scratch, hold: Hold) -> None:
        installation = self.target.install(scratch, self.rebuild_id)
        hold.on_full = installation.finish
        try:
            while not installation.step(self._limits.install_slice):
                self.progress.changes = installation.changes
                await asyncio.sleep(0)  # let sessions send what was installed so far
        except BaseException:
            installation.finish()  # cancelled (shutdown): never leave half a generation behind
            raise
        finally:
            self.progress.changes, self.progress.skipped = installation.changes, installation.skipped

    async def _wait_for_snapshot_position(self) -> None:
        wanted = self.manifest.stream_sequence
        await self._wait(lambda: self.target.stream_sequence() >= wanted, lambda: (
            f"{self.target.table} has applied the stream up to sequence {self.target.stream_sequence()}, before "
            f"snapshot {self.manifest.snapshot_id}'s {wanted}; wait until the instance caught up, or restore an "
            "older snapshot"))

    async def _wait(self, done: Any, failure: Any) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._limits.wait_timeout
        while not done():
            if loop.time() >= deadline:
                raise RebuildFailed(failure())
            await asyncio.sleep(self._limits.poll_interval)

    async def _catch_up_and_hold(self, scratch: Scratch) -> Hold:
        """Bring the copy to the live table's last message and hold the live messages from that instant."""
        target, rounds = self.target, 0
        while True:
            live = target.stream_sequence()
            if scratch.stream_sequence >= live and target.installable():
                return self._gate.hold(target.table, self._limits.hold_limit)  # no await since the check
            if scratch.stream_sequence >= live:  # an ingest baseline is being applied: wait for its end
                await self._wait(lambda: target.installable() or target.stream_sequence() > live,
                                 lambda: f"{target.table} has been in the middle of an ingest baseline for "
                                         f"{self._limits.wait_timeout:g}s; restore once it has ended")
                continue
            rounds += 1
            if rounds > self._limits.catch_up_rounds and target.installable():
                return await self._last_round_held(scratch)
            await self._read(scratch, live, paced=False)

    async def _last_round_held(self, scratch: Scratch) -> Hold:
        """The live table moves faster than the rounds converge: hold it first, then read the rest."""
        hold = self._gate.hold(self.target.table, self._limits.hold_limit)
        try:
            await self._read(scratch, self.target.stream_sequence(), paced=False, hold=hold)
        except BaseException:
            self._gate.release(hold)
            raise
        if hold.overflowed:
            raise RebuildFailed(f"{self.target.table} received more than {self._limits.hold_limit} live messages "
                                "while the rebuild read the last of the stream tail; try again when the table "
                                "changes less often")
        return hold

    async def _read(self, scratch: Scratch, up_to: int, *, paced: bool, hold: Hold | None = None) -> None:
        previous_commit = 0
        async for message in self._tail.read(self.target.source_id, self.target.table, scratch.stream_sequence,
                                             up_to):
            commit = message.batch.commit_time_unix_us
            if paced and (gap := self.speed.gap(previous_commit, commit)) > 0:
                await asyncio.sleep(gap)
            previous_commit = commit or previous_commit
            self.progress.rows_replayed += scratch.apply(message)
            if hold is not None and hold.overflowed:
                return
        if scratch.stream_sequence < up_to and (hold is None or not hold.overflowed):
            raise RebuildFailed(f"the stream tail of {self.target.table} ended at sequence "
                                f"{scratch.stream_sequence}, before {up_to}, which the live table applied; was the "
                                "stream created again?")
