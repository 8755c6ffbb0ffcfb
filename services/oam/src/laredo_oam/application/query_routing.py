"""One address for operators: Query calls made to OAM's port go on to the query instances that are ready.

Every `refresh` the query instances' heartbeats are read from the coordination store; those reporting
`ready` and an `address` become the front door's query endpoints. While the store cannot be reached the last
known set stays in place (logged once), so an outage of Redis does not cut operators off from Query.
"""

from __future__ import annotations

import asyncio
import logging

from laredo_core.coordination.ports import CoordinationStore, CoordinationUnavailable

from laredo_oam.ports import QueryRoutes

log = logging.getLogger(__name__)

QUERY_SERVICE = "query"


class QueryRouting:
    def __init__(self, store: CoordinationStore, routes: QueryRoutes, *, refresh: float = 2.0) -> None:
        self._store, self._routes, self._refresh = store, routes, refresh
        self.addresses: list[str] | None = None  # the set last published (None: nothing yet)

    async def refresh_once(self) -> None:
        addresses = sorted({str(i.status["address"]) for i in await self._store.instances(QUERY_SERVICE)
                            if i.status.get("ready") is True and i.status.get("address")})
        if addresses != self.addresses:
            await self._routes.publish(addresses)
            if addresses:
                log.info("Query calls on the OAM address go to %s", ", ".join(addresses))
            else:
                # at start-up (none yet) this is news, not trouble; losing the last ready instance is trouble
                log.log(logging.WARNING if self.addresses else logging.INFO,
                        "no query instance is ready: Query calls on the OAM address answer UNAVAILABLE until "
                        "one is (start laredo-query, or call a query instance directly)")
            self.addresses = addresses

    async def run(self) -> None:
        unreachable = False
        while True:
            try:
                await self.refresh_once()
                if unreachable:
                    log.info("coordination store reachable again: Query routing follows the ready instances")
                unreachable = False
            except CoordinationUnavailable as exc:
                if not unreachable:
                    log.warning("cannot read the query instances (%s); Query calls on the OAM address keep "
                                "going to %s", exc, ", ".join(self.addresses or []) or "no instance")
                unreachable = True
            await asyncio.sleep(self._refresh)
