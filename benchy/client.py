"""The HTTP/SSE client: sends one request and records what arrived, when. No statistics here.

Every chunk is timestamped (`time.perf_counter`) the moment it is read, before any parsing, so
parsing cost never shifts a timestamp. The API key goes only into the Authorization header, and
is scrubbed from every message benchy keeps (`Client.scrub`).

Error kinds a failed request is recorded with: http_<status>, connect (nothing listens / DNS),
tls (certificate not trusted), reset (connection dropped before the response began), disconnect
(dropped mid-response), stall (silence > --stall-timeout), timeout (> --timeout), not_sse (a
body that is not an event stream), bad_stream (an event stream without a single event),
server_error (an `error` event in the stream), client_error, internal (a benchy bug; report it).
A successful request may carry anomalies: no_done, no_usage, malformed_events:N, and with a
Harmony template special_tokens_stripped (the server dropped <|channel|> & co. from the text,
so analysis and final cannot be told apart: all of it counts as content).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import aiohttp

from benchy.harmony import HarmonyStream, markers_missing
from benchy.http1 import Http1Pool, HttpFailure, Response
from benchy.records import CONTENT, REASONING, RequestRecord
from benchy.sse import SSEParser


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
    # Streamed requests go over benchy.http1 ("lean": a few µs of CPU per event) or aiohttp
    # ("aiohttp": 12-15 µs; kept to compare against). Everything else always uses aiohttp.
    transport: str = "lean"


def redact_url(url: str) -> str:
    """The URL without user:password and query string, fit for results and logs."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def split_credentials(url: str) -> tuple[str, aiohttp.BasicAuth | None]:
    """The URL without `user:password@`, and those credentials as Basic auth (None if absent)."""
    parts = urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=host)), aiohttp.BasicAuth(unquote(user), unquote(password))


def secrets_of(settings: ClientSettings) -> list[str]:
    """Every secret the settings hold, as written and percent-encoded, for scrubbing."""
    _, auth = split_credentials(settings.base_url)
    found = [settings.api_key] + ([auth.login, auth.password] if auth else [])
    return sorted({form for s in found if s for form in (s, quote(s, safe=""))}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class Client:
    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        base, self._url_auth = split_credentials(settings.base_url.rstrip("/"))
        self.base = base
        self.secrets = secrets_of(settings)
        self.calibration_failures: list[str] = []  # retried calibration attempts, scrubbed
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        self._lean: Http1Pool | None = None

    async def __aenter__(self) -> Client:
        self._session = self._new_session(aiohttp.TCPConnector(limit=self.settings.connections + 4, ssl=self._ssl()))
        if self.settings.transport == "lean":
            self._lean = Http1Pool(self.base, self.settings.insecure, self._lean_headers())
        return self

    async def __aexit__(self, *exc) -> None:
        if self._lean is not None:
            self._lean.close()
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()

    def _lean_headers(self) -> dict[str, str]:
        """The aiohttp session's headers: the API key, else the URL's credentials as Basic auth."""
        headers = {"User-Agent": "benchy"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        elif self._url_auth is not None:
            headers["Authorization"] = self._url_auth.encode()
        return headers

    def _ssl(self) -> bool:
        return not self.settings.insecure  # True: verify certificates against the system store

    def _new_session(self, connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        headers = {"User-Agent": "benchy"}
        if self.settings.api_key:
            headers["Authorization"] = f"Bearer {self.settings.api_key}"
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_s, sock_read=self.settings.stall_timeout_s)
        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_note_reused_connection)
        # read_bufsize: SSE lines of a buffered server can be long; we parse them ourselves.
        # URL credentials go as Basic auth only when no API key is given (never both).
        return aiohttp.ClientSession(
            connector=connector,
            headers=headers,
            timeout=timeout,
            read_bufsize=2**20,
            trace_configs=[trace],
            auth=None if self.settings.api_key else self._url_auth,
        )

    def _fresh_session(self) -> aiohttp.ClientSession:
        """A session that opens a new connection for every request (for the one retry)."""
        if self._fresh is None:
            self._fresh = self._new_session(aiohttp.TCPConnector(force_close=True, ssl=self._ssl()))
        return self._fresh

    def scrub(self, text: str) -> str:
        """`text` with every secret of the settings replaced by ***."""
        return scrub(text, self.secrets)

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
        except aiohttp.ClientConnectorCertificateError as exc:
            raise ServerError(
                f"{where}: TLS certificate not trusted ({exc.certificate_error}); pass --insecure to skip verification"
            ) from None
        except aiohttp.ClientConnectorError as exc:
            raise ServerError(f"cannot reach the server at {where}: {exc.os_error.strerror or exc}") from None
        except asyncio.TimeoutError:
            raise ServerError(f"{where}: no answer within {self.settings.timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            raise ServerError(f"{where}: {type(exc).__name__}: {exc}") from None
        except ValueError:
            raise ServerError(f"{where}: response is not JSON") from None

    # ---- requests -----------------------------------------------------------------------
    def payload(
        self, prompt: str, max_tokens: int, endpoint: str, stream: bool = True, extra: dict | None = None
    ) -> dict:
        body: dict = {"model": self.settings.model, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
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

    async def _usage_once(self, prompt: str, endpoint: str, extra: dict | None = None) -> dict:
        url = self.url(endpoint)
        where = redact_url(url)
        try:
            async with self.session.post(
                url, json=self.payload(prompt, 1, endpoint, stream=False, extra=extra)
            ) as resp:
                if resp.status != 200:
                    text = (await resp.text(errors="replace"))[:200].replace("\n", " ")
                    message = f"{where}: HTTP {resp.status}: {text}"
                    if resp.status == 429 or resp.status >= 500:
                        raise TransientError(message, _retry_after_s(resp))
                    raise ServerError(message)
                data = await resp.json(content_type=None)
        except aiohttp.ClientConnectorError as exc:
            raise ServerError(f"cannot reach the server at {where}: {exc.os_error.strerror or exc}") from None
        except aiohttp.ServerTimeoutError:
            raise TransientError(f"{where}: no data for {self.settings.stall_timeout_s:g} s") from None
        except asyncio.TimeoutError:
            raise ServerError(f"{where}: no answer within {self.settings.timeout_s:g} s") from None
        except aiohttp.ClientError as exc:
            raise TransientError(f"{where}: {type(exc).__name__}: {exc}") from None
        except (ValueError, RecursionError):
            raise TransientError(f"{where}: the response is not valid JSON") from None
        usage = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
            raise TransientError(f"{where}: response has no usage.prompt_tokens")
        return usage

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
        the server had already closed while idle (llama.cpp's server does after 5 s; aiohttp
        then fails with "Can not write request body"). That request is sent once more on a
        fresh connection, its timestamps restart, and `rec.retried` keeps the first failure.

        harmony: the completion text is raw Harmony; its analysis channel counts as reasoning,
        its final channel as content, and marker-only deltas carry no token."""
        body = self.payload(prompt, max_tokens, endpoint, extra=extra)
        reused = await self._send(rec, body, endpoint, self.session, harmony)
        if reused and rec.error_kind == "reset":
            rec.retried = f"{rec.error_kind}: {rec.error}"
            rec.status, rec.error_kind, rec.error, rec.end_s = "ok", None, None, None
            await self._send(rec, body, endpoint, self._fresh_session(), harmony)
        return rec

    async def _send(
        self, rec: RequestRecord, body: dict, endpoint: str, session: aiohttp.ClientSession, harmony: bool = False
    ) -> bool:
        """One attempt; returns whether it went over a reused keep-alive connection."""
        if self._lean is not None:
            return await self._send_lean(rec, body, endpoint, session is self._fresh, harmony)
        headers = {"X-Request-Id": rec.request_id}
        reader = _StreamReader(rec, self.scrub, harmony)
        trace_ctx = {"reused": False}
        rec.sent_unix_s = time.time()
        t0 = time.perf_counter()
        rec.sent_mono_s = t0
        try:
            async with session.post(
                self.url(endpoint), json=body, headers=headers, trace_request_ctx=trace_ctx
            ) as resp:
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
        except aiohttp.ConnectionTimeoutError:
            reader.fail("connect", f"no connection within {self.settings.timeout_s:g} s")
        except aiohttp.ServerTimeoutError:
            reader.fail("stall", f"no data for {self.settings.stall_timeout_s:g} s (--stall-timeout)")
        except asyncio.TimeoutError:
            reader.fail("timeout", f"request exceeded {self.settings.timeout_s:g} s (--timeout)")
        except aiohttp.ClientConnectorCertificateError as exc:
            reader.fail("tls", f"certificate not trusted: {exc.certificate_error}")
        except aiohttp.ClientConnectorError as exc:
            reader.fail("connect", str(exc.os_error.strerror or exc))
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            kind = "reset" if rec.http_status is None else "disconnect"
            reader.fail(kind, f"{type(exc).__name__}: {exc}")
        except aiohttp.ClientError as exc:
            reader.fail("client_error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a benchy bug must not end the run nor lose the request
            reader.fail("internal", f"{type(exc).__name__}: {exc}")
        if rec.end_s is None:
            rec.end_s = time.perf_counter() - t0
        return trace_ctx["reused"]

    async def _send_lean(self, rec: RequestRecord, body: dict, endpoint: str, fresh: bool, harmony: bool) -> bool:
        """_send over benchy.http1: body bytes reach the reader inside the socket callback,
        stamped before parsing; the same error kinds and messages as the aiohttp path."""
        reader = _StreamReader(rec, self.scrub, harmony)
        data = json.dumps(body).encode()
        path = urlsplit(self.url(endpoint)).path
        rec.sent_unix_s = time.time()
        t0 = time.perf_counter()
        rec.sent_mono_s = t0

        def on_head(resp: Response) -> bool:
            rec.headers_s = resp.head_s - t0
            rec.http_status = resp.status
            return resp.status == 200 and "text/event-stream" in resp.headers.get("content-type", "")

        reused = False
        try:
            assert self._lean is not None  # _send_lean is called only with a lean pool
            resp = await self._lean.post(
                path,
                data,
                {"X-Request-Id": rec.request_id},
                on_head,
                lambda chunk, now: reader.feed(chunk, now - t0),
                self.settings.timeout_s,
                self.settings.stall_timeout_s,
                fresh,
            )
            reused = resp.reused
            if resp.streamed:
                reader.close(resp.end_s - t0)
            elif resp.status != 200:
                reader.http_failure(resp.status, resp.headers.get("retry-after"), resp.peek)
            else:
                reader.not_event_stream(resp.headers.get("content-type"), resp.peek)
        except HttpFailure as exc:
            reused = exc.reused
            reader.fail(exc.kind, exc.message)
        except Exception as exc:  # a benchy bug must not end the run nor lose the request
            reader.fail("internal", f"{type(exc).__name__}: {exc}")
        if rec.end_s is None:
            rec.end_s = time.perf_counter() - t0
        return reused


async def _note_reused_connection(session, trace_config_ctx, params) -> None:
    if isinstance(trace_config_ctx.trace_request_ctx, dict):
        trace_config_ctx.trace_request_ctx["reused"] = True


def _retry_after_s(resp: aiohttp.ClientResponse) -> float | None:
    try:
        return max(0.0, float(resp.headers.get("Retry-After", "")))
    except ValueError:
        return None  # absent, or an HTTP date: fall back to our own backoff


class _StreamReader:
    """Turns SSE payloads into the record's fields. Kept lean: it runs once per event."""

    __slots__ = (
        "rec",
        "parser",
        "done",
        "bad_events",
        "scrub",
        "harmony",
        "unmarked",
        "last_text_s",
        "known_head",
        "plain_prefix",
        "texts",
    )

    def __init__(self, rec: RequestRecord, scrub: Callable[[str], str] = str, harmony: bool = False) -> None:
        self.rec = rec
        self.parser = SSEParser()
        self.done = False
        self.bad_events = 0
        self.scrub = scrub
        self.harmony = HarmonyStream() if harmony else None
        self.unmarked: list[str] = []  # Harmony text until its first marker (markers_missing)
        self.last_text_s = 0.0
        self.known_head: str | None = None  # see _plain_content
        self.plain_prefix = b""  # `data: ` + known_head + the plain choice, as bytes
        self.texts: list[str] = []  # each token event's text, joined into rec.token_event_text

    def feed(self, chunk: bytes, now: float) -> None:
        rec = self.rec
        if self.known_head is not None and self.parser.idle():
            done = self._plain_events(chunk, now)
            if done == len(chunk):
                return
            chunk = chunk[done:]
        for data in self.parser.feed(chunk):
            rec.sse_events += 1
            if rec.first_chunk_s is None:
                rec.first_chunk_s = now
            if self.known_head is None or not self._plain_content(self.known_head, data, now):
                self._event(data, now)

    def close(self, now: float) -> None:
        for data in self.parser.close():
            self._event(data, now)
        rec = self.rec
        rec.end_s = now
        rec.token_event_text = "".join(self.texts)
        if rec.status != "ok":
            return
        if self.harmony is not None:
            self._harmony_close(self.harmony)
            rec.token_event_text = "".join(self.texts)
        if self.bad_events:
            rec.anomalies.append(f"malformed_events:{self.bad_events}")
        if not self.done:
            rec.anomalies.append("no_done")
        if not rec.usage_reported:
            rec.anomalies.append("no_usage")
        if rec.sse_events == 0:
            self.fail("bad_stream", "the stream ended without a single event")

    def _event(self, data: str, now: float) -> None:
        """One data payload. Garbage of any shape is counted in bad_events, never raised."""
        if data == "[DONE]":
            self.done = True
            return
        try:
            obj = _loads(data)
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            self.bad_events += 1
            return
        if self.known_head is None and self.harmony is None:
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

    def _learn_head(self, data: str) -> None:
        """Keeps what precedes the choices of an event that parsed as JSON (id, object, created,
        model: the same in every event of a stream), when it holds no key the reader acts on."""
        cut = data.find(_PLAIN_CHOICE)
        if cut > 0 and not any(key in data[:cut] for key in ('"error"', '"usage"', '"timings"')):
            self.known_head = data[:cut]
            self.plain_prefix = f"data: {data[:cut]}{_PLAIN_CHOICE}".encode()

    def _plain_events(self, chunk: bytes, now: float) -> int:
        """_plain_content on the raw bytes, before SSE parsing, for the whole `data: …` events
        the chunk starts with: how many bytes were read so (the rest goes the usual way)."""
        prefix = self.plain_prefix
        rec = self.rec
        pos, size = 0, len(prefix)
        while chunk.startswith(prefix, pos):
            end = chunk.find(b"\n\n", pos)
            quote = chunk.find(b'"', pos + size, end)
            if end < 0 or quote <= pos + size or chunk[quote:end] not in _PLAIN_TAILS_BYTES:
                break
            raw = chunk[pos + size : quote]
            content = raw.decode("utf-8", errors="replace")
            if b"\\" in raw or not content.isprintable():
                break
            rec.sse_events += 1
            if rec.first_chunk_s is None:
                rec.first_chunk_s = now
            rec.content_chars += len(content)
            rec.token_event_s.append(now)
            rec.token_event_chars.append(len(content))
            rec.token_event_kinds += CONTENT
            self.texts.append(content)
            pos = end + 2
        return pos

    def _plain_content(self, head: str, data: str, now: float) -> bool:
        """The usual event without a JSON parse: the known head, one choice whose delta is a
        plain non-empty content string, and a known tail. Byte for byte that is valid JSON that
        the general path would read as exactly this, so only that shape is taken here; anything
        else (escapes, other keys, a finish_reason, usage) returns False for the general path."""
        if not data.startswith(head) or not data.startswith(_PLAIN_CHOICE, len(head)):
            return False
        start = len(head) + len(_PLAIN_CHOICE)
        end = data.find('"', start)
        content = data[start:end]
        if end <= start or data[end:] not in _PLAIN_TAILS or "\\" in content or not content.isprintable():
            return False
        rec = self.rec
        size = len(content)
        rec.content_chars += size
        rec.token_event_s.append(now)
        rec.token_event_chars.append(size)
        rec.token_event_kinds += CONTENT
        self.texts.append(content)
        return True

    def _choice(self, choice: dict, now: float) -> None:
        rec = self.rec
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
                size = len(content)
                rec.content_chars += size
                rec.token_event_s.append(now)
                rec.token_event_chars.append(size)
                rec.token_event_kinds += CONTENT
                self.texts.append(content)
                return
        if delta is None:  # /v1/completions streams `text`; non-chat servers may too
            delta = choice
            content = choice.get("text")
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
            self.texts.append((reasoning or "") + (content or ""))
        finish = choice.get("finish_reason")
        if finish:
            if isinstance(finish, str):
                rec.finish_reason = finish
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
                rec.token_event_kinds += REASONING
                self.texts.append("")
            rec.token_event_chars[-1] += len(content) + len(reasoning)
            self.texts[-1] += reasoning + content
            if content:
                rec.token_event_kinds = rec.token_event_kinds[:-1] + CONTENT
        if not harmony.saw_markers and markers_missing("".join(self.unmarked)):
            rec.anomalies.append("special_tokens_stripped")

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

    async def http_error(self, resp: aiohttp.ClientResponse) -> None:
        self.http_failure(resp.status, resp.headers.get("Retry-After"), await resp.content.read(300))

    async def not_sse(self, resp: aiohttp.ClientResponse) -> None:
        self.not_event_stream(resp.headers.get("Content-Type"), await resp.content.read(200))

    def http_failure(self, status: int, retry_after: str | None, body: bytes) -> None:
        """Both transports word an HTTP error alike: kind http_<status>, the body's start."""
        text = body[:300].decode("utf-8", errors="replace").replace("\n", " ")
        extra = f" (Retry-After: {retry_after})" if retry_after else ""
        self.fail(f"http_{status}", f"HTTP {status}{extra}: {text}")

    def not_event_stream(self, content_type: str | None, body: bytes) -> None:
        head = body[:200].decode("utf-8", errors="replace").replace("\n", " ")
        self.fail("not_sse", f"response is not an event stream (Content-Type: {content_type or 'none'}): {head}")

    def fail(self, kind: str, message: str) -> None:
        self.rec.token_event_text = "".join(self.texts)  # what arrived before the failure
        if self.rec.status == "error":
            return  # keep the first cause
        self.rec.status = "error"
        self.rec.error_kind = kind
        self.rec.error = self.scrub(message)


def _by_channel(pieces: list[tuple[str, str]]) -> tuple[str, str]:
    content = "".join(text for channel, text in pieces if channel in ("final", "commentary"))
    return content, "".join(text for channel, text in pieces if channel == "analysis")


# _StreamReader._plain_content: the one event shape read without a JSON parse (vLLM's and
# benchy sim's content deltas; other servers' events take the general path).
_PLAIN_CHOICE = '"choices":[{"index":0,"delta":{"content":"'
_PLAIN_TAILS = frozenset(
    {'"},"logprobs":null,"finish_reason":null}]}', '"},"logprobs":null,"finish_reason":null}],"usage":null}'}
)


_PLAIN_TAILS_BYTES = frozenset(t.encode() for t in _PLAIN_TAILS)


def _loads(data: str) -> object:
    """json.loads, through orjson when it is installed (3-4x faster; optional, not a
    dependency). Whatever orjson refuses (NaN, lone surrogates) gets json's verdict."""
    try:
        return _orjson_loads(data)
    except ValueError:
        return json.loads(data)


try:
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover
    _orjson_loads = json.loads  # type: ignore[assignment]  # json's signature is wider


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
