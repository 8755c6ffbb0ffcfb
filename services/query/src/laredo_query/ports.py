"""What the query core needs from the outside world: one Protocol per role, each with its contract."""

from __future__ import annotations

from typing import Protocol

# The change feed port is shared with other services (contract: laredo_core.stream.feed.ChangeFeed);
# the feed delivers typed values here (json_values=False).
from laredo_core.stream.feed import ChangeFeed as ChangeFeed
from laredo_core.stream.feed import ChangeSink as ChangeSink
from laredo_core.stream.feed import FeedMessage as FeedMessage
from laredo_core.stream.feed import FeedSubscription as FeedSubscription


class Clock(Protocol):
    """Wall-clock time in Unix seconds (event timestamps when the source gives none)."""

    def now(self) -> float: ...
