"""Error kinds a failed request is recorded with (one table, `failure_of`, for both transports):
http_<status>, connect (nothing listens / DNS), proxy (the proxy is unreachable or refused),
tls (certificate not trusted), reset (connection dropped before the response began),
disconnect (dropped mid-response), stall (silence > --stall-timeout), timeout (> --timeout),
redirect (too many, or a POST moved by 301/302/303), not_sse (a body that is not an event
stream), bad_stream (an event stream without a single event), server_error (an `error` event in
the stream), client_error, internal (a benchy bug; report it). A request no measurement rides
on (the model list, calibration) raises ServerError instead, or TransientError where another
try may succeed."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from typing import Any

from benchy.client.connect import HttpFailure
from benchy.client.settings import ClientSettings


class ServerError(Exception):
    """The server could not be used at all (down, wrong URL, model not served). One line."""


class TransientError(ServerError):
    """A failure worth another try (5xx, 429, a dropped connection, a broken body)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


_DROPPED = "reset|disconnect"  # reset before the response began, disconnect after


def _named(exc: BaseException, settings: ClientSettings) -> str:
    return f"{type(exc).__name__}: {exc}"


# (exception type, error kind, message), first match wins: subclasses before their bases.
Failures = tuple[tuple[type | tuple[type, ...], str, Callable[[Any, ClientSettings], str]], ...]
_TIMEOUT: Failures = (
    (asyncio.TimeoutError, "timeout", lambda e, s: f"request exceeded {s.timeout_s:g} s (--timeout)"),
)
_INTERNAL: Failures = ((Exception, "internal", _named),)  # a benchy bug must not end the run nor lose the request


@functools.lru_cache(maxsize=1)
def _aiohttp_failures() -> Failures:
    import aiohttp

    return (
        (aiohttp.ConnectionTimeoutError, "connect", lambda e, s: f"no connection within {s.timeout_s:g} s"),
        (aiohttp.ServerTimeoutError, "stall", lambda e, s: f"no data for {s.stall_timeout_s:g} s (--stall-timeout)"),
        *_TIMEOUT,
        (
            aiohttp.ClientConnectorCertificateError,
            "tls",
            lambda e, s: f"certificate not trusted: {e.certificate_error}",
        ),
        (
            aiohttp.ClientProxyConnectionError,
            "proxy",
            lambda e, s: f"proxy {e.host}:{e.port}: {e.os_error.strerror or e}",
        ),
        (aiohttp.ClientHttpProxyError, "proxy", lambda e, s: f"proxy refused the tunnel: HTTP {e.status}"),
        (aiohttp.ClientConnectorError, "connect", lambda e, s: str(e.os_error.strerror or e)),
        ((aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError), _DROPPED, _named),
        (aiohttp.ClientError, "client_error", _named),
        *_INTERNAL,
    )


def _failures() -> Failures:
    """The table: aiohttp's exceptions only where aiohttp was imported (none can exist else)."""
    return _aiohttp_failures() if "aiohttp" in sys.modules else _TIMEOUT + _INTERNAL


def failure_of(exc: BaseException, settings: ClientSettings, began: bool) -> tuple[str, str]:
    """(error kind, message) of an exception either transport raised; `began`: the response
    head had arrived. benchy.client.http1 names its own kinds."""
    if isinstance(exc, HttpFailure):
        return exc.kind, exc.message
    for types, kind, message in _failures():
        if isinstance(exc, types):
            if kind == _DROPPED:
                kind = "disconnect" if began else "reset"
            return kind, message(exc, settings)
    raise exc  # BaseException: cancellation, Ctrl-C


def server_error(where: str, kind: str, message: str) -> ServerError:
    """A failure of a request no measurement rides on (the model list, calibration), worded
    for the one-line error the user sees; TransientError when another try may succeed."""
    if kind in ("connect", "proxy"):
        return ServerError(f"cannot reach the server at {where}: {message}")
    if kind == "tls":
        return ServerError(f"{where}: TLS {message}; pass --insecure to skip verification")
    if kind == "timeout":
        return ServerError(f"{where}: no answer: {message}")
    if kind in ("stall", "reset", "disconnect", "client_error", "bad_json"):
        return TransientError(f"{where}: {message}")
    return ServerError(f"{where}: {message}")
