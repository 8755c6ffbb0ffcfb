"""Query's figures for Prometheus (laredo_core.metrics): its tables, reads and subscribers, read when scraped."""

from __future__ import annotations

from collections.abc import Callable

from laredo_core.metrics import Figure, Sample, applied_by_action, per_table

from laredo_query.application.query_table import QueryTable


def query_figures(tables: list[QueryTable]) -> list[Figure]:
    def each(value: Callable[[QueryTable], float]) -> Callable[[], list[Sample]]:
        return lambda: per_table((t.table, value(t)) for t in tables)

    return [
        Figure("laredo.query.rows", "Rows of the table this instance holds", each(lambda t: len(t.indexed))),
        Figure("laredo.query.ready", "1 when the table is loaded, caught up, indexed and not stale",
               each(lambda t: t.ready)),
        Figure("laredo.query.reads", "Lookup, LookupAll, GetRow, ListRows and CountRows calls served",
               each(lambda t: t.reads), counter=True),
        Figure("laredo.query.changes.applied", "Changes of transactions applied (baseline rows not), by action",
               lambda: applied_by_action((t.table, t.applied) for t in tables), counter=True),
        Figure("laredo.query.subscribers", "Open Subscribe streams", each(lambda t: len(t.subscribers))),
        Figure("laredo.query.subscriber.events.dropped", "Subscribe events dropped for subscribers that lagged",
               each(lambda t: t.subscribers.dropped), counter=True),
        Figure("laredo.query.baselines", "Baselines completed", each(lambda t: t.baselines_completed),
               counter=True),
        Figure("laredo.query.dead.letters", "Changes this instance could not apply (dead letters)",
               each(lambda t: t.dead_letters), counter=True),
        Figure("laredo.query.position.regressions", "Messages at or before the position already applied",
               each(lambda t: t.position_regressions), counter=True),
    ]
