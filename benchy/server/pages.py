"""What benchy.server needs to read the server's side pages (identity, /metrics, a stated
capacity, a cache reset): a page source, declared here as a Protocol.

Why a Protocol: the client (benchy.client.client.Client.page) already has everything a side
page needs — the redirect policy, credentials to the base URL's origin only, TLS verification,
the proxy from the environment — over benchy's own HTTP/1.1 transport. Declared structurally,
the Client satisfies it without either package importing the other, and the parent process of
`benchy run` need not import aiohttp (a quarter of a CPU-second) just to read these pages.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol


class Page(Protocol):
    """One answer: `failure` is None when a response came (any status), else the transport's
    error kind (connect, timeout, reset, tls, proxy, redirect, too_large…) with `message`, one
    line, no secret in it."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...  # lower-case names

    @property
    def body(self) -> bytes: ...

    @property
    def failure(self) -> str | None: ...

    @property
    def message(self) -> str: ...


class PageSource(Protocol):
    async def page(
        self, method: str, url: str, payload: dict[str, Any] | None = None, timeout_s: float = ..., fresh: bool = ...
    ) -> Page:
        """The whole answer to one request (redirects followed); never raises for a transport
        failure. `fresh`: over a new connection."""
        ...


def outcome(page: Page) -> int | str:
    """The HTTP status, or the failure's kind: short enough to record (identity's `answered`)."""
    return page.failure or page.status


def text_of(page: Page) -> str | None:
    """The body of a 200 as text, else None."""
    if page.failure is not None or page.status != 200:
        return None
    return page.body.decode("utf-8", errors="replace")


def json_of(page: Page) -> object:
    """The body of a 200 as JSON; None when it is no 200 or not JSON."""
    text = text_of(page)
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None
