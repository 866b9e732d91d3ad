"""The client: sends one request and records what arrived, when. No statistics here.

Every chunk is timestamped (`time.perf_counter`) the moment it is read, before any parsing, so
parsing cost never shifts a timestamp. Two transports carry the same requests: benchy.client.http1
(the default, "lean": httptools on asyncio's buffered protocol) and aiohttp (`--transport
aiohttp`, aiohttp_pool.py: 20-40% more CPU per streamed token; the reference to compare against;
the figures are in docs/network.md). Both take a proxy from the environment (HTTP_PROXY /
HTTPS_PROXY / NO_PROXY, unless `env_proxy=False`), keep the base URL's query string
(`?api-version=…`) on every request, send the extra `--header`s, and follow redirects by one
policy (`redirect_target`). The server's side pages (benchy.server: identity, /metrics, the
stated capacity, a cache reset) go through `Client.page`, on an Http1Pool of their own whichever
transport carries the streams, so that reading them costs no aiohttp import and takes no warmed
connection. What arrives is read into the record by reader.py; failures are named by errors.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from urllib.parse import urljoin

import orjson

from benchy.client import embeddings, images, messages, rerank, responses, tools
from benchy.client.aiohttp_pool import AiohttpPool
from benchy.client.booking import Api
from benchy.client.connect import HttpFailure, env_proxy
from benchy.client.draft import Draft
from benchy.client.errors import ServerError, TransientError, failure_of, server_error
from benchy.client.http1 import Http1Pool, OnHead, Request, Response, Sink
from benchy.client.reader import StreamReader, json_or_none, str_or_none
from benchy.client.redact import redact_url, scrub
from benchy.client.settings import ClientSettings, secrets_of, split_credentials
from benchy.jsontypes import JsonObject
from benchy.records import Anomaly, RequestRecord

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


def redirect_target(method: str, status: int, location: str | None, url: str) -> str | None:
    """Where a redirect sends the request, if benchy follows it: 307 and 308 keep the method and
    body; 301, 302 and 303 are followed for GET only (a POST there would turn into a GET, as
    browsers do, and lose its body). None: not a redirect to follow."""
    if not location or not (status in (307, 308) or (status in (301, 302, 303) and method == "GET")):
        return None
    return urljoin(url, location)


class Client:
    """One server as benchy talks to it, used as an async context manager (it owns the
    transport's connections): `stream` sends a measured request and makes its record
    (client/draft.py), never raising for a failed one; the model list and calibration requests
    raise ServerError or TransientError, for no measurement rides on them; `page` reads a side page."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        url, basic = split_credentials(settings.base_url.split("#")[0])
        base, _, self.query = url.partition("?")
        self.base = base.rstrip("/")
        self.origin = "/".join(self.base.split("/", 3)[:3])
        self.secrets = secrets_of(settings)
        self.calibration_failures: list[str] = []  # retried calibration attempts, scrubbed
        self._credentials = self._credential_headers(basic)
        self._transport: Http1Pool | AiohttpPool | None = None
        self._pages: Http1Pool | None = None  # the side pages' own connections (page())

    async def __aenter__(self) -> Client:
        if self.settings.transport == "aiohttp":
            self._transport = AiohttpPool(self.settings, self._proxy_for)
        else:
            self._transport = self._lean_pool()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._transport is not None:
            await _closed(self._transport)
        if self._pages is not None:
            self._pages.close()

    @property
    def _proxy_for(self) -> Callable[[str], str | None]:
        return env_proxy if self.settings.env_proxy else _no_proxy

    def _lean_pool(self) -> Http1Pool:
        return Http1Pool(self.settings.insecure, {"User-Agent": "benchy"}, self._proxy_for, self.settings.stream)

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
    def transport(self) -> Http1Pool | AiohttpPool:
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
    async def page(
        self,
        method: str,
        url: str,
        payload: JsonObject | None = None,
        timeout_s: float = PAGE_TIMEOUT_S,
        fresh: bool = False,
    ) -> Page:
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
        page, reused = await self._page_once(self._pages, method, url, body, timeout_s, fresh=fresh)
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
    async def list_models(self) -> list[JsonObject]:
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
        data = json_or_none(page.body) if page.status == 200 else None
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
        data = json_or_none(body)
        if data is None:
            raise ServerError(f"{where}: response is not JSON")
        return data

    # ---- requests -----------------------------------------------------------------------
    def payload(
        self, prompt: str, max_tokens: int, endpoint: str, stream: bool = True, extra: JsonObject | None = None
    ) -> JsonObject:
        if extra and images.IMAGES in extra:  # --images: the body built, then the images put in
            extra = dict(extra)
            urls = extra.pop(images.IMAGES)
            return images.attach(self.payload(prompt, max_tokens, endpoint, stream, extra), endpoint, urls)
        extra = tools.with_tools(extra, self.settings.tools, self.settings.tool_choice, endpoint)
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

    async def usage_of(self, prompt: str, endpoint: str, extra: JsonObject | None = None) -> JsonObject:
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
        self, prompt: str, endpoint: str, max_tokens: int, extra: JsonObject | None = None
    ) -> tuple[str, JsonObject, str | None]:
        """A non-streamed request of max_tokens: (the answer's text, usage, finish_reason). For
        calibrating the local count of output text; raises ServerError or TransientError."""
        obj = await self._post_once(prompt, endpoint, max_tokens, extra)
        choice = (obj.get("choices") or [{}])[0]
        if not isinstance(choice, dict):
            return "", obj["usage"], None
        message = choice.get("message")
        held: JsonObject = message if isinstance(message, dict) else choice
        # One reasoning text, as a stream is read: a server between the two names (vLLM around
        # the reasoning_content -> reasoning rename) sends the same text in both.
        reasoning = str_or_none(held.get("reasoning_content")) or str_or_none(held.get("reasoning"))
        # A tool call's name and arguments are output, read as a stream reads them (tools.py).
        calls = held.get("tool_calls")
        fns = [c["function"] for c in calls or [] if isinstance(c, dict) and isinstance(c.get("function"), dict)]
        named = [p for f in fns for p in (f.get("name"), f.get("arguments"))]
        parts = [reasoning, held.get("content"), held.get("text"), *named]
        return "".join(p for p in parts if isinstance(p, str)), obj["usage"], str_or_none(choice.get("finish_reason"))

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
            obj = json_or_none(data) if status == 200 else None
            tokens = obj.get("tokens") if isinstance(obj, dict) else None
            if isinstance(tokens, list):
                return len(tokens)
        return None

    async def _usage_once(self, prompt: str, endpoint: str, extra: JsonObject | None = None) -> JsonObject:
        usage: JsonObject = (await self._post_once(prompt, endpoint, 1, extra))["usage"]
        return usage

    async def _post_once(
        self, prompt: str, endpoint: str, max_tokens: int, extra: JsonObject | None = None
    ) -> JsonObject:
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
        obj = json_or_none(data)
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
        planned: RequestRecord | Draft,
        prompt: str,
        max_tokens: int,
        endpoint: str,
        extra: JsonObject | None = None,
        harmony: bool = False,
    ) -> RequestRecord:
        """Sends one streamed request; its record, made once from the plan's and what arrived
        when the answer closed. Never raises for a failed request: the failure is recorded on
        the record with a kind. `planned`: the plan's record, or a Draft of it that the caller
        holds, so that it can cut the request should it be stopped in flight (load/drain.py).

        A reused keep-alive connection that drops before any response byte is most often one
        the server had already closed while idle (llama.cpp's server does after 5 s). That
        request is sent once more on a fresh connection, its timestamps restart, and
        the record's `retried` keeps the first failure.

        harmony: the completion text is raw Harmony; its analysis channel counts as reasoning,
        its final channel as content, and marker-only deltas carry no token."""
        rec = planned if isinstance(planned, Draft) else Draft(planned)
        payload = self.payload(prompt, max_tokens, endpoint, self.settings.stream, extra)
        rec.streamed = bool(payload.get("stream"))
        if endpoint in POOLING:
            rec.inputs = POOLING[endpoint].inputs(payload)
        body = orjson.dumps(payload)
        reused = await self._send(rec, body, endpoint, False, harmony)
        if reused and rec.error_kind == "reset":
            rec.retry()
            await self._send(rec, body, endpoint, True, harmony)
        return rec.record()

    async def _send(self, rec: Draft, body: bytes, endpoint: str, fresh: bool, harmony: bool) -> bool:
        """One attempt; returns whether it went over a reused keep-alive connection. Body bytes
        reach the reader as they are read, stamped before parsing."""
        reader = StreamReader(rec, self.scrub, harmony, _api(endpoint), whole=not rec.streamed)
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
PATHS["embeddings"] = "/embeddings"
PATHS["rerank"] = "/rerank"  # llama.cpp and vLLM serve /v1/rerank and /rerank
POOLING = {"embeddings": embeddings, "rerank": rerank}  # inputs answered, no token generated
_APIS: dict[str, Api] = {"responses": responses, "messages": messages, **POOLING}


def _api(endpoint: str) -> Api | None:
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


async def _closed(transport: Http1Pool | AiohttpPool) -> None:
    if isinstance(transport, Http1Pool):
        transport.close()
    else:
        await transport.close()
