"""Fan-out's figures for Prometheus (laredo_core.metrics): its tables, journals and clients, read when scraped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from laredo_core.metrics import Figure, Sample, applied_by_action, per_table

from laredo_fanout.application.client_registry import ClientState
from laredo_fanout.application.table_replica import TableReplica
from laredo_fanout.application.targets import FanoutTargets


def fanout_figures(targets: FanoutTargets) -> list[Figure]:
    replicas = targets.replicas

    def each(value: Callable[[TableReplica], float]) -> Callable[[], list[Sample]]:
        return lambda: per_table((r.table, value(r)) for r in replicas)

    def clients_by_state() -> list[Sample]:
        samples: list[Sample] = []
        for replica in replicas:
            states = Counter(c.state for c in replica.clients.clients())
            samples += [(float(states[s]), {"table": str(replica.table), "state": s.value}) for s in ClientState]
        return samples

    return [
        Figure("laredo.fanout.rows", "Rows of the table this instance holds", each(lambda r: len(r.state))),
        Figure("laredo.fanout.ready", "1 when the table is loaded, caught up and not draining",
               each(lambda r: r.ready and r.drain is None)),
        Figure("laredo.fanout.stream.sequence", "JetStream sequence of the last message applied",
               each(lambda r: r.stream_sequence)),
        Figure("laredo.fanout.journal.entries", "Journal entries retained", each(lambda r: len(r.journal))),
        Figure("laredo.fanout.journal.sequence", "Sequence of the newest journal entry",
               each(lambda r: r.journal.current_sequence)),
        Figure("laredo.fanout.journal.oldest.sequence", "Sequence of the oldest journal entry retained",
               each(lambda r: r.journal.oldest_sequence)),
        Figure("laredo.fanout.journal.pins", "Pins keeping journal entries from being pruned (resumes, snapshots)",
               each(lambda r: r.journal.pins)),
        Figure("laredo.fanout.clients", "Sync streams, by state", clients_by_state),
        Figure("laredo.fanout.client.buffered", "Messages waiting in the clients' send buffers (all clients)",
               each(lambda r: sum(c.buffer_depth for c in r.clients.clients()))),
        Figure("laredo.fanout.client.lag.max", "Journal entries the furthest-behind client is behind",
               each(lambda r: max((c.lag(r.journal.current_sequence) for c in r.clients.clients()), default=0))),
        Figure("laredo.fanout.changes.applied", "Changes of transactions applied (baseline rows not), by action",
               lambda: applied_by_action((r.table, r.applied) for r in replicas), counter=True),
        Figure("laredo.fanout.deliveries", "Journal entries and snapshot rows written to clients",
               each(lambda r: r.clients.delivered), counter=True),
        Figure("laredo.fanout.dead.letters", "Changes this instance could not apply (dead letters)",
               each(lambda r: r.dead_letters), counter=True),
        Figure("laredo.fanout.position.regressions", "Messages at or before the position already applied",
               each(lambda r: r.position_regressions), counter=True),
    ]
