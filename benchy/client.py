"""The HTTP/SSE client: sends one request and records what arrived, when. No statistics here.

Every chunk is timestamped (`time.perf_counter`) the moment it is read, before any parsing, so
parsing cost never shifts a timestamp. The API key goes only into the Authorization header.
"""
from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from benchy.records import CONTENT, REASONING, RequestRecord
from benchy.sse import SSEParser


class ServerError(Exception):
    """The server could not be used at all (down, wrong URL, model not served). One line."""


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


def redact_url(url: str) -> str:
    """The URL without user:password and query string, fit for results and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class Client:
    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self.base = settings.base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "Client":
        ssl_ctx: ssl.SSLContext | bool = False if self.settings.insecure else True
        connector = aiohttp.TCPConnector(limit=self.settings.connections + 4, ssl=ssl_ctx)
        headers = {"User-Agent": "benchy"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_s,
                                        sock_read=self.settings.stall_timeout_s)
        # read_bufsize: SSE lines of a buffered server can be long; we parse them ourselves.
        self._session = aiohttp.ClientSession(connector=connector, headers=headers,
                                              timeout=timeout, read_bufsize=2**20)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use Client as an async context manager"
        return self._session

    # ---- server facts -------------------------------------------------------------------
    async def list_models(self) -> list[dict]:
        data = await self._get_json(f"{self.base}/models")
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise ServerError(f"{redact_url(self.base)}/models did not return a model list")
        return models

    async def server_version(self) -> str | None:
        """From /version (vLLM, SGLang, the simulator), else the Server header."""
        root = self.base[:-3] if self.base.endswith("/v1") else self.base
        try:
            async with self.session.get(f"{root}/version") as resp:
                server = resp.headers.get("Server")
                if resp.status == 200:
                    data = await resp.json(content_type=None)
                    if isinstance(data, dict) and data.get("version"):
                        return str(data["version"])
                return server
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
            return None

    async def _get_json(self, url: str) -> object:
        where = redact_url(url)
        try:
            async with self.session.get(url) as resp:
                if resp.status in (401, 403):
                    raise ServerError(f"{where}: HTTP {resp.status}: check --api-key / $OPENAI_API_KEY")
                if resp.status != 200:
                    raise ServerError(f"{where}: HTTP {resp.status}")
                return await resp.json(content_type=None)
        except aiohttp.ClientConnectorError as exc:
            raise ServerError(f"cannot reach the server at {where}: {exc.os_error.strerror or exc}") from None
        except asyncio.TimeoutError:
            raise ServerError(f"{where}: no answer within {self.settings.timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            raise ServerError(f"{where}: {type(exc).__name__}: {exc}") from None
        except ValueError:
            raise ServerError(f"{where}: response is not JSON") from None

    # ---- requests -----------------------------------------------------------------------
    def payload(self, prompt: str, max_tokens: int, endpoint: str, stream: bool = True,
                extra: dict | None = None) -> dict:
        body: dict = {"model": self.settings.model, "max_tokens": max_tokens,
                      "temperature": 0, "stream": stream}
        if endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update(extra or {})
        body.update(self.settings.extra_body or {})
        return body

    def url(self, endpoint: str) -> str:
        return f"{self.base}/chat/completions" if endpoint == "chat" else f"{self.base}/completions"

    async def usage_of(self, prompt: str, endpoint: str) -> dict:
        """A non-streamed one-token request; returns its usage (for calibration)."""
        url = self.url(endpoint)
        try:
            async with self.session.post(url, json=self.payload(prompt, 1, endpoint, stream=False)) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:200].replace("\n", " ")
                    raise ServerError(f"{redact_url(url)}: HTTP {resp.status}: {text}")
                data = await resp.json(content_type=None)
        except aiohttp.ClientError as exc:
            raise ServerError(f"{redact_url(url)}: {type(exc).__name__}: {exc}") from None
        except asyncio.TimeoutError:
            raise ServerError(f"{redact_url(url)}: no answer within {self.settings.timeout_s:g} s") from None
        usage = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
            raise ServerError(f"{redact_url(url)}: response has no usage.prompt_tokens")
        return usage

    async def stream(self, rec: RequestRecord, prompt: str, max_tokens: int, endpoint: str,
                     extra: dict | None = None) -> RequestRecord:
        """Sends one streamed request and fills `rec` with what arrived. Never raises for a
        failed request: the failure is recorded on the record with a kind."""
        body = self.payload(prompt, max_tokens, endpoint, extra=extra)
        headers = {"X-Request-Id": rec.request_id}
        reader = _StreamReader(rec)
        rec.sent_unix_s = time.time()
        t0 = time.perf_counter()
        rec.sent_mono_s = t0
        try:
            async with self.session.post(self.url(endpoint), json=body, headers=headers) as resp:
                rec.headers_s = time.perf_counter() - t0
                rec.http_status = resp.status
                if resp.status != 200:
                    await reader.http_error(resp)
                elif "text/event-stream" not in resp.headers.get("Content-Type", ""):
                    await reader.not_sse(resp)
                else:
                    async for chunk in resp.content.iter_any():
                        reader.feed(chunk, time.perf_counter() - t0)
                    reader.close(time.perf_counter() - t0)
        except aiohttp.ServerTimeoutError:
            reader.fail("stall", f"no data for {self.settings.stall_timeout_s:g} s (--stall-timeout)")
        except asyncio.TimeoutError:
            reader.fail("timeout", f"request exceeded {self.settings.timeout_s:g} s (--timeout)")
        except aiohttp.ClientConnectorError as exc:
            reader.fail("connect", str(exc.os_error.strerror or exc))
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError,
                aiohttp.ClientOSError) as exc:
            reader.fail("disconnect", f"{type(exc).__name__}: {exc}")
        except aiohttp.ClientError as exc:
            reader.fail("client_error", f"{type(exc).__name__}: {exc}")
        if rec.end_s is None:
            rec.end_s = time.perf_counter() - t0
        return rec


class _StreamReader:
    """Turns SSE payloads into the record's fields. Kept lean: it runs once per event."""

    __slots__ = ("rec", "parser", "done", "bad_events")

    def __init__(self, rec: RequestRecord) -> None:
        self.rec = rec
        self.parser = SSEParser()
        self.done = False
        self.bad_events = 0

    def feed(self, chunk: bytes, now: float) -> None:
        rec = self.rec
        for data in self.parser.feed(chunk):
            rec.sse_events += 1
            if rec.first_chunk_s is None:
                rec.first_chunk_s = now
            self._event(data, now)

    def close(self, now: float) -> None:
        for data in self.parser.close():
            self._event(data, now)
        rec = self.rec
        rec.end_s = now
        if rec.status != "ok":
            return
        if self.bad_events:
            rec.anomalies.append(f"malformed_events:{self.bad_events}")
        if not self.done:
            rec.anomalies.append("no_done")
        if not rec.usage_reported:
            rec.anomalies.append("no_usage")
        if rec.sse_events == 0:
            self.fail("bad_stream", "the stream ended without a single event")

    def _event(self, data: str, now: float) -> None:
        if data == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.bad_events += 1
            return
        if not isinstance(obj, dict):
            self.bad_events += 1
            return
        if obj.get("error"):
            err = obj["error"]
            self.fail("server_error", str(err.get("message", err) if isinstance(err, dict) else err)[:300])
            return
        choices = obj.get("choices")
        if choices:
            self._choice(choices[0], now)
        usage = obj.get("usage")
        if usage:
            self._usage(usage)
        timings = obj.get("timings")
        if timings:
            self.rec.server_timings = timings

    def _choice(self, choice: dict, now: float) -> None:
        rec = self.rec
        delta = choice.get("delta")
        if delta is None:  # /v1/completions streams `text`; non-chat servers may too
            delta = choice
            content = choice.get("text")
        else:
            content = delta.get("content")
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            rec.reasoning_chars += len(reasoning)
        if content:
            rec.content_chars += len(content)
        elif "content" in delta and content is None and not reasoning and not delta.get("role"):
            rec.content_null_events += 1
        if content or reasoning:
            rec.token_event_s.append(now)
            rec.token_event_chars.append(len(content or "") + len(reasoning or ""))
            rec.token_event_kinds += CONTENT if content else REASONING
        if choice.get("finish_reason"):
            rec.finish_reason = choice["finish_reason"]

    def _usage(self, usage: dict) -> None:
        rec = self.rec
        rec.usage_reported = True
        rec.prompt_tokens = usage.get("prompt_tokens")
        rec.completion_tokens = usage.get("completion_tokens")
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        rec.cached_tokens = prompt_details.get("cached_tokens")
        rec.reasoning_tokens = completion_details.get("reasoning_tokens")

    async def http_error(self, resp: aiohttp.ClientResponse) -> None:
        text = (await resp.text(errors="replace"))[:300].replace("\n", " ")
        retry_after = resp.headers.get("Retry-After")
        extra = f" (Retry-After: {retry_after})" if retry_after else ""
        self.fail(f"http_{resp.status}", f"HTTP {resp.status}{extra}: {text}")

    async def not_sse(self, resp: aiohttp.ClientResponse) -> None:
        ctype = resp.headers.get("Content-Type", "none")
        await resp.read()
        self.fail("bad_stream", f"response is not an event stream (Content-Type: {ctype})")

    def fail(self, kind: str, message: str) -> None:
        if self.rec.status == "error":
            return  # keep the first cause
        self.rec.status = "error"
        self.rec.error_kind = kind
        self.rec.error = message
