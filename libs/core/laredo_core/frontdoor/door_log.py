"""What the front door's Envoy writes on stderr, turned into lines an operator can act on (pure)."""

from __future__ import annotations

import collections
import re

from laredo_core.frontdoor.settings import FrontDoorSettings

#: What Envoy's access log says of every call on a connection it closed because the client broke HTTP/2.
BROKEN_HTTP2 = "codec_error:The_user_callback_function_failed"
REMEMBERED = 1024  # peers whose broken connections are explained once: the most recent ones
_PEER = re.compile(r" from (\S+): ")
#: envoy_config._connection_log's line
_CONNECTION = re.compile(r"^connection from (?P<peer>\S+) closed after (?P<ms>\d+) ms: received (?P<received>\d+) "
                         r"bytes, protocol=(?P<protocol>\S+) tls-failure=(?P<tls>.*)$")


class DoorLog:
    """Envoy's lines in, lines to log out (None: nothing worth a line).

    - Calls the door refused pass as they are.
    - Envoy logs each call of a connection it closed for an HTTP/2 violation, with a detail only its authors
      read; the most common violation here is more calls at once than the door allows. One line per
      connection instead, saying so in plain words.
    - Every connection's end is logged by Envoy; kept are a failed TLS handshake and a connection that said
      nothing until limits.idle_timeout closed it. Connections that made calls, or left at once (a TCP probe),
      are not news.
    """

    def __init__(self, settings: FrontDoorSettings) -> None:
        self._max_streams = settings.max_concurrent_streams
        self._idle_ms = settings.idle_timeout * 1000
        self._broken: collections.OrderedDict[str, None] = collections.OrderedDict()

    def __call__(self, line: str) -> str | None:
        connection = _CONNECTION.match(line)
        if connection is not None:
            return self._connection_end(connection)
        if BROKEN_HTTP2 in line:
            return self._broken_connection(line)
        return line

    def _connection_end(self, end: re.Match[str]) -> str | None:
        peer, tls = end["peer"], end["tls"]
        if tls not in ("-", ""):
            return f"TLS handshake with {peer} failed: {tls}"
        seconds = int(end["ms"]) / 1000
        if end["received"] == "0" and int(end["ms"]) >= self._idle_ms * 0.9:
            return (f"connection from {peer} sent nothing in {seconds:.1f}s and was closed (limits.idle_timeout "
                    f"{self._idle_ms / 1000:g}s)")
        return None

    def _broken_connection(self, line: str) -> str | None:
        peer = _PEER.search(line)
        if peer is not None:
            if peer.group(1) in self._broken:
                return None
            self._broken[peer.group(1)] = None
            if len(self._broken) > REMEMBERED:
                self._broken.popitem(last=False)
        return (f"{line} -- the client broke HTTP/2 on this connection (most often: it opened more than "
                f"{self._max_streams} calls at once, the limit the door announced), so the door closed the "
                "connection and every call on it")
