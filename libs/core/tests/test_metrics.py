"""laredo_core.metrics: a service's figures scraped in Prometheus's text format, whatever goes wrong reading one."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client.parser import text_string_to_metric_families

from laredo_core.metrics import Figure, MetricsEndpoint, observe, per_table


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if not k.startswith("otel_")))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


async def test_figures_are_read_at_each_scrape_and_a_failing_one_leaves_the_others() -> None:
    rows = {"public.items": 3}

    def broken() -> list[tuple[float, dict[str, str]]]:
        raise RuntimeError("cannot read")

    async def refresh_fails() -> None:
        raise ConnectionError("store down")

    endpoint = MetricsEndpoint(refresh=refresh_fails)
    meter = MeterProvider(metric_readers=[endpoint.reader]).get_meter("test")
    observe(meter, [Figure("laredo.test.rows", "rows", lambda: per_table(rows.items())),
                    Figure("laredo.test.broken", "fails", broken),
                    Figure("laredo.test.sent", "sent", lambda: [(7, {})], counter=True)])
    first = samples(await endpoint.scrape())
    assert first[("laredo_test_rows", (("table", "public.items"),))] == 3
    assert first[("laredo_test_sent_total", ())] == 7
    assert not any(name.startswith("laredo_test_broken") for name, _ in first)
    assert first[("process_resident_memory_bytes", ())] > 0
    rows["public.items"] = 5
    assert samples(await endpoint.scrape())[("laredo_test_rows", (("table", "public.items"),))] == 5


async def test_each_endpoint_has_its_own_registry() -> None:
    one, two = MetricsEndpoint(), MetricsEndpoint()
    observe(MeterProvider(metric_readers=[one.reader]).get_meter("one"),
            [Figure("laredo.test.only.one", "one", lambda: [(1, {})])])
    MeterProvider(metric_readers=[two.reader])
    assert ("laredo_test_only_one", ()) in samples(await one.scrape())
    assert not any(name.startswith("laredo_test_only_one") for name, _ in samples(await two.scrape()))


def test_changes_applied_are_labelled_by_action_only() -> None:
    from laredo_kernel.changes import Action
    from laredo_kernel.table_replay import AppliedCounts

    from laredo_core.metrics import applied_by_action

    counts = AppliedCounts()
    counts.add(Action.INSERT)
    counts.add(Action.INSERT)
    counts.add(Action.DELETE)
    counts.last_commit_unix_us = 1_700_000_000_000_000
    assert applied_by_action([("public.items", counts)]) == [
        (2.0, {"table": "public.items", "action": "inserts"}), (0.0, {"table": "public.items", "action": "updates"}),
        (1.0, {"table": "public.items", "action": "deletes"}),
        (0.0, {"table": "public.items", "action": "truncates"})]
