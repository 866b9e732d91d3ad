"""A server that went away gets a bounded window to come back (--reconnect-s, issue 52).

Why: a pod restarted behind a stable address cuts its connections and refuses new ones for a
few seconds, then serves again. A closed loop that sent its next request at once would find the
port closed each time and use up its plan in milliseconds (the run gave up 1.4 ms after the
cut, the server back 2 s later). So a closed-loop stream whose request could not connect waits,
trying a bare TCP connection every POLL_S, until the server listens again or the window since
the first refusal has passed (a server that listens but answers /health with 503, as llama.cpp
while it loads its model, is not back yet); then it sends its next request, which stops the run if the server
is still gone (run.error_limit_passed). An open loop keeps its schedule: a request due while the
server is away fails (counted by its kind, connect), as a user's would.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import urlsplit

from benchy.client.client import Client
from benchy.records import RequestRecord

POLL_S = 0.05  # how often a waiting stream tries to connect
CONNECT_TIMEOUT_S = 1.0
DEFAULT_RECONNECT_S = 10.0


def refused(rec: RequestRecord) -> bool:
    """The request found nothing listening (or no route): the server is away."""
    return rec.status == "error" and rec.error_kind == "connect"


class Outage:
    """Since when the server has refused this loop's requests (None: it answers)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.since: float | None = None

    def saw(self, rec: RequestRecord) -> None:
        if refused(rec) or (self.since is not None and rec.error_kind == "http_503"):  # still away
            self.since = self.since if self.since is not None else time.perf_counter()
        elif rec.error_kind not in ("reset", "disconnect"):  # an answer came: the server is back
            self.since = None

    async def wait(self, client: Client) -> None:
        """Returns once the server is back (it accepts a connection and its /health is no 503:
        llama.cpp listens while it loads its model, answering 503), or the window has passed."""
        while self.since is not None and time.perf_counter() < self.since + self.window_s:
            if await listening(client.settings.base_url) and await _ready(client):
                return
            await asyncio.sleep(POLL_S)


async def _ready(client: Client) -> bool:
    """Not a 503 at /health (a server without that page answers 404: ready as far as it says)."""
    page = await client.page("GET", client.url_of("/health", root=True), None, CONNECT_TIMEOUT_S, fresh=True)
    return page.failure is None and page.status != 503


async def listening(base_url: str) -> bool:
    """Whether a TCP connection to the base URL's host and port is accepted."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), CONNECT_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
