"""The HTTP/SSE client: sends one request and records what arrived, when. No statistics here.

Every chunk is timestamped (`time.perf_counter`) the moment it is read, before any parsing, so
parsing cost never shifts a timestamp. Two transports carry the same requests: benchy.client.http1
(the default, "lean": httptools on asyncio's buffered protocol) and aiohttp (`--transport
aiohttp`, 20-40% more CPU per streamed token; the reference to compare against; the figures
are in docs/network.md). Both
take a proxy from the environment (HTTP_PROXY / HTTPS_PROXY / NO_PROXY, unless
`env_proxy=False`), keep the base URL's query string (`?api-version=…`) on every request, send
the extra `--header`s, and follow redirects by one policy (`redirect_target`). Secrets (the API
key, URL credentials, every --header value) go into requests and nowhere else: see redact.py.
The server's side pages (benchy.server: identity, /metrics, the stated capacity, a cache
reset) go through `Client.page`, on an Http1Pool of their own whichever transport carries the
streams, so that reading them costs no aiohttp import and takes no warmed connection.

Error kinds a failed request is recorded with (one table, `failure_of`, for both transports):
http_<status>, connect (nothing listens / DNS), proxy (the proxy is unreachable or refused),
tls (certificate not trusted), reset (connection dropped before the response began),
disconnect (dropped mid-response), stall (silence > --stall-timeout), timeout (> --timeout),
redirect (too many, or a POST moved by 301/302/303), not_sse (a body that is not an event
stream), bad_stream (an event stream without a single event), server_error (an `error` event in
the stream), client_error, internal (a benchy bug; report it). A successful request may carry
anomalies (records.Anomaly): no_done, no_usage, malformed_events (count: how many), redirected
(count: each request was sent that many times before the URL that answered), and with a Harmony template special_tokens_stripped (the server
dropped <|channel|> & co. from the text, so analysis and final cannot be told apart: all of it
counts as content). A completion whose text opens with a Harmony marker is read as Harmony
without the template too (gpt-oss on a raw endpoint): its analysis channel is reasoning.

Chat and completions events are read here; Responses' and Anthropic Messages' by their own
modules (responses.py, messages.py: the body, the events, a whole answer as chat's), and a
non-streamed answer (`--no-stream`) by whole.py: all into the same record.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import orjson

from benchy.client import messages, responses, whole
from benchy.client.extra_body import secrets as extra_body_secrets
from benchy.client.harmony import HarmonyStream, markers_missing
from benchy.client.http1 import (
    PEEK_BYTES,
    Http1Pool,
    HttpFailure,
    OnHead,
    Request,
    Response,
    Sink,
    basic_auth,
    env_proxy,
    ssl_context,
    unless_plain_http,
)
from benchy.client.redact import header_secrets, redact_url, scrub, scrub_list, url_secrets
from benchy.client.sse import SSEParser
from benchy.measure.records import CONTENT, REASONING, Anomaly, RequestRecord

if TYPE_CHECKING:
    import aiohttp  # imported when used: the lean transport never needs it (a quarter second a process)

# Once finish_reason and usage are in, [DONE] and the body's end get this long (they follow in
# the same write on every server seen); finish_reason without usage waits this long for usage.
# Neither delays a figure: the request's end is when the answer was whole.
DONE_GRACE_S = 0.25
USAGE_GRACE_S = 1.0

__all__ = ["Client", "ClientSettings", "ServerError", "TransientError", "parse_header", "redact_url", "scrub"]


class ServerError(Exception):
    """The server could not be used at all (down, wrong URL, model not served). One line."""


class TransientError(ServerError):
    """A failure worth another try (5xx, 429, a dropped connection, a broken body)."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


# A non-streamed calibration request is retried this often: no measurement rides on it, and one
# flaky answer must not sink a whole run.
CALIBRATION_ATTEMPTS = 5
MAX_REDIRECTS = 5  # per request; a loop or a long chain is an error (kind redirect)
# A side page (identity, /metrics, a cache reset) is read whole up to this size; a larger one
# is a failure of kind too_large, never a cut text: a Prometheus page cut short parses as one
# that lacks the metrics it lost. vLLM's /metrics is a few hundred KiB to a few MiB.
MAX_PAGE_BYTES = 32 * 2**20
PAGE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Page:
    """A side page's answer: the status, lower-case headers and the whole body; or, where no
    answer came, `failure` (the transport's error kind: connect, timeout, reset, tls, proxy,
    redirect, too_large…) and a one-line message with every secret scrubbed."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    failure: str | None = None
    message: str = ""


@dataclass(frozen=True)
class ClientSettings:
    base_url: str
    api_key: str | None = None
    model: str | None = None
    timeout_s: float = 600.0  # whole request
    stall_timeout_s: float = 120.0  # longest silence between two reads of the stream
    insecure: bool = False  # skip TLS verification (only when asked)
    connections: int = 1
    extra_body: dict | None = None
    headers: tuple[tuple[str, str], ...] = ()  # --header (name, value): values are secrets
    env_proxy: bool = True  # a proxy from HTTP_PROXY / HTTPS_PROXY / NO_PROXY (--no-env-proxy: never)
    transport: str = "lean"  # benchy.client.http1, or "aiohttp"
    stream: bool = True  # False: --no-stream, each answer read whole (client/whole.py)


# Headers whose value the transport decides (framing, the connection); --header may not set them.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type", "expect", "te"})
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def parse_header(text: str) -> tuple[str, str]:
    """(name, value) of a `--header 'Name: value'`. ValueError otherwise, with a message that
    names the header but never shows its value (it is a secret)."""
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _TOKEN.fullmatch(name):
        raise ValueError("--header must look like 'Name: value' (a name of letters, digits and -, a colon, a value)")
    if name.lower() in _OWN_HEADERS:
        raise ValueError(f"--header {name}: benchy sets that header itself")
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"--header {name}: the value holds a line break")
    return name, value


def redirect_target(method: str, status: int, location: str | None, url: str) -> str | None:
    """Where a redirect sends the request, if benchy follows it: 307 and 308 keep the method and
    body; 301, 302 and 303 are followed for GET only (a POST there would turn into a GET, as
    browsers do, and lose its body). None: not a redirect to follow."""
    if not location or not (status in (307, 308) or (status in (301, 302, 303) and method == "GET")):
        return None
    return urljoin(url, location)


def split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without `user:password@`, and those credentials as a Basic authorization value
    (None if absent)."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    return urlunsplit(parts._replace(netloc=host)), basic_auth(userinfo)


def secrets_of(settings: ClientSettings) -> list[str]:
    """Every secret the settings hold, in every form it takes in a message, for scrubbing."""
    found: list[str | None] = [settings.api_key, *url_secrets(settings.base_url)]
    found += [s for _, value in settings.headers for s in header_secrets(value)]
    found += extra_body_secrets(settings.extra_body)
    proxy = env_proxy(settings.base_url) if settings.env_proxy else None
    found += url_secrets(proxy) if proxy else []
    return scrub_list(found)


# ---- failures: one table for both transports -----------------------------------------------

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


class Client:
    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        url, basic = split_credentials(settings.base_url.split("#")[0])
        base, _, self.query = url.partition("?")
        self.base = base.rstrip("/")
        self.origin = "/".join(self.base.split("/", 3)[:3])
        self.secrets = secrets_of(settings)
        self.calibration_failures: list[str] = []  # retried calibration attempts, scrubbed
        self._credentials = self._credential_headers(basic)
        self._transport: Http1Pool | _Aiohttp | None = None
        self._pages: Http1Pool | None = None  # the side pages' own connections (page())

    async def __aenter__(self) -> Client:
        if self.settings.transport == "aiohttp":
            self._transport = _Aiohttp(self.settings, self._proxy_for)
        else:
            self._transport = self._lean_pool()
        return self

    async def __aexit__(self, *exc) -> None:
        if self._transport is not None:
            await _closed(self._transport)
        if self._pages is not None:
            self._pages.close()

    @property
    def _proxy_for(self) -> Callable[[str], str | None]:
        return env_proxy if self.settings.env_proxy else _no_proxy

    def _lean_pool(self) -> Http1Pool:
        return Http1Pool(self.settings.insecure, {"User-Agent": "benchy"}, self._proxy_for)

    def _credential_headers(self, basic: str | None) -> dict[str, str]:
        """The API key (else the URL's user:password as Basic auth), then every --header: a
        --header Authorization replaces the key's."""
        headers = {}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        elif basic is not None:
            headers["Authorization"] = basic
        for name, value in self.settings.headers:
            for known in [k for k in headers if k.lower() == name.lower()]:
                del headers[known]
            headers[name] = value
        return headers

    def scrub(self, text: str) -> str:
        """`text` with every secret of the settings replaced by ***."""
        return scrub(text, self.secrets)

    def url_of(self, path: str, root: bool = False) -> str:
        """The base URL + path (from the API root without /v1 when `root`), with the base URL's
        query string: Azure OpenAI's `?api-version=…` belongs on every request."""
        base = self.base[:-3] if root and self.base.endswith("/v1") else self.base
        return f"{base}{path}?{self.query}" if self.query else f"{base}{path}"

    def url(self, endpoint: str) -> str:
        return self.url_of(PATHS[endpoint])

    def _headers_for(self, url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        """Credentials go to the base URL's origin only, never to one a redirect names."""
        same = url.startswith(self.origin) and url[len(self.origin) : len(self.origin) + 1] in ("", "/", "?")
        return {**self._credentials, **(extra or {})} if same else dict(extra or {})

    @property
    def transport(self) -> Http1Pool | _Aiohttp:
        assert self._transport is not None, "use Client as an async context manager"
        return self._transport

    # ---- one request, redirects followed ------------------------------------------------
    async def _request(
        self,
        method: str,
        url: str,
        body: bytes | None,
        response: Response,
        on_head: OnHead,
        sink: Sink,
        extra_headers: dict[str, str] | None = None,
        fresh: bool = False,
        timeout_s: float | None = None,
        via: Http1Pool | None = None,
    ) -> int:
        """Sends the request, following redirects (redirect_target); fills `response` with the
        answer that was not one. Returns how many redirects were followed. Raises what the
        transport raises, or HttpFailure("redirect"). `via`: another pool than the streams'
        (with timeout_s as its stall bound too)."""
        timeout_s = timeout_s or self.settings.timeout_s
        stall_s = timeout_s if via is not None else self.settings.stall_timeout_s
        transport = via or self.transport
        hops = 0
        while True:
            await transport.request(
                Request(
                    method,
                    url,
                    body,
                    self._headers_for(url, extra_headers),
                    lambda r: False if _is_redirect(r.status) else on_head(r),
                    sink,
                    timeout_s,
                    stall_s,
                    fresh,
                ),
                response,
            )
            target = redirect_target(method, response.status, response.headers.get("location"), url)
            if target is None:
                if _is_redirect(response.status):
                    raise HttpFailure("redirect", _unfollowed(method, response, url))
                return hops
            if hops == MAX_REDIRECTS:
                raise HttpFailure("redirect", f"more than {MAX_REDIRECTS} redirects, the last to {redact_url(target)}")
            hops += 1
            url = target
            response.clear()

    async def warm(self, n: int) -> None:
        """Opens connections for n streams before the measured requests, so that none of them
        pays a connection set-up inside its TTFT. A failure here is not raised: the measured
        requests will meet it and record it."""
        try:
            url = self.url_of("/models")
            await self.transport.warm(url, n, self.settings.timeout_s, self._headers_for(url))
        except Exception:  # noqa: BLE001 - recorded by the requests that follow
            pass

    # ---- the server's side pages -----------------------------------------------------------
    async def page(self, method: str, url: str, payload: dict | None = None, timeout_s: float = PAGE_TIMEOUT_S) -> Page:
        """One side page (identity, /metrics, a cache reset: benchy.server's PageSource), read
        whole over connections of its own, so that a scrape during a case never takes one of
        those warmed for the measured streams, whichever transport carries them. Redirects,
        credentials (to the base URL's origin only), TLS and proxy as for every request of this
        client; an empty POST sends Content-Length: 0. A kept-alive connection the server had
        closed while idle (reset before any answer) is tried once more on a fresh one, as a
        stream is. Never raises for a transport failure: the Page names it."""
        if self._pages is None:
            self._pages = self._lean_pool()
        body = orjson.dumps(payload) if payload is not None else (b"" if method == "POST" else None)
        page, reused = await self._page_once(self._pages, method, url, body, timeout_s, fresh=False)
        if page.failure == "reset" and reused:
            page, _ = await self._page_once(self._pages, method, url, body, timeout_s, fresh=True)
        return page

    async def _page_once(
        self, pool: Http1Pool, method: str, url: str, body: bytes | None, timeout_s: float, fresh: bool
    ) -> tuple[Page, bool]:
        """(the page, whether it went over a kept-alive connection)."""
        collected = bytearray()
        response = Response()

        def sink(data: bytes, now: float) -> None:
            collected.extend(data)
            if len(collected) > MAX_PAGE_BYTES:
                raise HttpFailure("too_large", f"the answer exceeded {MAX_PAGE_BYTES // 2**20} MiB")

        try:
            await self._request(method, url, body, response, lambda r: True, sink, None, fresh, timeout_s, pool)
        except Exception as exc:  # noqa: BLE001 - a page that did not come is an answer too
            kind, message = failure_of(exc, self.settings, began=response.status != 0)
            if kind in ("stall", "timeout"):  # one bound for a page: its whole answer within timeout_s
                kind, message = "timeout", f"no answer within {timeout_s:g} s"
            return Page(response.status, response.headers, failure=kind, message=self.scrub(message)), response.reused
        return Page(response.status, response.headers, bytes(collected)), response.reused

    # ---- server facts -------------------------------------------------------------------
    async def list_models(self) -> list[dict]:
        data = await self._get_json(self.url_of("/models"))
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise ServerError(f"{redact_url(self.url_of('/models'))} did not return a model list")
        return models

    async def choose_model(self) -> str:
        """The --model, checked against /models, else the first model served; every later
        request names it."""
        models = await self.list_models()
        ids = [str(m.get("id")) for m in models if isinstance(m, dict) and m.get("id")]
        wanted = self.settings.model
        if wanted is None:
            if not ids:
                raise ServerError("the server lists no models; pass --model")
            wanted = ids[0]
        elif ids and wanted not in ids:
            raise ServerError(f"model {wanted!r} is not served; the server offers: {', '.join(ids)}")
        self.settings = replace(self.settings, model=wanted)
        return wanted

    async def server_version(self) -> str | None:
        """From /version (vLLM, SGLang, the simulator), else the Server header: a side page."""
        page = await self.page("GET", self.url_of("/version", root=True), timeout_s=self.settings.timeout_s)
        if page.failure is not None:
            return None
        data = _loads(page.body) if page.status == 200 else None
        if isinstance(data, dict) and data.get("version"):
            return str(data["version"])
        return page.headers.get("server")

    async def _fetch(self, method: str, url: str, body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        """A request no measurement rides on: (status, headers, body; of an error, its start)."""
        collected = bytearray()
        response = Response()
        await self._request(method, url, body, response, lambda r: r.status == 200, lambda b, now: collected.extend(b))
        return response.status, response.headers, bytes(collected) if response.streamed else response.peek

    async def _get_json(self, url: str) -> object:
        where = redact_url(url)
        try:
            status, _, body = await self._fetch("GET", url, None)
        except Exception as exc:
            raise server_error(where, *failure_of(exc, self.settings, began=False)) from None
        if status in (401, 403):
            raise ServerError(f"{where}: HTTP {status}: check --api-key / $OPENAI_API_KEY / --header")
        if status != 200:
            raise ServerError(f"{where}: HTTP {status}")
        data = _loads(body)
        if data is None:
            raise ServerError(f"{where}: response is not JSON")
        return data

    # ---- requests -----------------------------------------------------------------------
    def payload(
        self, prompt: str, max_tokens: int, endpoint: str, stream: bool = True, extra: dict | None = None
    ) -> dict:
        api = _api(endpoint)
        if api is not None:
            body = api.payload(self.settings.model, prompt, max_tokens, stream, extra)
            body.update(self.settings.extra_body or {})
            return body
        body = {"model": self.settings.model, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
        if endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update(extra or {})
        body.update(self.settings.extra_body or {})
        if not body.get("stream"):  # a scenario's stream = false: vLLM refuses stream_options then
            body.pop("stream_options", None)
        return body

    async def usage_of(self, prompt: str, endpoint: str, extra: dict | None = None) -> dict:
        """A non-streamed one-token request; returns its usage (for calibration). Transient
        failures are retried (CALIBRATION_ATTEMPTS in all) and noted in calibration_failures."""
        for attempt in range(1, CALIBRATION_ATTEMPTS + 1):
            try:
                return await self._usage_once(prompt, endpoint, extra)
            except TransientError as exc:
                self.calibration_failures.append(self.scrub(str(exc)))
                if attempt == CALIBRATION_ATTEMPTS:
                    raise ServerError(f"{exc} (calibration tried {attempt} times)") from None
                await asyncio.sleep(min(exc.retry_after_s or 0.05 * 2**attempt, 5.0))
        raise AssertionError("unreachable")

    async def answer_of(
        self, prompt: str, endpoint: str, max_tokens: int, extra: dict | None = None
    ) -> tuple[str, dict]:
        """A non-streamed request of max_tokens: (the answer's text, usage). For calibrating the
        local count of output text; raises ServerError or TransientError."""
        obj = await self._post_once(prompt, endpoint, max_tokens, extra)
        choice = (obj.get("choices") or [{}])[0]
        if not isinstance(choice, dict):
            return "", obj["usage"]
        message = choice.get("message")
        held: dict = message if isinstance(message, dict) else choice
        # One reasoning text, as a stream is read: a server between the two names (vLLM around
        # the reasoning_content -> reasoning rename) sends the same text in both.
        reasoning = _text(held.get("reasoning_content")) or _text(held.get("reasoning"))
        parts = [reasoning, held.get("content"), held.get("text")]
        return "".join(p for p in parts if isinstance(p, str)), obj["usage"]

    async def server_token_count(self, text: str) -> int | None:
        """The server's own count of `text` (its /tokenize: llama.cpp's {content}, else vLLM's
        and SGLang's {model, prompt}), without special tokens; None where none answers."""
        bodies = (
            {"content": text, "add_special": False},
            {"model": self.settings.model, "prompt": text, "add_special_tokens": False},
        )
        for body in bodies:
            try:
                status, _, data = await self._fetch("POST", self.url_of("/tokenize", root=True), orjson.dumps(body))
            except Exception:
                return None
            obj = _loads(data) if status == 200 else None
            tokens = obj.get("tokens") if isinstance(obj, dict) else None
            if isinstance(tokens, list):
                return len(tokens)
        return None

    async def _usage_once(self, prompt: str, endpoint: str, extra: dict | None = None) -> dict:
        return (await self._post_once(prompt, endpoint, 1, extra))["usage"]

    async def _post_once(self, prompt: str, endpoint: str, max_tokens: int, extra: dict | None = None) -> dict:
        """One non-streamed request; its JSON body, which has usage.prompt_tokens."""
        url = self.url(endpoint)
        where = redact_url(url)
        body = orjson.dumps(self.payload(prompt, max_tokens, endpoint, stream=False, extra=extra))
        try:
            status, headers, data = await self._fetch("POST", url, body)
        except Exception as exc:
            raise server_error(where, *failure_of(exc, self.settings, began=False)) from None
        if status != 200:
            message = f"{where}: HTTP {status}: {_body_text(data, 200)}"
            if status == 429 or status >= 500:
                raise TransientError(message, _retry_after_s(headers.get("retry-after")))
            raise ServerError(message)
        obj = _loads(data)
        if obj is None:
            raise TransientError(f"{where}: the response is not valid JSON")
        api = _api(endpoint)
        obj = api.as_chat(obj) if api is not None else obj
        usage = obj.get("usage") if isinstance(obj, dict) else None
        if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
            raise TransientError(f"{where}: response has no usage.prompt_tokens")
        assert isinstance(obj, dict)  # it has usage
        return obj

    async def stream(
        self,
        rec: RequestRecord,
        prompt: str,
        max_tokens: int,
        endpoint: str,
        extra: dict | None = None,
        harmony: bool = False,
    ) -> RequestRecord:
        """Sends one streamed request and fills `rec` with what arrived. Never raises for a
        failed request: the failure is recorded on the record with a kind.

        A reused keep-alive connection that drops before any response byte is most often one
        the server had already closed while idle (llama.cpp's server does after 5 s). That
        request is sent once more on a fresh connection, its timestamps restart, and
        `rec.retried` keeps the first failure.

        harmony: the completion text is raw Harmony; its analysis channel counts as reasoning,
        its final channel as content, and marker-only deltas carry no token."""
        payload = self.payload(prompt, max_tokens, endpoint, self.settings.stream, extra)
        rec.streamed = bool(payload.get("stream"))
        body = orjson.dumps(payload)
        reused = await self._send(rec, body, endpoint, False, harmony)
        if reused and rec.error_kind == "reset":
            rec.retried, rec.retried_kind = f"{rec.error_kind}: {rec.error}", rec.error_kind
            rec.status, rec.error_kind, rec.error, rec.end_s = "ok", None, None, None
            await self._send(rec, body, endpoint, True, harmony)
        return rec

    async def _send(self, rec: RequestRecord, body: bytes, endpoint: str, fresh: bool, harmony: bool) -> bool:
        """One attempt; returns whether it went over a reused keep-alive connection. Body bytes
        reach the reader as they are read, stamped before parsing."""
        reader = _StreamReader(rec, self.scrub, harmony, _api(endpoint), whole=not rec.streamed)
        response = Response()
        rec.sent_unix_s = time.time()
        t0 = reader.t0 = time.perf_counter()
        rec.sent_mono_s = t0

        def on_head(resp: Response) -> bool:
            rec.headers_s = resp.head_s - t0
            rec.http_status = resp.status
            wanted = "text/event-stream" if rec.streamed else "json"
            return resp.status == 200 and wanted in resp.headers.get("content-type", "")

        try:
            hops = await self._request(
                "POST",
                self.url(endpoint),
                body,
                response,
                on_head,
                reader.feed,
                {"X-Request-Id": rec.request_id},
                fresh,
            )
            if response.streamed:
                reader.close(response.end_s - t0)
                if hops and rec.status == "ok":
                    rec.note(Anomaly.REDIRECTED, hops)
            elif response.status != 200:
                reader.http_failure(response.status, response.headers.get("retry-after"), response.peek)
            else:
                reader.not_event_stream(response.headers.get("content-type"), response.peek)
        except Exception as exc:
            reader.fail(*failure_of(exc, self.settings, began=rec.http_status is not None))
        if rec.end_s is None:
            rec.end_s = time.perf_counter() - t0
        return response.reused


# The path of each --endpoint under the base URL; responses and messages have modules of their own.
PATHS = {"chat": "/chat/completions", "completions": "/completions", "responses": "/responses", "messages": "/messages"}
_APIS = {"responses": responses, "messages": messages}  # each: payload, as_chat, book (its event reader)


def _api(endpoint: str):
    """The module of an API other than OpenAI's chat and completions, else None."""
    return _APIS.get(endpoint)


def _no_proxy(url: str) -> None:
    return None


def _is_redirect(status: int) -> bool:
    return status in (301, 302, 303, 307, 308)


def _unfollowed(method: str, response: Response, url: str) -> str:
    location = response.headers.get("location")
    if not location:
        return f"HTTP {response.status} without a Location"
    target = redact_url(urljoin(url, location))
    return f"HTTP {response.status}: {method} moved to {target}; pass that URL as --base-url (a {method} is re-sent only on 307/308)"


def _body_text(data: bytes, limit: int) -> str:
    return data[:limit].decode("utf-8", errors="replace").replace("\n", " ")


def _retry_after_s(value: str | None) -> float | None:
    try:
        return max(0.0, float(value or ""))
    except ValueError:
        return None  # absent, or an HTTP date: fall back to our own backoff


async def _closed(transport: Http1Pool | _Aiohttp) -> None:
    if isinstance(transport, Http1Pool):
        transport.close()
    else:
        await transport.close()


class _Aiohttp:
    """The same requests over aiohttp (`--transport aiohttp`), behind Http1Pool's interface."""

    def __init__(self, settings: ClientSettings, proxy_for: Callable[[str], str | None]) -> None:
        import aiohttp

        self.settings = settings
        self.proxy_for = proxy_for
        # Our own TLS context, as the lean transport's: aiohttp's is made once, at its import.
        self._ssl = ssl_context(settings.insecure)
        self._session = self._new_session(aiohttp.TCPConnector(limit=settings.connections + 4, ssl=self._ssl))
        self._fresh: aiohttp.ClientSession | None = None
        self._speaks_tls: set[tuple[str, int]] = set()  # origins that completed a handshake

    def _new_session(self, connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        import aiohttp

        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_note_reused_connection)
        # read_bufsize: SSE lines of a buffered server can be long; we parse them ourselves.
        return aiohttp.ClientSession(
            connector=connector,
            headers={"User-Agent": "benchy"},
            read_bufsize=2**20,
            trace_configs=[trace],
        )

    async def request(self, req: Request, response: Response) -> None:
        """As Http1Pool.request; an https origin that has not yet completed a handshake is asked
        in plain HTTP when no answer comes soon (http1.answers_plain_http), so that https:// to
        a plain-HTTP server fails at once rather than at --timeout."""
        parts = urlsplit(req.url)
        origin = (parts.hostname or "", parts.port or 443)
        if parts.scheme != "https" or origin in self._speaks_tls or self.proxy_for(req.url) is not None:
            await self._request(req, response)
            return
        sending = asyncio.ensure_future(self._request(req, response))
        deadline = time.perf_counter() + min(req.timeout_s, 5.0)
        await unless_plain_http(sending, *origin, deadline, lambda: bool(response.status))
        self._speaks_tls.add(origin)

    async def _request(self, req: Request, response: Response) -> None:
        import aiohttp

        session = self._session
        if req.fresh:  # a new connection for every request (for the one retry)
            if self._fresh is None:
                self._fresh = self._new_session(aiohttp.TCPConnector(force_close=True, ssl=self._ssl))
            session = self._fresh
        headers = {**req.headers, "Content-Type": "application/json"} if req.body is not None else req.headers
        async with session.request(
            req.method,
            req.url,
            data=req.body,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=req.timeout_s, sock_read=req.stall_s),
            trace_request_ctx=response,
            **self._proxy(req.url, headers),
        ) as resp:
            response.status, response.head_s = resp.status, time.perf_counter()
            response.headers = {k.lower(): v for k, v in resp.headers.items()}
            response.streamed = req.on_head(response)
            if response.streamed:
                await _read_body(resp, req.sink)
            else:
                response.peek = await resp.content.read(PEEK_BYTES)
            response.end_s = time.perf_counter()

    def _proxy(self, url: str, headers: dict[str, str]) -> dict:
        """request() arguments for the proxy of `url`: the proxy, and its credentials as a
        header of the CONNECT (https), or of the request itself (plain http: aiohttp sends
        proxy_headers only with a CONNECT)."""
        proxy = self.proxy_for(url)
        if proxy is None:
            return {"headers": headers}
        bare, basic = split_credentials(proxy)
        if basic is None:
            return {"headers": headers, "proxy": bare}
        if url.startswith("https:"):
            return {"headers": headers, "proxy": bare, "proxy_headers": {"Proxy-Authorization": basic}}
        return {"headers": {**headers, "Proxy-Authorization": basic}, "proxy": bare}

    async def warm(self, url: str, n: int, timeout_s: float, headers: dict[str, str]) -> None:
        """n GETs of `url` held open at once: aiohttp opens a connection only for a request."""
        import aiohttp

        arrived, all_in = 0, asyncio.Event()

        async def hold() -> None:
            nonlocal arrived
            try:
                async with self._session.get(
                    url, timeout=aiohttp.ClientTimeout(total=timeout_s), **self._proxy(url, headers)
                ) as resp:
                    arrived += 1
                    if arrived == n:
                        all_in.set()
                    await asyncio.wait_for(all_in.wait(), timeout_s)
                    await resp.read()
            finally:
                all_in.set()  # one failed: the others need not wait for it

        await asyncio.gather(*(hold() for _ in range(n)), return_exceptions=True)

    async def close(self) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()


async def _read_body(resp: aiohttp.ClientResponse, sink: Sink) -> None:
    """Every read to the sink until the body ends, or until the sink's grace runs out once it
    has the whole answer (the connection is then closed, not reused)."""
    wait: float | None = None
    while True:
        try:
            read = resp.content.readany()
            chunk = await (read if wait is None else asyncio.wait_for(read, wait))
        except asyncio.TimeoutError:
            resp.close()
            return
        if not chunk:
            return
        got = sink(chunk, time.perf_counter())
        wait = got if got is not None else wait


async def _note_reused_connection(session, trace_config_ctx, params) -> None:
    if isinstance(trace_config_ctx.trace_request_ctx, Response):
        trace_config_ctx.trace_request_ctx.reused = True


class _StreamReader:
    """Turns SSE payloads into the record's fields. Kept lean: it runs once per event.

    Every event that carries text is booked as `_text_event` books it (a read's run of plain
    events inline in `_plain_events`), whichever way it was read: the plain
    shape located without a JSON parse (`_plain`, on the raw chunk or on a parsed payload),
    the usual chat delta, or the general path."""

    __slots__ = (
        "rec",
        "parser",
        "done",
        "bad_events",
        "scrub",
        "harmony",
        "unmarked",
        "last_text_s",
        "plain_prefix",
        "plain_event",
        "texts",
        "kinds",
        "t0",
        "finished_s",
        "answered_s",
        "api",
        "state",
        "whole",
    )

    def __init__(
        self,
        rec: RequestRecord,
        scrub: Callable[[str], str] = str,
        harmony: bool = False,
        api: Any = None,
        whole: bool = False,
    ) -> None:
        """api: responses.py or messages.py, whose `book` reads each payload (None: chat and
        completions, read here); whole: a non-streamed answer, its body read whole (whole.py)."""
        self.rec = rec
        self.api = api
        self.state: dict = {}  # what the API's reader keeps between events
        self.whole = bytearray() if whole else None
        rec.streamed = not whole
        self.parser = SSEParser()
        self.done = False
        self.bad_events = 0
        self.scrub = scrub
        self.harmony = HarmonyStream() if harmony else None
        self.unmarked: list[str] = []  # Harmony text until its first marker (markers_missing)
        self.last_text_s = 0.0
        self.plain_prefix = b""  # the known head + the plain choice (see _plain); empty: not learnt yet
        self.plain_event = b""  # b"data: " + plain_prefix: how a plain event starts in a raw read
        self.texts: list[str] = []  # each token event's text, joined into rec.token_event_text
        self.kinds: list[str] = []  # and its kind, into rec.token_event_kinds (a str += per event is O(n²))
        self.t0 = 0.0  # feed()'s `now` minus this is the record's time (the transport's sink is feed itself)
        self.finished_s: float | None = None  # when finish_reason came
        self.answered_s: float | None = None  # when finish_reason and usage had both come: the end

    def feed(self, chunk: bytes, now: float) -> float | None:
        """Books one read. Returns how much longer the transport should wait for the body to
        end once the answer is whole (finish_reason and usage; finish_reason alone: a grace for
        the usage), None to read on: a request ends with its answer, not with [DONE] or the
        connection's close (some gateways send neither)."""
        now -= self.t0
        if self.whole is not None:  # a whole answer: read on to the body's end
            self.rec.first_chunk_s = now if self.rec.first_chunk_s is None else self.rec.first_chunk_s
            self.whole.extend(chunk)
            return None
        general = False  # events went the usual way: finish_reason or usage may have come
        if not self.plain_prefix and self.harmony is None and self.rec.sse_events < PLAIN_LEARN_EVENTS:
            rest = self._until_plain(chunk, now)
            general, chunk = len(rest) < len(chunk), rest
        if self.plain_prefix and self.parser.idle():
            done = self._plain_events(chunk, now)
            if done == len(chunk):
                return self._grace(now) if general else None
            chunk = chunk[done:]
        self._events(self.parser.feed(chunk), now)
        return self._grace(now)

    def _until_plain(self, chunk: bytes, now: float) -> bytes:
        """The events a read starts with, the usual way and one at a time, until the plain shape
        is learnt (see _plain): returns the rest of the read, which can then go the plain way.
        A server faster than its reader sends the whole answer in one read, which would
        otherwise go all the usual way. The SSE parser takes any chunking, so cutting the read
        at its events' ends changes nothing it reads."""
        while not self.plain_prefix and self.rec.sse_events < PLAIN_LEARN_EVENTS:
            end = chunk.find(b"\n\n")
            if end < 0:
                break
            self._events(self.parser.feed(chunk[: end + 2]), now)
            chunk = chunk[end + 2 :]
        return chunk

    def _events(self, payloads: list[bytes], now: float) -> None:
        """Parsed SSE payloads of one read, each booked: the plain shape without a JSON parse."""
        rec = self.rec
        for data in payloads:
            rec.sse_events += 1
            if rec.first_chunk_s is None:
                rec.first_chunk_s = now
            content = self._plain(data, 0, len(data)) if self.plain_prefix else None
            if content is None:
                self._event(data, now)
            else:
                self._text_event(now, content, "")

    def _grace(self, now: float) -> float | None:
        rec = self.rec
        if rec.status != "ok":
            return None
        if rec.finish_reason is not None:
            self.finished_s = now if self.finished_s is None else self.finished_s
            if rec.usage_reported and self.answered_s is None:
                self.answered_s = now
        if self.done or self.answered_s is not None:  # after [DONE] only the body's end can follow
            return DONE_GRACE_S
        return USAGE_GRACE_S if self.finished_s is not None else None

    def close(self, now: float) -> None:
        if self.whole is not None:
            answer = _loads(bytes(self.whole))
            whole.read(self, self.api.as_chat(answer) if self.api is not None else answer, now)
            return
        for data in self.parser.close():
            self._event(data, now)
        rec = self.rec
        # The answer's end: finish_reason with usage, else finish_reason (no usage came).
        rec.end_s = self.answered_s or self.finished_s or now
        self._settle()
        if rec.status != "ok":
            return
        if self.harmony is not None:
            self._harmony_close(self.harmony)
            self._settle()
        if self.bad_events:
            rec.note(Anomaly.MALFORMED_EVENTS, self.bad_events)
        if not self.done:
            rec.note(Anomaly.NO_DONE)
        if not rec.usage_reported:
            rec.note(Anomaly.NO_USAGE)
        if rec.sse_events == 0:
            self.fail("bad_stream", "the stream ended without a single event")

    def _text_event(self, now: float, content: str, reasoning: str) -> None:
        """The one place a text event is booked: its time, its text and characters, its kind."""
        rec = self.rec
        rec.content_chars += len(content)
        rec.reasoning_chars += len(reasoning)
        rec.token_event_s.append(now)
        rec.token_event_chars.append(len(content) + len(reasoning))
        self.kinds.append(CONTENT if content else REASONING)
        self.texts.append(reasoning + content)

    def _settle(self) -> None:
        """The per-event lists, joined into the record's strings."""
        self.rec.token_event_text = "".join(self.texts)
        self.rec.token_event_kinds = "".join(self.kinds)

    def _event(self, data: bytes, now: float) -> None:
        """One data payload. Garbage of any shape is counted in bad_events, never raised."""
        if data == b"[DONE]":
            self.done = True
            return
        obj = _loads(data)
        if obj.__class__ is not dict:
            self.bad_events += 1
            return
        if self.api is not None:  # a Responses or Messages event: its own module reads it
            self.api.book(self, obj, now)
            return
        if not self.plain_prefix and self.harmony is None:
            self._learn_head(data)
        if obj.get("error"):
            err = obj["error"]
            self.fail("server_error", str(err.get("message", err) if isinstance(err, dict) else err)[:300])
            return
        choices, usage, timings = obj.get("choices"), obj.get("usage"), obj.get("timings")
        events_before = len(self.rec.token_event_s)
        if choices:
            if isinstance(choices, list) and isinstance(choices[0], dict):
                self._choice(choices[0], now)
            else:
                self.bad_events += 1
        if usage:
            if isinstance(usage, dict):
                self._usage(usage)
                if len(self.rec.token_event_s) > events_before and self.rec.completion_tokens is not None:
                    self.rec.token_event_usage.append(self.rec.completion_tokens)  # continuous_usage_stats
            else:
                self.bad_events += 1
        if timings:
            if isinstance(timings, dict):
                self.rec.server_timings = timings
            else:
                self.bad_events += 1

    def _learn_head(self, data: bytes) -> None:
        """Keeps what precedes the choices of an event that parsed as JSON (id, object, created,
        model: the same in every event of a stream), when it holds no key the reader acts on."""
        cut = data.find(_PLAIN_CHOICE)
        if cut > 0 and not any(key in data[:cut] for key in (b'"error"', b'"usage"', b'"timings"')):
            self.plain_prefix = data[:cut] + _PLAIN_CHOICE
            self.plain_event = b"data: " + self.plain_prefix

    def _plain_events(self, chunk: bytes, now: float) -> int:
        """The whole plain `data: …` events the raw chunk starts with, booked before SSE
        parsing: how many bytes were read so (the rest goes the usual way). Each is booked as
        `_text_event(now, content, "")` books it, and each is read as `_plain` reads one, both
        inline: a read may bring hundreds."""
        rec = self.rec
        times, chars, kinds, texts = rec.token_event_s, rec.token_event_chars, self.kinds, self.texts
        head = self.plain_event
        skip = len(head)
        pos = booked = total = 0
        match = _PLAIN_REST.match
        while chunk.startswith(head, pos):
            found = match(chunk, pos + skip)
            if found is None:
                break
            try:
                content = found.group(1).decode()
            except UnicodeDecodeError:
                break
            if not content.isprintable():
                break
            n = len(content)
            times.append(now)
            chars.append(n)
            kinds.append(CONTENT)
            texts.append(content)
            booked += 1
            total += n
            pos = found.end()
        if booked:
            rec.sse_events += booked
            rec.content_chars += total
            if rec.first_chunk_s is None:
                rec.first_chunk_s = now
        return pos

    def _plain(self, buf: bytes, start: int, end: int) -> str | None:
        """The content of the payload buf[start:end] if it is the usual event: the known head,
        one choice whose delta is a plain non-empty content string, and a known tail. Byte for
        byte that is valid JSON that the general path would read as exactly this, so only that
        shape is taken (None for anything else: escapes, other keys, a finish_reason, usage)."""
        prefix = self.plain_prefix
        if not buf.startswith(prefix, start):
            return None
        begin = start + len(prefix)
        quote = buf.find(b'"', begin, end)
        if quote <= begin or buf[quote:end] not in _PLAIN_TAILS:
            return None
        raw = buf[begin:quote]
        if b"\\" in raw:
            return None
        try:
            content = raw.decode()
        except UnicodeDecodeError:
            return None
        return content if content.isprintable() else None

    def _choice(self, choice: dict, now: float) -> None:
        delta = choice.get("delta")
        if delta.__class__ is dict and self.harmony is None:
            # The usual event, one chat delta of content and nothing else: the general path
            # below would do the same, in three times the time.
            content = delta.get("content")
            if (
                content
                and content.__class__ is str
                and not delta.get("reasoning_content")
                and not delta.get("reasoning")
                and not choice.get("finish_reason")
            ):
                self._text_event(now, content, "")
                return
        if delta is None:  # /v1/completions streams `text`; non-chat servers may too
            delta = choice
            content = choice.get("text")
            if self.harmony is None and not self.rec.token_event_s and _opens_harmony(content):
                self.harmony = HarmonyStream()  # raw Harmony without --template harmony: read it as such
        elif isinstance(delta, dict):
            content = delta.get("content")
        else:
            self.bad_events += 1
            return
        reasoning = _text(delta.get("reasoning_content")) or _text(delta.get("reasoning"))
        if content is not None and not isinstance(content, str):
            self.bad_events += 1
            content = ""
        if self.harmony is not None and content:
            content, reasoning = self._channels(self.harmony, content, now)
        if content or reasoning:
            self._text_event(now, content or "", reasoning or "")
        elif "content" in delta and content is None and not delta.get("role"):
            self.rec.content_null_events += 1
        finish = choice.get("finish_reason")
        if finish:
            if isinstance(finish, str):
                self.rec.finish_reason = finish
            else:
                self.bad_events += 1

    def _channels(self, harmony: HarmonyStream, text: str, now: float) -> tuple[str, str]:
        """(content, reasoning) of one raw Harmony delta: final (and tool-call commentary) text,
        and analysis text; markers and headers are neither, so a marker-only delta is no token."""
        if not harmony.saw_markers:
            self.unmarked.append(text)
        self.last_text_s = now
        return _by_channel(harmony.feed(text))

    def _harmony_close(self, harmony: HarmonyStream) -> None:
        rec = self.rec
        content, reasoning = _by_channel(harmony.close())
        if content or reasoning:  # a held tail that never became a marker: it came last
            rec.content_chars += len(content)
            rec.reasoning_chars += len(reasoning)
            if not rec.token_event_s or rec.token_event_s[-1] != self.last_text_s:
                rec.token_event_s.append(self.last_text_s)
                rec.token_event_chars.append(0)
                self.kinds.append(REASONING)
                self.texts.append("")
            rec.token_event_chars[-1] += len(content) + len(reasoning)
            self.texts[-1] += reasoning + content
            if content:
                self.kinds[-1] = CONTENT
        if not harmony.saw_markers and markers_missing("".join(self.unmarked)):
            rec.note(Anomaly.SPECIAL_TOKENS_STRIPPED)

    def _usage(self, usage: dict) -> None:
        """Counts that are not whole numbers are dropped (metrics must never do sums on them)
        and make the event count as malformed."""
        rec = self.rec
        rec.usage_reported = True
        rec.prompt_tokens = self._count(usage, "prompt_tokens")
        rec.completion_tokens = self._count(usage, "completion_tokens")
        rec.cached_tokens = self._count(self._details(usage, "prompt_tokens_details"), "cached_tokens")
        rec.reasoning_tokens = self._count(self._details(usage, "completion_tokens_details"), "reasoning_tokens")

    def _details(self, usage: dict, key: str) -> dict:
        value = usage.get(key)
        if value is not None and not isinstance(value, dict):
            self.bad_events += 1
        return value if isinstance(value, dict) else {}

    def _count(self, obj: dict, key: str) -> int | None:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if value is not None:
            self.bad_events += 1
        return None

    def http_failure(self, status: int, retry_after: str | None, body: bytes) -> None:
        """Both transports word an HTTP error alike: kind http_<status>, the body's start."""
        text = body[:300].decode("utf-8", errors="replace").replace("\n", " ")
        extra = f" (Retry-After: {retry_after})" if retry_after else ""
        self.fail(f"http_{status}", f"HTTP {status}{extra}: {text}")

    def not_event_stream(self, content_type: str | None, body: bytes) -> None:
        head = body[:200].decode("utf-8", errors="replace").replace("\n", " ")
        self.fail("not_sse", f"response is not an event stream (Content-Type: {content_type or 'none'}): {head}")

    def fail(self, kind: str, message: str) -> None:
        self._settle()  # what arrived before the failure
        if self.rec.status == "error":
            return  # keep the first cause
        self.rec.status = "error"
        self.rec.error_kind = kind
        self.rec.error = self.scrub(message)


_HARMONY_OPENERS = ("<|channel|>", "<|start|>assistant")


def _opens_harmony(text: object) -> bool:
    """Whether a completion's first text is gpt-oss's raw Harmony (its special tokens kept)."""
    return isinstance(text, str) and text.lstrip().startswith(_HARMONY_OPENERS)


def _by_channel(pieces: list[tuple[str, str]]) -> tuple[str, str]:
    content = "".join(text for channel, text in pieces if channel in ("final", "commentary"))
    return content, "".join(text for channel, text in pieces if channel == "analysis")


# _StreamReader._plain: the one event shape read without a JSON parse (vLLM's and benchy
# sim's content deltas; other servers' events take the general path).
PLAIN_LEARN_EVENTS = 4  # the plain shape is learnt from a stream's first events, or not at all
_PLAIN_CHOICE = b'"choices":[{"index":0,"delta":{"content":"'
_PLAIN_TAILS = frozenset(
    {b'"},"logprobs":null,"finish_reason":null}]}', b'"},"logprobs":null,"finish_reason":null}],"usage":null}'}
)
# What follows the plain head in a plain event, to its end: the content (no quote, no escape,
# no control character: each would need the JSON parse) and a known tail. _plain's test, in C.
_PLAIN_REST = re.compile(rb'([^"\\\x00-\x1f]+)(?:' + b"|".join(re.escape(t) for t in sorted(_PLAIN_TAILS)) + rb")\n\n")


def _loads(data: bytes) -> object:
    """The payload as JSON (orjson: bytes in, 3-4x faster than json), None if it is not JSON.
    Whatever orjson refuses (NaN, invalid UTF-8, lone surrogates) gets json's verdict on the
    text decoded as every other byte of the stream is: invalid UTF-8 as U+FFFD."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
