"""OAM's figures for Prometheus (laredo_core.metrics): the whole system as the coordination store reports it
(state, each source's lag, each pipeline's state, rows and dead letters), read anew at each scrape, so one
scrape of OAM gives an operator's view of every service."""

from __future__ import annotations

from collections.abc import Callable

from laredo_core.metrics import Figure, Sample

from laredo_oam.application.status_view import StatusView
from laredo_oam.domain.states import PipelineState, ServiceState
from laredo_oam.domain.views import PipelineView, SourceView, SystemStatus


class SystemFigures:
    """Figures of the last SystemStatus read (refresh() reads it; MetricsEndpoint.refresh before each scrape)."""

    def __init__(self, view: StatusView) -> None:
        self._view = view
        self._status: SystemStatus | None = None  # none read yet: no figure

    async def refresh(self) -> None:
        self._status = await self._view.system_status()

    def figures(self) -> list[Figure]:
        return [
            Figure("laredo.oam.system.state", "1 for the system's state as the coordination store reports it",
                   self._system_state),
            Figure("laredo.oam.source.lag.bytes", "WAL the source's slot has not confirmed",
                   lambda: self._sources(lambda s: s.lag_bytes)),
            Figure("laredo.oam.source.lag.seconds", "Seconds between a change's commit and ingest receiving it",
                   lambda: self._sources(lambda s: s.lag_seconds)),
            Figure("laredo.oam.source.reporting", "1 when an ingest instance heartbeats for the source",
                   lambda: self._sources(lambda s: s.reporting)),
            Figure("laredo.oam.pipeline.state", "1 for each pipeline's state", self._pipeline_states),
            Figure("laredo.oam.pipeline.rows", "Rows the pipeline's target holds",
                   lambda: self._pipelines(lambda p: p.row_count)),
            Figure("laredo.oam.pipeline.dead.letters", "Changes the pipeline's target instances could not apply",
                   lambda: self._pipelines(lambda p: p.dead_letter_count)),
            Figure("laredo.oam.pipeline.last.change", "Unix time of the pipeline's last change, in milliseconds",
                   lambda: self._pipelines(lambda p: p.last_change_unix_ms)),
        ]

    def _system_state(self) -> list[Sample]:
        if self._status is None:
            return []
        return [(float(self._status.state is state), {"state": state.value}) for state in ServiceState]

    def _sources(self, value: Callable[[SourceView], float]) -> list[Sample]:
        sources = self._status.sources if self._status is not None else ()
        return [(float(value(s)), {"source": s.source_id}) for s in sources]

    def _pipelines(self, value: Callable[[PipelineView], float]) -> list[Sample]:
        pipelines = self._status.pipelines if self._status is not None else ()
        return [(float(value(p)), {"pipeline": p.pipeline_id}) for p in pipelines]

    def _pipeline_states(self) -> list[Sample]:
        pipelines = self._status.pipelines if self._status is not None else ()
        return [(float(p.state is state), {"pipeline": p.pipeline_id, "state": state.value})
                for p in pipelines for state in PipelineState]
