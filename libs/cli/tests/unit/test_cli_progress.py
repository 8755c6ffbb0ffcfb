"""Long work in progress as the CLI shows it: baselines, restores and replays, compactions."""

from __future__ import annotations

from laredo_cli.progress import Work, bar, describe, in_progress

NOW = 1_800_000_000_000


def test_a_running_baseline_shows_rows_of_the_estimate_rate_and_eta() -> None:
    report = {"baseline": {"running": True, "table": "public.items", "rows": 250_000, "expected_rows": 1_000_000,
                           "rows_per_second": 50_000.0, "eta_seconds": 15.0}}
    (work,) = in_progress([("pg", report), ("other", {"baseline": {"running": False}})], [], NOW)
    assert work == Work("baseline", "public.items (source pg)", 250_000, 1_000_000, 50_000.0, 15.0, fraction=0.25)
    assert describe(work) == ("baseline   public.items (source pg)  [######..................]  25%  "
                              "250,000/1,000,000 rows, 50,000 rows/s, ETA 15s")


def test_restores_and_replays_show_their_phase_and_compactions_how_long_they_run() -> None:
    fanout = {"service": "fanout", "instance_id": "f1", "status": {"replays": {
        "r1": {"kind": "restore", "table": "public.items", "state": "running", "phase": "tail",
               "rows_replayed": 5_000, "started_unix_ms": NOW - 10_000},
        "r0": {"kind": "replay", "table": "public.items", "state": "completed", "phase": "done"}}}}
    snapshot = {"service": "snapshot", "instance_id": "s1",
                "status": {"compacting": "public.items", "compacting_since_unix_ms": NOW - 75_000,
                           "compacting_phase": "fold", "compacting_step": 2, "compacting_steps": 6}}
    restore, compaction = in_progress([], [fanout, snapshot, {"service": "query", "status": {}}], NOW)
    assert (restore.kind, restore.what, restore.rows, restore.rate, restore.step) == (
        "restore", "public.items on fanout f1", 5_000, 500.0, "tail (3/6)")
    assert describe(restore) == ("restore    public.items on fanout f1  [##########..............]  40%  "
                                 "5,000 rows, 500 rows/s, for 10s, tail (3/6)")
    assert describe(compaction) == ("compaction public.items on snapshot s1  [####....................]  17%  "
                                    "for 1m15s, fold (2/6)")


def test_bars_stay_within_their_width() -> None:
    assert bar(0.0) == "[........................]   0%"
    assert bar(1.5) == "[########################] 100%"
    assert bar(None, width=4) == "[....]   ?"
