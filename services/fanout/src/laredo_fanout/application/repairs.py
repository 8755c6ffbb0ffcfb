"""Journal entries for changes this instance makes without a stream change of its own (rebuilds, replays)."""

from __future__ import annotations

from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.domain.journal import JournalEntry
from laredo_fanout.domain.table_state import RowEffect
from laredo_fanout.ports import Clock, SyncEncoder


def journal_repair(replica: TableReplica, effect: RowEffect, encoder: SyncEncoder, clock: Clock, *, xid: int = 0,
                   commit_time_unix_us: int = 0) -> None:
    """Append `effect` with the next sequence at the replica's next repair position, which clients see as its
    source position (so resuming by position after the applied stream change delivers it)."""
    journal, now = replica.journal, clock.now()
    sequence, position = journal.next_sequence, replica.next_repair_position()
    commit_time = commit_time_unix_us or int(now * 1_000_000)
    encoded = encoder.journal_entry(sequence=sequence, position=str(position), commit_time_unix_us=commit_time,
                                    xid=xid, action=effect.action, old=effect.old, new=effect.new)
    journal.append(JournalEntry(sequence, position, encoded, now), now)
