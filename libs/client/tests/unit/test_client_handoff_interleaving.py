"""GoAway handoff, driven message by message: two fake streams of one history, interleaved in chosen orders.

The history: four rows, then changes 1..16 at positions pos(1)..pos(16). The draining ("old") stream installed a
snapshot at 10 and sends changes 11..16; the new stream starts with a full snapshot at some position (behind,
level with or ahead of the rows) or a DELTA, then its changes. The loop's rules are played as ReplicationLoop
plays them: once the new stream caught up the old one is closed and the new one promoted; an old stream that
ends first (a drain deadline) leaves the new one promoted. After every message: while both streams apply, the
rows' position never moves back, and always the rows are exactly the history up to their position (nothing
skipped); at the end they are the whole history, and the listeners heard exactly the difference.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from math import comb
from typing import Any

import pytest

from laredo.replication.v1 import replication_pb2 as pb
from laredo_client import ClientOptions
from laredo_client.client_replica import ClientReplica
from laredo_client.stats import ClientStats
from laredo_client.sync_stream import SyncStream
from libs.client.tests.scripted_server import entry, handshake, pos, row, snapshot

OPTIONS = ClientOptions(address="unused:1", schema="public", table="items")
LAST = 16  # changes 1..LAST
OLD_SNAPSHOT = 10  # the old stream's snapshot; it then sends 11..LAST
NEW_BASE = 100  # the new instance numbers its journal its own way


def change(n: int) -> pb.SyncResponse:
    """Change n of the history, carrying sequence n (the old instance's numbering)."""
    key = n % 4 + 1
    if n % 5 == 0:
        return entry(n, pos(n), "DELETE", old={"id": key})
    return entry(n, pos(n), "UPDATE", new=row(key, f"v{n}"))


def history(through: int) -> dict[int, dict[str, Any]]:
    rows = {i: row(i) for i in range(1, 5)}
    for n in range(1, through + 1):
        key = n % 4 + 1
        if n % 5 == 0:
            rows.pop(key, None)
        else:
            rows[key] = row(key, f"v{n}")
    return rows


def renumbered(message: pb.SyncResponse, sequence: int) -> pb.SyncResponse:
    copy = pb.SyncResponse()
    copy.CopyFrom(message)
    copy.journal_entry.sequence = sequence
    return copy


def new_stream_messages(start: str, at: int, current: int) -> list[pb.SyncResponse]:
    """`start`: "full" (a snapshot at `at`) or "delta" (resumed after `at`); the server was at `current`."""
    mode = "FULL_SNAPSHOT" if start == "full" else "DELTA"
    messages = [handshake(mode, current=NEW_BASE + current - at, resume=NEW_BASE)]
    if start == "full":
        messages += snapshot(list(history(at).values()), sequence=NEW_BASE, position=pos(at), batch=4)
    return messages + [renumbered(change(n), NEW_BASE + n - at) for n in range(at + 1, LAST + 1)]


@dataclass
class Handoff:
    """The client's replica, the old stream (primary, snapshot installed) and the new stream, as the loop holds
    them; `mirror` is the table as its listener heard it."""

    replica: ClientReplica
    old: SyncStream
    new: SyncStream
    mirror: dict[int, dict[str, Any]]
    old_open: bool = True
    _high: int = OLD_SNAPSHOT  # the highest position the rows held so far

    @classmethod
    def start(cls) -> Handoff:
        replica = ClientReplica()
        old = make_stream(replica, "old", primary=True)
        for message in [handshake("FULL_SNAPSHOT", current=OLD_SNAPSHOT, resume=OLD_SNAPSHOT),
                        *snapshot(list(history(OLD_SNAPSHOT).values()), sequence=OLD_SNAPSHOT,
                                  position=pos(OLD_SNAPSHOT))]:
            old.handle(message)
        mirror = {r["id"]: r for r in replica.rows.rows()}
        replica.listen(lambda before, after: _hear(mirror, before, after))
        return cls(replica, old, make_stream(replica, "new", primary=False), mirror)

    def old_sends(self, message: pb.SyncResponse) -> None:
        if self.old_open:
            self.old.handle(message)
            self._after_message()

    def new_sends(self, message: pb.SyncResponse) -> None:
        self.new.handle(message)
        self._after_message()

    def old_ends(self) -> None:
        """The draining server ended the old stream (its deadline): the new one carries on alone."""
        if self.old_open:
            self._close_old()

    def _after_message(self) -> None:
        self.check_consistent()
        if self.old_open and self.new.caught_up.is_set():
            self._close_old()  # ReplicationLoop._hand_off: the new stream caught up; old one closed

    def _close_old(self) -> None:
        self.old_open = False
        self.old.detach()
        self.new.promote()
        self.check_consistent()

    def applied(self) -> int:
        text = self.replica.cursor.source_position
        return int(text.split("/")[1], 16) - 0x1000

    def check_consistent(self) -> None:
        """While both streams apply, the rows' position never moves back. Once the old stream ended before the
        new one caught up, the new one is all there is: a snapshot of it that is behind then replaces the rows
        (a consistent, older state: the source may have been reset, and nothing else will carry them forward)."""
        applied = self.applied()
        if self.old_open:
            assert applied >= self._high, f"the rows' position moved back to {applied} from {self._high}"
        self._high = applied
        rows = {r["id"]: r for r in self.replica.rows.rows()}
        assert rows == history(applied), f"the rows are not the history up to their position {applied}"


def make_stream(replica: ClientReplica, name: str, *, primary: bool) -> SyncStream:
    return SyncStream(OPTIONS, replica, pb.SyncRequest(), name=name, stats=ClientStats(),
                      on_caught_up=lambda _: None, primary=primary)


def _hear(mirror: dict[int, dict[str, Any]], before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
    if before is not None:
        mirror.pop(before["id"], None)
    if after is not None:
        mirror[after["id"]] = after


def orders(old_count: int, new_count: int, limit: int, seed: int) -> Iterator[tuple[str, ...]]:
    """Every interleaving of the two streams' messages (each stream in its own order), or `limit` of them
    drawn with a fixed seed when there are more."""
    total = old_count + new_count
    if comb(total, old_count) <= limit:
        for positions in itertools.combinations(range(total), old_count):
            chosen = set(positions)
            yield tuple("o" if i in chosen else "n" for i in range(total))
        return
    rng = random.Random(seed)
    for _ in range(limit):
        positions = set(rng.sample(range(total), old_count))
        yield tuple("o" if i in positions else "n" for i in range(total))


def run(order: tuple[str, ...], old_messages: list[pb.SyncResponse], new_messages: list[pb.SyncResponse],
        old_ends: bool) -> Handoff:
    handoff = Handoff.start()
    pending_old, pending_new = list(old_messages), list(new_messages)
    for who in order:
        if who == "o":
            handoff.old_sends(pending_old.pop(0))
            if old_ends and not pending_old:
                handoff.old_ends()
        else:
            handoff.new_sends(pending_new.pop(0))
    return handoff


CASES = [  # (new stream start, its position, its server's current position at the handshake, old changes sent)
    ("full", 8, 9, LAST - OLD_SNAPSHOT),  # a snapshot behind the rows from the start
    ("full", 12, 13, LAST - OLD_SNAPSHOT),  # behind or ahead, depending on the order
    ("full", 14, LAST, LAST - OLD_SNAPSHOT),
    ("full", LAST, LAST, LAST - OLD_SNAPSHOT),  # level with or ahead of the rows
    ("full", 8, 9, 2),  # the old stream ends (drain deadline) after two changes
    ("full", 12, 12, 4),
    ("delta", OLD_SNAPSHOT, 12, LAST - OLD_SNAPSHOT),  # resumed by the position the rows had at the GoAway
    ("delta", OLD_SNAPSHOT, 12, 3),
]


@pytest.mark.parametrize(("start", "at", "current", "old_count"), CASES,
                         ids=[f"{s}@{a}-server@{c}-old-sends-{o}" for s, a, c, o in CASES])
def test_every_interleaving_of_a_handoff_keeps_the_rows_a_prefix_of_the_history(
        start: str, at: int, current: int, old_count: int) -> None:
    old_messages = [change(n) for n in range(OLD_SNAPSHOT + 1, OLD_SNAPSHOT + 1 + old_count)]
    old_ends = old_count < LAST - OLD_SNAPSHOT
    new_messages = new_stream_messages(start, at, current)
    played = 0
    for order in orders(len(old_messages), len(new_messages), limit=400, seed=at * 100 + old_count):
        handoff = run(order, old_messages, new_messages, old_ends)
        assert handoff.applied() == LAST and handoff.new.caught_up.is_set(), f"order {''.join(order)}"
        assert not handoff.old_open and handoff.new.primary
        assert {r["id"]: r for r in handoff.replica.rows.rows()} == history(LAST) == handoff.mirror
        played += 1
    assert played > 0


def test_a_full_snapshot_behind_the_rows_waits_in_a_shadow_until_it_passes_them() -> None:
    """The order that lost changes: the new snapshot (at 8) completes after the old stream applied 11-13."""
    handoff = Handoff.start()
    new_messages = new_stream_messages("full", 8, 9)
    for n in (11, 12, 13):
        handoff.old_sends(change(n))
    for message in new_messages[:4]:  # handshake, begin, rows, end: the snapshot at 8
        handoff.new_sends(message)
    assert handoff.applied() == 13, "a snapshot behind the rows does not replace them"
    for message in new_messages[4:9]:  # its changes 9-13, applied to the shadow
        handoff.new_sends(message)
    assert handoff.applied() == 13 and handoff.new.caught_up.is_set() and not handoff.old_open
    for n in (14, 15, 16):
        handoff.old_sends(change(n))  # the old stream was closed: nothing more from it
    for message in new_messages[9:]:
        handoff.new_sends(message)
    assert handoff.applied() == LAST and {r["id"]: r for r in handoff.replica.rows.rows()} == history(LAST)
    assert handoff.replica.cursor.sequence == NEW_BASE + LAST - 8, "the cursor follows the new stream"


def test_a_shadow_replaces_the_rows_when_the_old_stream_ends_first() -> None:
    """The new instance is behind and stays behind: once the old stream is gone, its state is the best there is,
    and its changes then carry the rows forward without a gap."""
    handoff = Handoff.start()
    for n in range(11, LAST + 1):
        handoff.old_sends(change(n))
    new_messages = new_stream_messages("full", 8, 9)
    for message in new_messages[:6]:  # snapshot at 8, then 9 and 10
        handoff.new_sends(message)
    assert handoff.applied() == LAST and not handoff.new.caught_up.is_set(), "no handoff while in a shadow"
    handoff.old_ends()
    assert handoff.applied() == OLD_SNAPSHOT, "the old stream gone, the shadow (at 10) holds the rows"
    for message in new_messages[6:]:
        handoff.new_sends(message)
    assert {r["id"]: r for r in handoff.replica.rows.rows()} == history(LAST) == handoff.mirror


def test_a_single_stream_installs_a_full_snapshot_whatever_its_position() -> None:
    """A re-sync on its own (no handoff) replaces the rows even when its position is lower (a source reset)."""
    replica = ClientReplica()
    first = make_stream(replica, "first", primary=True)
    for message in [handshake("FULL_SNAPSHOT", current=12, resume=12),
                    *snapshot(list(history(12).values()), sequence=12, position=pos(12))]:
        first.handle(message)
    first.detach()
    again = make_stream(replica, "again", primary=True)
    for message in [handshake("FULL_SNAPSHOT", current=5, resume=5),
                    *snapshot(list(history(5).values()), sequence=5, position=pos(5))]:
        again.handle(message)
    assert replica.cursor.source_position == pos(5) and again.caught_up.is_set()
