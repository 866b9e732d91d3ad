"""The simulator's HTTP face: OpenAI-compatible endpoints, SSE shaping, faults and truth log."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from benchy import __version__
from benchy.jsontypes import JsonObject
from benchy.sim import embeddings, images, rerank, stalls
from benchy.sim.apis import APIS, ID_PREFIX, BadRequest, to_chat
from benchy.sim.config import SimConfig
from benchy.sim.engine import (
    REASONING,
    Decoder,
    Engine,
    Trace,
    TruthLog,
    clock,
)
from benchy.sim.gpu import SimGpus
from benchy.sim.lifecycle import Lifecycle
from benchy.sim.metrics import SimMetrics
from benchy.sim.pages import Pages
from benchy.sim.render import RENDERERS, Renderer, usage
from benchy.sim.request import (
    JSON_TYPE,
    ApiError,
    Job,
    error_body,
    parse_job,
    read_json,
    requested_effort,
    stop_strings,
)
from benchy.sim.router import Router
from benchy.sim.stalls import StallWatch

SERVER_NAME = f"benchy-sim/{__version__}"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
# Faults answered at once, before any queueing or prefill.
IMMEDIATE_FAULTS = {"http500", "http429", "http429_retry", "reset", "not_sse"}
NOT_SSE_BODY = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>upstream unavailable</p></body></html>"
)


def _abort(request: web.Request) -> None:
    """Drop the connection without a proper end (a fault); it may already be gone."""
    if request.transport is not None:
        request.transport.abort()


def authorization_digest(request: web.Request) -> str | None:
    header = request.headers.get("Authorization")
    return hashlib.sha256(header.encode()).hexdigest() if header is not None else None


class ClientGone(Exception):
    """The connection ended under us: the client left, or a fault cut it on purpose."""

    def __init__(self, finish_reason: str | None = "abort"):
        super().__init__(finish_reason)
        self.finish_reason = finish_reason


class Outlet:
    """Where a stream's events go: straight to the socket, or (--proxy-buffer-bytes) through a
    reverse proxy's buffer that passes bytes on only once that many have gathered, as nginx
    does with proxy_buffering on. The truth log stamps each event when it really left."""

    def __init__(self, simulator: Simulator, resp: web.StreamResponse, trace: Trace):
        self._simulator, self._resp, self._trace = simulator, resp, trace
        self._limit = simulator.cfg.proxy_buffer_bytes
        self._held: list[tuple[str, int, bytes]] = []
        self._held_bytes = 0

    async def send(self, kind: str, tokens: int, data: bytes) -> None:
        if not self._limit:
            await self._simulator._write(self._resp, self._trace, kind, tokens, data)
            return
        self._held.append((kind, tokens, data))
        self._held_bytes += len(data)
        if self._held_bytes >= self._limit:
            await self.flush()

    async def flush(self) -> None:
        if not self._held:
            return
        held, self._held, self._held_bytes = self._held, [], 0
        await self._simulator._write(self._resp, self._trace, held[0][0], held[0][1], b"".join(d for *_, d in held))
        t = self._trace.events[-1]["t_s"]
        for kind, tokens, _ in held[1:]:
            self._trace.event(kind, tokens, t)


class Simulator:
    """One simulated server: its engines (one per replica) behind a router, and the truth log."""

    def __init__(self, cfg: SimConfig, truth: TruthLog | None = None, process: int = 0, life: int = 0):
        self.cfg = cfg
        self.engines = [Engine(cfg) for _ in range(cfg.replicas)]
        self.encoders = [images.Encoder(cfg.image_encode_tps, cfg.image_cache, cfg.instant) for _ in self.engines]
        self.router = Router(cfg)
        self.truth = truth or TruthLog(cfg.truth_log)
        self.process, self.life = process, life  # --processes: which one; a restart's count
        self.lifecycle = Lifecycle(cfg, self.truth.note)
        self.open: dict[int, web.Request] = {}  # requests being served (by id): a restart cuts them
        blocks = cfg.cache_blocks if cfg.prefix_cache else None
        self.metrics = SimMetrics(cfg.flavor, cfg.model, cfg.metrics_token_factor, blocks)
        # --router-pages: each replica's own account, beside the whole one
        self.replica_metrics = [
            SimMetrics(cfg.flavor, cfg.model, cfg.metrics_token_factor, blocks) for _ in range(cfg.replicas)
        ]
        self._fault_rng = random.Random(cfg.seed)
        self.gpus = SimGpus(cfg, clock(), self.truth.note, self.engines[0].heat_now) if cfg.gpus else None
        self.pages = Pages(cfg, self.engines, self.router, self.truth, self.metrics, self.replica_metrics, self.gpus)
        self._ids = itertools.count(1 + process * 10**7)  # unique across --processes
        self.stalls = StallWatch() if cfg.truth_log else None  # its loop's lateness, for the truth log

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.on_response_prepare.append(self._stamp_headers)
        self.pages.add_to(app)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_post("/v1/rerank", self.rerank)
        app.router.add_post("/rerank", self.rerank)
        if self.stalls is not None:
            app.cleanup_ctx.append(self._watch_stalls)
        return app

    async def _watch_stalls(self, app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(self.stalls.run()) if self.stalls else None
        yield
        if task:
            task.cancel()

    def close(self) -> None:
        self.truth.close()

    def cut(self) -> None:
        """Drops every connection being served, as a process that died would."""
        for request in list(self.open.values()):
            _abort(request)

    @staticmethod
    async def _stamp_headers(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = SERVER_NAME
        request_id = request.headers.get("x-request-id")
        if request_id:
            response.headers["x-request-id"] = request_id

    # --- generation ---

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "responses")

    async def messages(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "messages")

    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "embeddings")

    async def rerank(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "rerank")

    async def _generate(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        received_s = clock()
        self.lifecycle.arrived()
        self.open[id(request)] = request
        if self.cfg.proxy_delay_s:  # before the engine's clock starts: its own times never hold it
            await asyncio.sleep(self.cfg.proxy_delay_s)
        prefix = "chatcmpl" if endpoint == "chat" else ID_PREFIX.get(endpoint, "cmpl")
        trace = Trace(
            id=f"{prefix}-sim-{next(self._ids):06d}",
            endpoint=endpoint,
            request_id=request.headers.get("x-request-id"),
            arrival_s=clock(),
        )
        trace.proxy_held_s = trace.arrival_s - received_s
        trace.authorization_sha256 = authorization_digest(request)
        trace.replica = self.router.route()
        trace.process, trace.life = self.process, self.life
        try:
            try:
                return await self._serve(request, endpoint, trace)
            except ApiError as exc:
                trace.error = exc.message
                return await self._send_whole(
                    request, trace, exc.status, error_body(exc.status, exc.message), JSON_TYPE
                )
        except ClientGone as exc:
            trace.finish_reason = trace.finish_reason or exc.finish_reason
            return web.Response()  # never sent: the transport is closed
        except asyncio.CancelledError:  # the server is shutting down under this request
            trace.finish_reason = trace.finish_reason or "abort"
            raise
        finally:
            self.open.pop(id(request), None)
            if trace.routed:
                self.router.in_flight[trace.replica] -= 1
            self._log(trace)  # errors and faults too; a no-op if already written

    def _log(self, trace: Trace) -> None:
        """The truth record and the /metrics observation of a request, once each."""
        if self.stalls is not None and not trace.logged:  # from just before its first stamp
            trace.loop_behind_s = self.stalls.behind(trace.arrival_s - trace.proxy_held_s - stalls.INTERVAL_S, clock())
        if self.truth.write(trace):
            self.metrics.observe(trace)
            self.replica_metrics[trace.replica].observe(trace)

    async def _serve(self, request: web.Request, endpoint: str, trace: Trace) -> web.StreamResponse:
        body = await read_json(request)
        if endpoint == "embeddings":
            trace.model, encoded = embeddings.parse(self.cfg, body)
            model = trace.model or self.cfg.model
            return await self._pool(request, trace, encoded, lambda: embeddings.answer(model, trace.id, encoded))
        if endpoint == "rerank":
            trace.model, query, pairs = rerank.parse(self.cfg, body)
            model, top, trace.query_tokens = trace.model or self.cfg.model, rerank.top_n(body, len(pairs)), len(query)
            return await self._pool(request, trace, pairs, lambda: rerank.answer(model, trace.id, pairs, top))
        if endpoint in APIS:  # planned, served and logged as the chat request it amounts to
            try:
                body, endpoint = to_chat(body, endpoint), "chat"
            except BadRequest as exc:
                raise ApiError(400, str(exc)) from None
        trace.stream, trace.model = bool(body.get("stream", False)), body.get("model")
        job = parse_job(self.cfg, body, endpoint, trace.id)
        if self.cfg.route == "prefix":
            trace.replica = self.router.by_prefix(job.prompt_ids)
        self.router.in_flight[trace.replica] += 1
        trace.routed = True
        if endpoint == "chat":
            await self._see(body["messages"], job, trace)
        trace.model, trace.prompt_tokens = job.model, len(job.prompt_ids)
        trace.prompt_tokens_sent = job.prompt_tokens_sent
        trace.reasoning_dropped = job.reasoning_dropped
        trace.spec_steps = job.steps
        trace.stop = stop_strings(body) if body.get("stop") is not None else None
        trace.reasoning_effort = requested_effort(body, endpoint)
        trace.skip_special_tokens = job.skip_special_tokens
        if job.tools is not None:
            trace.tool_calls, trace.tool_tokens = len(job.tools.names), job.tools.tokens
            trace.tool_argument_tokens = job.tools.argument_tokens
        trace.output, trace.broken_tokens = self.cfg.output, job.plan.broken_tokens
        if job.echo is not None and len(job.echo[1]) > 1:
            trace.echo_logprob_mean = sum(job.echo[1][1:]) / (len(job.echo[1]) - 1)
        trace.fault = self._draw_fault()
        if trace.fault in IMMEDIATE_FAULTS:
            return await self._immediate_fault(request, trace)
        delay = self.cfg.header_delay_s + self.cfg.header_delay_per_token_s * len(job.prompt_ids)
        if delay:
            await asyncio.sleep(delay)
        if job.stream:
            return await self._stream(request, job, trace)
        return await self._complete(request, job, trace)

    async def _see(self, messages: list[JsonObject], job: Job, trace: Trace) -> None:
        """The request's images (sim/images.py): decoded, encoded or found in the encoder cache,
        their tokens prefilled after the text's."""
        seen, ids = await images.process(messages, self.cfg.image_patch, self.encoders[trace.replica])
        if not seen:
            return
        trace.images, trace.image_tokens = seen, len(ids)
        job.prompt_ids, job.prompt_tokens_sent = job.prompt_ids + ids, job.prompt_tokens_sent + len(ids)
        job.image_tokens = len(ids) if self.cfg.image_token_details else None
        if len(job.prompt_ids) >= self.cfg.context_length:
            raise ApiError(
                400,
                f"This model's maximum context length is {self.cfg.context_length} tokens; "
                f"the prompt has {len(job.prompt_ids)} with its images.",
            )

    async def _pool(
        self, request: web.Request, trace: Trace, encoded: list[list[int]], answer: Callable[[], bytes]
    ) -> web.StreamResponse:
        """A pooling request (sim/embeddings.py, sim/rerank.py): each input (a rerank's each
        query and document) prefilled in one slot, one after another; nothing decoded."""
        trace.stream = False
        trace.input_tokens = [len(ids) for ids in encoded]
        trace.prompt_tokens = trace.prompt_tokens_sent = sum(trace.input_tokens)
        trace.fault = self._draw_fault()
        if trace.fault in IMMEDIATE_FAULTS:  # the stream faults need a stream: a pooling answer has none
            return await self._immediate_fault(request, trace)
        engine = self.engines[trace.replica]
        self.router.in_flight[trace.replica] += 1
        trace.routed, trace.queued_s, trace.cached_tokens = True, clock(), 0
        await engine.slots.acquire()
        try:
            trace.admitted_s = clock()
            for ids in encoded:
                done = await engine.prefill(ids)
                engine.release(ids)
                trace.prefill_start_s = trace.prefill_start_s or done.start_s
                trace.prefill_end_s, trace.cached_tokens = done.end_s, trace.cached_tokens + done.cached_tokens
        finally:
            engine.slots.release()
        trace.finish_reason = "stop"
        return await self._send_whole(request, trace, 200, answer(), JSON_TYPE, event="content")

    def _draw_fault(self) -> str | None:
        if not self.cfg.faults:
            return None
        u, cumulative = self._fault_rng.random(), 0.0
        for kind, rate in self.cfg.faults:
            cumulative += rate
            if u < cumulative:
                return kind
        return None

    async def _immediate_fault(self, request: web.Request, trace: Trace) -> web.StreamResponse:
        kind = trace.fault
        if kind == "reset":
            _abort(request)
            raise ClientGone(finish_reason=None)
        if kind == "not_sse":
            return await self._send_whole(request, trace, 200, NOT_SSE_BODY, "text/html")
        status = 500 if kind == "http500" else 429
        message = "simulated internal error" if status == 500 else "simulated rate limit"
        headers = {"Retry-After": "1"} if kind == "http429_retry" else {}
        trace.error = message
        return await self._send_whole(request, trace, status, error_body(status, message), JSON_TYPE, headers)

    async def _send_whole(
        self,
        request: web.Request,
        trace: Trace,
        status: int,
        body: bytes,
        content_type: str,
        headers: JsonObject | None = None,
        event: str | None = None,
    ) -> web.StreamResponse:
        """A whole body at once; `event` names it in the truth log (None: not a model output)."""
        resp = web.StreamResponse(status=status, headers={"Content-Type": content_type, **(headers or {})})
        resp.content_length = len(body)
        await self._prepare(request, resp, trace)
        try:
            await resp.write(body)
        except ConnectionError:
            raise ClientGone() from None
        if event:
            trace.event(event, trace.completion_tokens, clock())
        return await self._finish(resp, trace)

    async def _prepare(self, request: web.Request, resp: web.StreamResponse, trace: Trace) -> None:
        try:
            await resp.prepare(request)
        except ConnectionError:
            raise ClientGone() from None
        trace.headers_s = clock()
        trace.status = resp.status

    async def _write(self, resp: web.StreamResponse, trace: Trace, kind: str, tokens: int, data: bytes) -> None:
        try:
            if data:  # an API with nothing to say here (no [DONE]) writes nothing, logs the event
                await resp.write(data)
        except ConnectionError:
            raise ClientGone() from None
        trace.event(kind, tokens, clock())
        if self.cfg.instant:
            await asyncio.sleep(0)  # resp.write only yields when its buffer is full

    async def _finish(self, resp: web.StreamResponse, trace: Trace) -> web.StreamResponse:
        # The record goes out before the end of the body, so a client that has read the
        # whole response can already find it in the truth log (and /metrics has counted it).
        self._log(trace)
        try:
            await resp.write_eof()
        except ConnectionError:
            pass
        return resp

    @contextlib.asynccontextmanager
    async def _running(self, trace: Trace, job: Job) -> AsyncIterator[None]:
        """Holds one of max_running slots (queueing FIFO for it) for the body of the block, and
        from its prefill on the prompt's cached blocks (engine.release)."""
        engine = self.engines[trace.replica]
        trace.queued_s = clock()
        await engine.slots.acquire()
        trace.admitted_s = clock()
        self._gpus_running()
        try:
            yield
        finally:
            if trace.prefill_end_s is not None:
                engine.release(job.prompt_ids)
            engine.slots.release()
            self._gpus_running()

    def _gpus_running(self) -> None:
        if self.gpus is not None:
            self.gpus.running(clock(), sum(engine.slots.running for engine in self.engines))

    async def _prefill(self, job: Job, trace: Trace, started: Callable[[], Awaitable[None]] | None = None) -> Decoder:
        engine = self.engines[trace.replica]
        done = await engine.prefill(job.prompt_ids, started)
        trace.prefill_start_s, trace.prefill_end_s, trace.cached_tokens = done.start_s, done.end_s, done.cached_tokens
        trace.reported_cached_tokens = done.reported_cached_tokens
        trace.cache_lost_tokens, trace.cache_evicted_blocks = done.lost_tokens, done.evicted_blocks
        trace.cache_used_blocks = done.cache_used_blocks
        trace.host_copy_s = engine.host_copy_seconds(len(job.prompt_ids))
        decoder = engine.decoder(done.end_s, job.steps)
        trace.token_due_s = decoder.dues
        return decoder

    def _record_tokens(self, trace: Trace, job: Job, times: list[float]) -> None:
        start = len(trace.token_times_s)
        trace.token_times_s.extend(times)
        trace.completion_tokens = len(trace.token_times_s)
        if job.plan.kinds is None:
            trace.reasoning_tokens = min(job.reasoning or job.think, trace.completion_tokens)
        else:
            trace.reasoning_tokens += job.plan.kinds[start : trace.completion_tokens].count(REASONING)
        if trace.first_content_token_s is None and job.first_content is not None:
            if trace.completion_tokens > job.first_content:
                trace.first_content_token_s = trace.token_times_s[job.first_content]

    def _usage(self, job: Job, trace: Trace) -> JsonObject:
        # A raw completion is not parsed, so the server cannot tell reasoning tokens apart; nor
        # can a server without a reasoning parser (--think-inline).
        reasoning = trace.reasoning_tokens if job.endpoint == "chat" and not job.think else 0
        claimed = round(trace.completion_tokens * self.cfg.usage_scale)
        trace.usage_completion_tokens = claimed
        cached = trace.reported_cached_tokens or 0 if self.cfg.prompt_details else None
        return usage(job, cached, claimed, reasoning)

    def _timings(self, job: Job, trace: Trace) -> JsonObject:
        """llama.cpp's per-response timings: prompt_ms is the prefill alone (no queueing, no
        host cache copy); predicted_ms runs from the end of prefill to the last token."""
        assert trace.prefill_start_s is not None and trace.prefill_end_s is not None  # timings follow prefill
        cache_n = trace.reported_cached_tokens or 0
        prompt_n = len(job.prompt_ids) - cache_n
        prompt_ms = 1000 * (trace.prefill_end_s - trace.prefill_start_s)
        predicted_n = trace.completion_tokens
        predicted_ms = 1000 * (trace.token_times_s[-1] - trace.prefill_end_s) if trace.token_times_s else 0.0
        return {
            "cache_n": cache_n,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_second": 1000 * prompt_n / prompt_ms if prompt_ms > 0 else None,
            "predicted_n": predicted_n,
            "predicted_ms": predicted_ms,
            "predicted_per_second": 1000 * predicted_n / predicted_ms if predicted_ms > 0 else None,
        }

    def _renderer(self, job: Job, trace: Trace) -> Renderer:
        null_content = self.cfg.null_content or trace.fault == "null_content"
        kind = RENDERERS.get(trace.endpoint, Renderer)
        cfg = self.cfg
        renderer: Renderer = kind(job, null_content, not cfg.role_chunk_first, cfg.usage_scale, cfg.reasoning_field)
        return renderer

    async def _stream(self, request: web.Request, job: Job, trace: Trace) -> web.StreamResponse:
        renderer = self._renderer(job, trace)
        events = renderer.token_events(self.cfg)
        resp = web.StreamResponse(headers=SSE_HEADERS)
        out = Outlet(self, resp, trace)

        async def answer() -> None:
            await self._prepare(request, resp, trace)
            if self.cfg.role_chunk_first:
                await out.send("role", 0, renderer.role_event())

        late = self.cfg.headers_at_prefill  # llama-server: when the engine takes the request up
        if not late:
            await answer()
        async with self._running(trace, job):
            decoder = await self._prefill(job, trace, answer if late else None)
            await self._stream_tokens(request, out, job, trace, decoder, events, renderer)
        trace.finish_reason = job.plan.finish_reason
        if self.cfg.timings:
            await out.send("timings", 0, renderer.timings_event(self._timings(job, trace)))
        if job.include_usage and trace.fault != "no_usage":
            await out.send("usage", 0, renderer.usage_event(self._usage(job, trace)))
        trace.done_sent = trace.fault != "no_done" and not self.cfg.hold_open_s
        if trace.done_sent:
            await out.send("done", 0, renderer.done_event())
        await out.flush()
        if self.cfg.hold_open_s:  # a gateway that keeps the body open: the answer is all there
            trace.held_open_s = self.cfg.hold_open_s
            self._log(trace)
            await asyncio.sleep(self.cfg.hold_open_s)
        return await self._finish(resp, trace)

    async def _stream_tokens(
        self,
        request: web.Request,
        out: Outlet,
        job: Job,
        trace: Trace,
        decoder: Decoder,
        events: list[tuple[str, int, bytes | None]],
        renderer: Renderer,
    ) -> None:
        fault_pending = trace.fault in ("cut_stream", "stall", "malformed_json")
        half = job.plan.n / 2
        for kind, tokens, data in events:
            self._record_tokens(trace, job, [await decoder.next_token() for _ in range(tokens)])
            if data is not None:
                await out.send(kind, tokens, data)
            if fault_pending and trace.completion_tokens >= half:
                fault_pending = False
                await self._mid_stream_fault(request, out, trace, decoder, renderer)

    async def _mid_stream_fault(
        self, request: web.Request, out: Outlet, trace: Trace, decoder: Decoder, renderer: Renderer
    ) -> None:
        if trace.fault == "cut_stream":
            _abort(request)
            raise ClientGone(finish_reason="cut")
        if trace.fault == "stall":
            await out.flush()
            await decoder.pause(self.cfg.stall_s)
        if trace.fault == "malformed_json":
            await out.send("malformed", 0, renderer.malformed_event())

    async def _complete(self, request: web.Request, job: Job, trace: Trace) -> web.StreamResponse:
        renderer = self._renderer(job, trace)
        async with self._running(trace, job):
            decoder = await self._prefill(job, trace)
            await self._decode_all(request, job, trace, decoder)
        trace.finish_reason = job.plan.finish_reason
        usage_obj = None if trace.fault == "no_usage" else self._usage(job, trace)
        body = renderer.full_body(usage_obj, self._timings(job, trace) if self.cfg.timings else None)
        if trace.fault == "malformed_json":
            body = body[: len(body) // 2]
        return await self._send_whole(request, trace, 200, body, JSON_TYPE, event="content")

    async def _decode_all(self, request: web.Request, job: Job, trace: Trace, decoder: Decoder) -> None:
        half = job.plan.n // 2
        for i in range(job.plan.n):
            if i == half and trace.fault == "cut_stream":
                _abort(request)
                raise ClientGone(finish_reason="cut")
            if i == half and trace.fault == "stall":
                await decoder.pause(self.cfg.stall_s)
            self._record_tokens(trace, job, [await decoder.next_token()])
