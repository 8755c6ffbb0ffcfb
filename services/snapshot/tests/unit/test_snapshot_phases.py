"""The running compaction's phase, as the snapshot service's status reports it for progress displays."""

from __future__ import annotations

from laredo_snapshot.adapters.memory import RecordingObserver
from laredo_snapshot.application.phases import PhaseTracker


def test_the_tracker_remembers_the_last_phase_and_passes_everything_on() -> None:
    inner = RecordingObserver()
    tracker = PhaseTracker(inner)
    assert tracker.report() == {}
    with tracker.phase("snapshot.compact", {"laredo.table": "public.items"}):
        assert tracker.report() == {}  # the whole compaction is not one of its phases
        with tracker.phase("snapshot.read_tail", {}):
            pass
        with tracker.phase("snapshot.fold", {}) as span:
            span.set("laredo.rows", 3)
            assert tracker.report() == {"compacting_phase": "fold", "compacting_step": 2, "compacting_steps": 6}
    tracker.record("rows", 3.0, {"table": "public.items"})
    assert inner.names() == ["snapshot.compact", "snapshot.read_tail", "snapshot.fold"]
    assert inner.measurements == [("rows", 3.0, {"table": "public.items"})]
    tracker.reset()
    assert tracker.report() == {}
