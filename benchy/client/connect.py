"""Reaching a server: the transports' failure type, the proxy route to an origin, TLS, and the
plain-HTTP check of an https:// URL. Shared by both transports (http1.py, aiohttp_pool.py).

Why apart from http1.py: none of it is the per-byte path that http1.py keeps short; it runs
once a connection, and aiohttp_pool.py and the client's settings use it as well.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import os
import ssl
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit


class HttpFailure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url` (HTTP_PROXY / HTTPS_PROXY, lower case first,
    minus NO_PROXY), as urllib, requests, aiohttp and curl read it; None to go direct."""
    parts = urlsplit(url)
    proxy = urllib.request.getproxies_environment().get(parts.scheme)
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
    if not proxy or bypass(parts.netloc.rpartition("@")[2]):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def basic_auth(userinfo: str) -> str:
    """`user:password` of a URL (percent-encoded) as a Basic authorization value."""
    user, _, password = userinfo.partition(":")
    return "Basic " + base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()


@dataclass(frozen=True)
class _Route:
    """How to reach one origin: directly, through an HTTP proxy (plain http: the request goes
    to the proxy in absolute form), or through a proxy's CONNECT tunnel (https)."""

    origin: str  # scheme://authority, the pool key
    tls: bool
    authority: str  # host[:port] as the Host header and CONNECT name it
    host: str
    port: int
    proxy_host: str | None = None
    proxy_port: int = 0
    proxy_auth: str | None = None  # a Proxy-Authorization value

    @property
    def tunnel(self) -> bool:
        return self.proxy_host is not None and self.tls

    @property
    def absolute_form(self) -> bool:
        return self.proxy_host is not None and not self.tls


def _route(url: str, proxy: str | None) -> _Route:
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    authority = parts.netloc.rpartition("@")[2]
    route = _Route(
        f"{parts.scheme}://{authority}", tls, authority, parts.hostname or "", parts.port or (443 if tls else 80)
    )
    if proxy is None:
        return route
    p = urlsplit(proxy)
    if p.scheme != "http":
        raise HttpFailure("proxy", f"proxy {p.hostname}: only http:// proxies are supported, not {p.scheme}://")
    userinfo, at, _ = p.netloc.rpartition("@")
    return _Route(
        route.origin,
        tls,
        authority,
        route.host,
        route.port,
        p.hostname or "",
        p.port or (443 if p.scheme == "https" else 80),
        basic_auth(userinfo) if at else None,
    )


PLAIN_HTTP_AFTER_S = 0.5  # a TLS server answers a ClientHello in a round trip; then ask plainly


PLAIN_HTTP_MESSAGE = "no answer to the TLS handshake, but an answer in plain HTTP"


async def _no_plain_http(
    connecting: asyncio.Future[Any], host: str, port: int, deadline: float, answered: Callable[[], bool] = lambda: False
) -> None:
    """HttpFailure("connect") when the TLS handshake has no answer soon and the port answers a
    plain-HTTP request instead: an https:// URL given to a plain-HTTP server that waits for a
    request line (llama-server does) would otherwise hang for asyncio's 60 s handshake timeout."""
    await asyncio.wait({connecting}, timeout=min(PLAIN_HTTP_AFTER_S, max(0.0, deadline - time.perf_counter())))
    if not connecting.done() and not answered() and await answers_plain_http(host, port, deadline):
        raise HttpFailure("connect", PLAIN_HTTP_MESSAGE)


async def unless_plain_http(
    sending: asyncio.Future[Any], host: str, port: int, deadline: float, answered: Callable[[], bool]
) -> None:
    """Awaits `sending` (a first request to an https origin), or raises HttpFailure("connect")
    at once when it has no answer soon (`answered`: its head came) and the port answers in
    plain HTTP (aiohttp's path, where the handshake is not a step of its own)."""
    try:
        await _no_plain_http(sending, host, port, deadline, answered)
        await sending
    finally:
        sending.cancel()  # a no-op once it is done


async def answers_plain_http(host: str, port: int, deadline: float) -> bool:
    """Whether host:port answers a plain-HTTP request with an `HTTP/` status line. A TLS server
    that is merely slow answers it with an alert or nothing: False, and the handshake goes on."""
    writer = None
    try:
        left = max(0.001, deadline - time.perf_counter())
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), left)
        writer.write(f"HEAD / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.read(5), max(0.001, deadline - time.perf_counter()))
    except (OSError, asyncio.TimeoutError):
        return False
    finally:
        if writer is not None:
            writer.close()
    return head == b"HTTP/"


def ssl_context(insecure: bool) -> ssl.SSLContext:
    """The TLS context of a client, made when a TLS connection first needs it and shared by
    the process's clients: loading the system's certificates costs about 40 ms of CPU, which a
    run over plain http (and each of its worker processes) need not pay."""
    return _context(insecure, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=8)
def _context(insecure: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """One context per verification setting and certificate store ($SSL_CERT_FILE/DIR)."""
    ctx = ssl.create_default_context()  # the system store, or $SSL_CERT_FILE
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx
