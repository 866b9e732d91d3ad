"""The simulator's HTTP face: OpenAI-compatible endpoints, SSE shaping, faults and truth log."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import random
import re
import signal
import sys
import time
from dataclasses import dataclass

from aiohttp import web

from benchy import __version__
from benchy.sim import vocab
from benchy.sim.apis import APIS, ID_PREFIX, BadRequest, renderer_class, to_chat
from benchy.sim.cache import PrefixCache
from benchy.sim.config import BLOCK_SIZE, SimConfig
from benchy.sim.engine import (
    CHAT_TEMPLATE,
    CONTENT,
    MARKER,
    REASONING,
    Decoder,
    Engine,
    Plan,
    Trace,
    TruthLog,
    clock,
    message_text,
    plan_harmony,
    plan_output,
    prompt_hash,
    render_chat,
    spec_steps,
    think_tokens,
)
from benchy.sim.gpu import SimGpus
from benchy.sim.metrics import CONTENT_TYPE as METRICS_TYPE
from benchy.sim.metrics import SimMetrics

SERVER_NAME = f"benchy-sim/{__version__}"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
JSON_TYPE = "application/json"
DONE = b"data: [DONE]\n\n"
ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError", 500: "InternalServerError"}
# Faults answered at once, before any queueing or prefill.
IMMEDIATE_FAULTS = {"http500", "http429", "http429_retry", "reset", "not_sse"}
NOT_SSE_BODY = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><p>upstream unavailable</p></body></html>"
)
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # the OpenAI/vLLM default for /v1/completions


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def error_body(status: int, message: str) -> bytes:
    error = {"message": message, "type": ERROR_TYPES.get(status, "Error"), "code": status}
    return json.dumps({"object": "error", "error": error}).encode()


@dataclass
class Job:
    """One parsed generation request."""

    endpoint: str  # "chat" | "completions"
    stream: bool
    include_usage: bool
    model: str
    prompt_ids: list[int]
    plan: Plan
    reasoning: int  # leading plan tokens that are reasoning_content
    response_id: str
    created: int
    skip_special_tokens: bool = True  # --harmony completions: drop the markers from `text`
    prompt_tokens_sent: int = 0  # before --truncate-prompt
    continuous_usage: bool = False  # stream_options.continuous_usage_stats: usage in every chunk
    steps: list[int] | None = None  # --spec-draft: tokens per decode step
    think: int = 0  # --think-inline: tokens of the think block, its tags included
    first_content: int | None = None  # index of the first answer token (None: no answer)


async def read_json(request: web.Request) -> dict:
    try:
        body = json.loads(await request.read())
    except ValueError:
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def check_model(cfg: SimConfig, body: dict) -> str:
    model = body.get("model") or cfg.model
    if model != cfg.model:
        raise ApiError(404, f"The model `{model}` does not exist.")
    return model


def prompt_text(body: dict, endpoint: str) -> str:
    if endpoint == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ApiError(400, "'messages' must be a non-empty list of objects")
        return render_chat(messages)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "'prompt' must be a string")
    return prompt


def int_field(body: dict, name: str, default: int, minimum: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ApiError(400, f"'{name}' must be an integer >= {minimum}")
    return value


def _abort(request: web.Request) -> None:
    """Drop the connection without a proper end (a fault); it may already be gone."""
    if request.transport is not None:
        request.transport.abort()


def stop_strings(body: dict) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return stop
    raise ApiError(400, "'stop' must be a string or a list of strings")


_PARSED = itertools.count()  # completion requests parsed so far (--hidden-prompt-every)
_HARMONY_USER = re.compile(r"<\|start\|>user<\|message\|>(.*?)<\|end\|>", re.S)
_HARMONY_EFFORT = re.compile(r"\A<\|start\|>system<\|message\|>[^<]*?^Reasoning: (\w+)$", re.M)


def user_text(body: dict, endpoint: str) -> str:
    """The user's own words: the last user message, also inside a Harmony-rendered prompt."""
    if endpoint == "chat":
        users = [m for m in body["messages"] if m.get("role", "user") == "user"]
        return message_text(users[-1].get("content")) if users else render_chat(body["messages"])
    prompt = prompt_text(body, endpoint)
    found = _HARMONY_USER.findall(prompt)
    return found[-1] if found else prompt


def requested_effort(body: dict, endpoint: str) -> str | None:
    """Chat: the reasoning_effort field; completions: a Harmony system message's Reasoning line."""
    if endpoint == "chat":
        effort = body.get("reasoning_effort")
        return effort if isinstance(effort, str) else None
    match = _HARMONY_EFFORT.search(prompt_text(body, endpoint))
    return match.group(1) if match else None


def bool_field(body: dict, name: str, default: bool) -> bool:
    value = body.get(name, default)
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be true or false")
    return value


def parse_job(cfg: SimConfig, body: dict, endpoint: str, response_id: str) -> Job:
    model = check_model(cfg, body)
    prompt_ids = vocab.encode(prompt_text(body, endpoint))
    if cfg.hidden_prompt_tokens and next(_PARSED) % cfg.hidden_prompt_every == cfg.hidden_prompt_every - 1:
        prompt_ids = vocab.encode(" hidden" * cfg.hidden_prompt_tokens) + prompt_ids  # a prompt of its own
    sent = len(prompt_ids)
    if cfg.truncate_prompt and sent > cfg.truncate_prompt:
        prompt_ids = prompt_ids[-cfg.truncate_prompt :]  # the last N tokens, as Ollama keeps them
    room = cfg.context_length - len(prompt_ids)
    if room < 1:
        raise ApiError(
            400,
            f"This model's maximum context length is {cfg.context_length} tokens; the prompt has {len(prompt_ids)}.",
        )
    default_max = room if endpoint == "chat" else min(room, COMPLETIONS_DEFAULT_MAX_TOKENS)
    max_tokens = int_field(body, "max_completion_tokens", 0, 1) or int_field(body, "max_tokens", default_max, 1)
    if max_tokens > room:
        raise ApiError(
            400,
            f"This model's maximum context length is {cfg.context_length} tokens; "
            f"{len(prompt_ids)} prompt + {max_tokens} completion tokens exceed it.",
        )
    planner = plan_harmony if cfg.harmony else plan_output
    plan = planner(
        cfg,
        vocab.encode(user_text(body, endpoint)) if cfg.harmony else prompt_ids,
        max_tokens,
        min_tokens=0 if cfg.ignore_ignore_eos else int_field(body, "min_tokens", 0, 0),
        ignore_eos=bool(body.get("ignore_eos", False)) and not cfg.ignore_ignore_eos,
        stop=stop_strings(body),
    )
    options = body.get("stream_options") or {}
    options = options if isinstance(options, dict) and not cfg.ignore_stream_options else {}
    reasoning = min(cfg.reasoning_tokens, plan.n) if endpoint == "chat" and not cfg.think_inline else 0
    think = think_tokens(cfg, plan.n)
    first_content = think or reasoning
    if plan.kinds is not None:
        reasoning = plan.kinds.count(REASONING)
        first_content = plan.kinds.index(CONTENT) if CONTENT in plan.kinds else plan.n
    return Job(
        endpoint=endpoint,
        stream=bool(body.get("stream", False)),
        include_usage=bool(options.get("include_usage")),
        model=model,
        prompt_ids=prompt_ids,
        plan=plan,
        reasoning=reasoning,
        response_id=response_id,
        created=int(time.time()),
        skip_special_tokens=bool_field(body, "skip_special_tokens", True),
        prompt_tokens_sent=sent,
        continuous_usage=bool(options.get("include_usage") and options.get("continuous_usage_stats")),
        steps=spec_steps(cfg, plan.n, prompt_hash(prompt_ids)) if cfg.spec_draft else None,
        think=think,
        first_content=first_content if first_content < plan.n else None,
    )


def event_sizes(n: int, cfg: SimConfig, steps: list[int] | None = None) -> list[int]:
    """Tokens per SSE event: K at a time, or all n split into E near-equal events; under
    speculative decoding one event per step (vLLM) or per token (llama.cpp)."""
    if steps is not None:
        return list(steps) if cfg.spec_style == "vllm" else [1] * n
    if cfg.events_per_response:
        parts = min(cfg.events_per_response, n)
        base, extra = divmod(n, parts) if parts else (0, 0)
        return [base + (1 if i < extra else 0) for i in range(parts)]
    if cfg.stream_interval and n:  # the first token alone when prefill ends, then N a step's interval
        k = cfg.stream_interval
        return [1, *(min(k, n - start) for start in range(1, n, k))]
    k = cfg.tokens_per_event
    return [min(k, n - start) for start in range(0, n, k)]


def event_groups(n: int, reasoning: int, cfg: SimConfig, steps: list[int] | None = None) -> list[tuple[str, int]]:
    """(kind, tokens) per token event; one straddling the reasoning/content boundary splits."""
    groups, pos = [], 0
    for size in event_sizes(n, cfg, steps):
        end = pos + size
        if pos < reasoning < end:
            groups += [("reasoning", reasoning - pos), ("content", end - reasoning)]
        else:
            groups.append(("reasoning" if end <= reasoning else "content", size))
        pos = end
    return groups or [("content", 0)]  # nothing generated: one event carries finish_reason


def reasoning_fields(field: str) -> tuple[str, ...]:
    """The delta or message keys that carry reasoning text (--reasoning-field both: vLLM around
    the reasoning_content -> reasoning rename, the same text in each)."""
    return ("reasoning_content", "reasoning") if field == "both" else (field,)


SILENT = "silent"  # tokens that make no event (an end-of-sequence token): usage counts them
TEXTLESS = "textless"  # a first token whose text is held (a split character): a role chunk only


def silence_last(groups: list[tuple[str, int]], silent: int) -> list[tuple[str, int]]:
    """The last `silent` tokens split off into one group that sends no text (--silent-tokens);
    the tokens before them keep their events."""
    total = sum(n for _, n in groups)
    silent = min(silent, total - 1) if total > 1 else 0
    if silent <= 0:
        return groups
    out, left = list(groups), silent
    while left:
        kind, n = out.pop()
        if n > left:
            out.append((kind, n - left))
            break
        left -= n
    return [*out, (SILENT, silent)]


def _without_first_token(groups: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The event groups after the first token went out as a textless role chunk."""
    (kind, n), rest = groups[0], groups[1:]
    return [(kind, n - 1), *rest] if n > 1 else rest


def harmony_groups(kinds: list[str], cfg: SimConfig, split: bool) -> list[tuple[str, int]]:
    """(kind, tokens) per SSE group of a --harmony output; `split` (chat) cuts each group where
    the channel changes, otherwise a group is named by its most telling token."""
    groups, pos = [], 0
    for size in event_sizes(len(kinds), cfg):
        chunk = kinds[pos : pos + size]
        pos += size
        if split:
            groups += [(kind, len(list(run))) for kind, run in itertools.groupby(chunk)]
        else:
            groups.append((next((k for k in (CONTENT, REASONING) if k in chunk), MARKER), size))
    return groups or [(CONTENT, 0)]


def usage(job: Job, cached: int | None, completion: int, reasoning: int) -> dict:
    """The usage object; completion_tokens is what the server claims (see --usage-scale);
    cached None: no prompt_tokens_details (vLLM without --enable-prompt-tokens-details)."""
    prompt = len(job.prompt_ids)
    out: dict[str, object] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


class Renderer:
    """Pre-encodes every SSE event of a response, so streaming is little more than writes."""

    def __init__(
        self,
        job: Job,
        null_content: bool,
        role_in_first: bool,
        usage_scale: float = 1.0,
        reasoning_field: str = "reasoning_content",
    ):
        self.job = job
        self.reasoning_field = reasoning_field
        self.usage_scale = usage_scale
        self.null_content = null_content
        self.role_in_first = role_in_first
        obj = "chat.completion.chunk" if job.endpoint == "chat" else "text_completion"
        self._head = (
            f'data: {{"id":"{job.response_id}","object":"{obj}","created":{job.created},'
            f'"model":{json.dumps(job.model)},"choices":[{{"index":0,'
        )

    def token_events(self, cfg: SimConfig) -> list[tuple[str, int, bytes | None]]:
        """(kind, tokens, event); event None: tokens generated with nothing to send (--harmony)."""
        if self.job.plan.kinds is not None:
            return self._harmony_events(cfg)
        job, texts, pos = self.job, self.job.plan.texts, 0
        groups = silence_last(event_groups(job.plan.n, job.reasoning, cfg, job.steps), cfg.silent_tokens)
        events: list[tuple[str, int, bytes | None]] = []
        textless = cfg.textless_first and job.plan.n > 1
        if textless:
            events.append((TEXTLESS, 1, self.role_event()))
            groups, pos = _without_first_token(groups), 1
        for i, (kind, tokens) in enumerate(groups):
            start = 0 if textless and i == 0 else pos  # the held first token's text comes now
            text = "" if kind == SILENT else "".join(texts[start : pos + tokens])
            finish = job.plan.finish_reason if i == len(groups) - 1 else None
            pos += tokens
            with_role = i == 0 and not textless
            events.append((kind, tokens, self._token_event(kind, text, with_role, finish, pos)))
        return events

    def _harmony_events(self, cfg: SimConfig) -> list[tuple[str, int, bytes | None]]:
        job, pos, first = self.job, 0, True
        events: list[tuple[str, int, bytes | None]] = []
        assert job.plan.kinds is not None  # a --harmony plan
        groups = harmony_groups(job.plan.kinds, cfg, split=job.endpoint == "chat")
        for i, (kind, tokens) in enumerate(groups):
            text = "".join(self._visible(pos, pos + tokens))
            pos += tokens
            last = i == len(groups) - 1
            if not text and not last:
                events.append((kind, tokens, None))
                continue
            finish = job.plan.finish_reason if last else None
            events.append((kind, tokens, self._token_event(kind, text, first, finish, pos)))
            first = False
        return events

    def _visible(self, start: int, end: int) -> list[str]:
        """What a --harmony server shows of these tokens: chat parses the channels away, and
        completions drop special tokens (not the header words) when skip_special_tokens."""
        plan = self.job.plan
        texts, kinds = plan.texts[start:end], (plan.kinds or [])[start:end]
        if self.job.endpoint == "chat":
            return [text for text, kind in zip(texts, kinds) if kind != MARKER]
        if self.job.skip_special_tokens:
            return [text for text in texts if text not in vocab.SPECIAL]
        return texts

    def _harmony_whole(self) -> tuple[str, str]:
        """(reasoning_content, content) of a whole --harmony response."""
        plan = self.job.plan
        if self.job.endpoint != "chat":
            return "", "".join(self._visible(0, plan.n))
        by_kind = {
            kind: "".join(t for t, k in zip(plan.texts, plan.kinds or []) if k == kind) for kind in (REASONING, CONTENT)
        }
        return by_kind[REASONING], by_kind[CONTENT]

    def claimed(self, tokens: int) -> int:
        """What usage says of `tokens` generated tokens (--usage-scale: a miscounting backend)."""
        return round(tokens * self.usage_scale)

    def _token_event(self, kind: str, text: str, first: bool, finish: str | None, done: int = 0) -> bytes:
        value = "null" if self.null_content and kind == "content" else json.dumps(text)
        tail = f',"logprobs":null,"finish_reason":{json.dumps(finish)}}}]}}\n\n'
        if self.job.continuous_usage:  # vLLM's continuous_usage_stats: cumulative counts per chunk
            prompt, completion = len(self.job.prompt_ids), self.claimed(done)
            counts = f'"prompt_tokens":{prompt},"total_tokens":{prompt + completion},"completion_tokens":{completion}'
            tail = f',"logprobs":null,"finish_reason":{json.dumps(finish)}}}],"usage":{{{counts}}}}}\n\n'
        if self.job.endpoint == "completions":
            return f'{self._head}"text":{value}{tail}'.encode()
        role = '"role":"assistant",' if first and self.role_in_first else ""
        if kind == "reasoning":
            fields = ",".join(f'"{name}":{value}' for name in reasoning_fields(self.reasoning_field))
            return f'{self._head}"delta":{{{role}{fields}}}{tail}'.encode()
        return f'{self._head}"delta":{{{role}"content":{value}}}{tail}'.encode()

    def role_event(self) -> bytes:
        return (
            self._head + '"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
        ).encode()

    def usage_event(self, usage_obj: dict) -> bytes:
        obj = "chat.completion.chunk" if self.job.endpoint == "chat" else "text_completion"
        chunk = {
            "id": self.job.response_id,
            "object": obj,
            "created": self.job.created,
            "model": self.job.model,
            "choices": [],
            "usage": usage_obj,
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def timings_event(self, timings: dict) -> bytes:
        """llama.cpp's `timings`, here in a chunk of its own just before usage and [DONE]."""
        chunk = {"id": self.job.response_id, "object": "chat.completion.chunk", "choices": [], "timings": timings}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    def done_event(self) -> bytes:
        return DONE

    def malformed_event(self) -> bytes:
        return f'data: {{"id":"{self.job.response_id}","choices":[{{"delta":{{"content":\n\n'.encode()

    def full_body(self, usage_obj: dict | None, timings: dict | None = None) -> bytes:
        job, texts = self.job, self.job.plan.texts
        reasoning_text = "".join(texts[: job.reasoning])
        content = None if self.null_content else "".join(texts[job.reasoning :])
        if job.plan.kinds is not None:
            reasoning_text, content = self._harmony_whole()
            content = None if self.null_content else content
        if job.endpoint == "chat":
            message = {"role": "assistant", "content": content}
            message |= {name: reasoning_text or None for name in reasoning_fields(self.reasoning_field)}
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": job.plan.finish_reason}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": job.plan.finish_reason}
            obj = "text_completion"
        body = {"id": job.response_id, "object": obj, "created": job.created, "model": job.model, "choices": [choice]}
        if usage_obj is not None:
            body["usage"] = usage_obj
        if timings is not None:
            body["timings"] = timings
        return json.dumps(body).encode()


RENDERERS = {api: renderer_class(Renderer, api) for api in APIS}


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
    def __init__(self, cfg: SimConfig):
        self.cfg = cfg
        self.engines = [Engine(cfg) for _ in range(cfg.replicas)]
        self._route_rng = random.Random(cfg.seed)
        self._next_replica = itertools.count()
        # --route prefix: the router's own view of what each replica holds (it inserts a prompt
        # as it routes it, as SGLang's approximate radix tree does) and what each has in flight.
        self._routed = [PrefixCache(1 << 20) for _ in range(cfg.replicas)]
        self._in_flight = [0] * cfg.replicas
        self.cache_resets = 0
        self.truth = TruthLog(cfg.truth_log)
        blocks = cfg.cache_blocks if cfg.prefix_cache else None
        self.metrics = SimMetrics(cfg.flavor, cfg.model, cfg.metrics_token_factor, blocks)
        # --router-pages: each replica's own account, beside the whole one
        self.replica_metrics = [
            SimMetrics(cfg.flavor, cfg.model, cfg.metrics_token_factor, blocks) for _ in range(cfg.replicas)
        ]
        self._fault_rng = random.Random(cfg.seed)
        self.gpus = SimGpus(cfg, clock(), self.truth.note, self.engines[0].heat_now) if cfg.gpus else None
        self._ids = itertools.count(1)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.on_response_prepare.append(self._stamp_headers)
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        if self.cfg.metrics:
            app.router.add_get("/metrics", self.prometheus)
        if self.cfg.router_pages:
            app.router.add_get("/list_workers", self.list_workers)
            if self.cfg.metrics:
                app.router.add_get("/replicas/{n}/metrics", self.replica_prometheus)
        if self.cfg.flavor == "llamacpp":
            app.router.add_get("/props", self.props)
            app.router.add_post("/slots/{slot}", self.slot_action)
        elif self.cfg.cache_reset:
            app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        if self.gpus is not None:
            app.router.add_get("/dcgm/metrics", self.dcgm)
        if self.cfg.tokenize:
            app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        return app

    def close(self) -> None:
        self.truth.close()

    @staticmethod
    async def _stamp_headers(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = SERVER_NAME
        request_id = request.headers.get("x-request-id")
        if request_id:
            response.headers["x-request-id"] = request_id

    # --- informational endpoints ---

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": f"benchy-sim {__version__}"})

    async def models(self, request: web.Request) -> web.Response:
        model: dict[str, object] = {"id": self.cfg.model, "object": "model", "owned_by": "benchy-sim"}
        if self.cfg.flavor == "llamacpp":  # llama.cpp: per-slot context under meta
            model["meta"] = {"n_ctx": self.cfg.context_length, "n_ctx_train": self.cfg.context_length}
        else:
            model["max_model_len"] = self.cfg.context_length
        return web.json_response({"object": "list", "data": [model]})

    async def props(self, request: web.Request) -> web.Response:
        """llama.cpp's /props: the facts benchy reads from a llama-server."""
        return web.json_response(
            {
                "default_generation_settings": {"n_ctx": self.cfg.context_length},
                "total_slots": self.cfg.max_running,
                "model_alias": self.cfg.model,
                "model_path": f"/models/{self.cfg.model}.gguf",
                "chat_template": CHAT_TEMPLATE,
                "build_info": f"benchy-sim-{__version__}",
            }
        )

    def route(self) -> int:
        """The replica a router sends the next request to (round robin, or at random)."""
        if self.cfg.route == "random":
            return self._route_rng.randrange(self.cfg.replicas)
        if self.cfg.route == "prefix":
            return 0  # decided once the prompt is read (route_by_prefix)
        return next(self._next_replica) % self.cfg.replicas

    def route_by_prefix(self, ids: list[int]) -> int:
        """Cache-aware: the replica that shares most of this prompt's prefix when that is at least
        half of it, else (or when it has --route-balance more requests in flight than the idlest)
        the one with the fewest requests in flight (the lowest index on a tie)."""
        matched = [routed.lookup(ids) for routed in self._routed]
        best = max(range(len(matched)), key=lambda r: matched[r])
        idlest = min(range(len(matched)), key=lambda r: self._in_flight[r])
        balance = self.cfg.route_balance
        if matched[best] * 2 < len(ids) or (balance and self._in_flight[best] - self._in_flight[idlest] >= balance):
            best = idlest
        self._routed[best].insert(ids)
        return best

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        """vLLM's POST /reset_prefix_cache: empties the cache of the replica it is routed to
        (behind a router, one of them), and leaves a truth record of the reset."""
        return self._reset(request, "reset_prefix_cache", web.Response(text=""))

    async def slot_action(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /slots/{id}?action=erase: the sim's slots share one cache, so
        erasing any slot empties it."""
        if not self.cfg.cache_reset:
            message = "This server does not support slots action. Start it with `--slot-save-path`"
            return web.Response(status=501, body=error_body(501, message), content_type=JSON_TYPE)
        if request.query.get("action") != "erase":
            return web.Response(
                status=400, body=error_body(400, "only action=erase is simulated"), content_type=JSON_TYPE
            )
        slot = request.match_info["slot"]
        if not slot.isdigit() or int(slot) >= self.cfg.max_running:
            return web.Response(status=400, body=error_body(400, f"invalid slot id {slot}"), content_type=JSON_TYPE)
        return self._reset(request, "slot_erase", None, int(slot))

    def _reset(self, request: web.Request, endpoint: str, answer: web.Response | None, slot: int = 0) -> web.Response:
        replica = self.route()
        held = self.engines[replica].reset_cache()
        self.cache_resets += 1
        trace = Trace(id=f"reset-{self.cache_resets:06d}", request_id=None, endpoint=endpoint, arrival_s=clock())
        trace.replica, trace.status, trace.cache_used_blocks = replica, 200, 0
        trace.cache_evicted_blocks = held
        self.truth.write(trace)  # not a generation: /metrics does not count it
        return answer or web.json_response({"id_slot": slot, "n_erased": held * BLOCK_SIZE})

    async def list_workers(self, request: web.Request) -> web.Response:
        """--router-pages: the replicas by URL, as vllm-router and sglang-router list them."""
        root = f"{request.url.scheme}://{request.host}"
        return web.json_response({"urls": [f"{root}/replicas/{i}" for i in range(self.cfg.replicas)]})

    async def replica_prometheus(self, request: web.Request) -> web.Response:
        n = request.match_info["n"]
        if not n.isdigit() or int(n) >= self.cfg.replicas:
            return web.Response(status=404, body=error_body(404, f"no replica {n}"), content_type=JSON_TYPE)
        return self._exposition(int(n))

    async def prometheus(self, request: web.Request) -> web.Response:
        if self.cfg.router_pages:  # the router passes /metrics to one replica
            return self._exposition(0)
        engines = self.engines
        caches = [e.cache for e in engines if e.cache is not None]
        kv_usage = sum(len(c) / c.capacity for c in caches) / len(caches) if caches else 0.0
        running, waiting = sum(e.slots.running for e in engines), sum(e.slots.waiting for e in engines)
        body = self.metrics.exposition(running, waiting, kv_usage)
        return web.Response(body=body, headers={"Content-Type": METRICS_TYPE})

    def _exposition(self, replica: int) -> web.Response:
        engine = self.engines[replica]
        kv_usage = len(engine.cache) / engine.cache.capacity if engine.cache is not None else 0.0
        body = self.replica_metrics[replica].exposition(engine.slots.running, engine.slots.waiting, kv_usage)
        return web.Response(body=body, headers={"Content-Type": METRICS_TYPE})

    async def dcgm(self, request: web.Request) -> web.Response:
        """dcgm-exporter's text for the simulated GPUs (sim/gpu.py)."""
        assert self.gpus is not None
        text = self.gpus.scrape(clock())
        if text is None:
            return web.Response(status=500, text="simulated exporter failure\n")
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def tokenize(self, request: web.Request) -> web.Response:
        """The sim's own vocabulary (sim/vocab.py), never benchy's: llama.cpp's {content} →
        {tokens}, vLLM's {model, prompt | messages} → {count, tokens}. --note-tokenize notes each
        call in the truth log (when it came, how many tokens): tests see it was off the hot path."""
        try:
            body = await read_json(request)
            if "content" in body:  # llama.cpp style
                ids = vocab.encode(str(body["content"]))
                self._note_tokenize(len(ids))
                return web.json_response({"tokens": ids})
            check_model(self.cfg, body)
            endpoint = "chat" if "messages" in body else "completions"
            ids = vocab.encode(prompt_text(body, endpoint))
        except ApiError as exc:
            return web.Response(status=exc.status, body=error_body(exc.status, exc.message), content_type=JSON_TYPE)
        self._note_tokenize(len(ids))
        return web.json_response({"count": len(ids), "tokens": ids, "max_model_len": self.cfg.context_length})

    def _note_tokenize(self, tokens: int) -> None:
        if self.cfg.note_tokenize:
            self.truth.note({"request_id": None, "tokenize": {"t_s": clock(), "tokens": tokens}})

    # --- generation ---

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "responses")

    async def messages(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "messages")

    async def _generate(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        received_s = clock()
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
        trace.replica = self.route()
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
            if trace.routed:
                self._in_flight[trace.replica] -= 1
            self._log(trace)  # errors and faults too; a no-op if already written

    def _log(self, trace: Trace) -> None:
        """The truth record and the /metrics observation of a request, once each."""
        if self.truth.write(trace):
            self.metrics.observe(trace)
            self.replica_metrics[trace.replica].observe(trace)

    async def _serve(self, request: web.Request, endpoint: str, trace: Trace) -> web.StreamResponse:
        body = await read_json(request)
        if endpoint in APIS:  # planned, served and logged as the chat request it amounts to
            try:
                body, endpoint = to_chat(body, endpoint), "chat"
            except BadRequest as exc:
                raise ApiError(400, str(exc)) from None
        trace.stream, trace.model = bool(body.get("stream", False)), body.get("model")
        job = parse_job(self.cfg, body, endpoint, trace.id)
        if self.cfg.route == "prefix":
            trace.replica = self.route_by_prefix(job.prompt_ids)
        self._in_flight[trace.replica] += 1
        trace.routed = True
        trace.model, trace.prompt_tokens = job.model, len(job.prompt_ids)
        trace.prompt_tokens_sent = job.prompt_tokens_sent
        trace.spec_steps = job.steps
        trace.stop = stop_strings(body) if body.get("stop") is not None else None
        trace.reasoning_effort = requested_effort(body, endpoint)
        trace.skip_special_tokens = job.skip_special_tokens
        trace.fault = self._draw_fault()
        if trace.fault in IMMEDIATE_FAULTS:
            return await self._immediate_fault(request, trace)
        if self.cfg.header_delay_s:
            await asyncio.sleep(self.cfg.header_delay_s)
        if job.stream:
            return await self._stream(request, job, trace)
        return await self._complete(request, job, trace)

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
        headers: dict | None = None,
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
    async def _running(self, trace: Trace):
        """Holds one of max_running slots (queueing FIFO for it) for the body of the block."""
        slots = self.engines[trace.replica].slots
        trace.queued_s = clock()
        await slots.acquire()
        trace.admitted_s = clock()
        self._gpus_running()
        try:
            yield
        finally:
            slots.release()
            self._gpus_running()

    def _gpus_running(self) -> None:
        if self.gpus is not None:
            self.gpus.running(clock(), sum(engine.slots.running for engine in self.engines))

    async def _prefill(self, job: Job, trace: Trace) -> Decoder:
        engine = self.engines[trace.replica]
        done = await engine.prefill(job.prompt_ids)
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

    def _usage(self, job: Job, trace: Trace) -> dict:
        # A raw completion is not parsed, so the server cannot tell reasoning tokens apart; nor
        # can a server without a reasoning parser (--think-inline).
        reasoning = trace.reasoning_tokens if job.endpoint == "chat" and not job.think else 0
        claimed = round(trace.completion_tokens * self.cfg.usage_scale)
        trace.usage_completion_tokens = claimed
        cached = trace.reported_cached_tokens or 0 if self.cfg.prompt_details else None
        return usage(job, cached, claimed, reasoning)

    def _timings(self, job: Job, trace: Trace) -> dict:
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
        return kind(job, null_content, not cfg.role_chunk_first, cfg.usage_scale, cfg.reasoning_field)

    async def _stream(self, request: web.Request, job: Job, trace: Trace) -> web.StreamResponse:
        renderer = self._renderer(job, trace)
        events = renderer.token_events(self.cfg)
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await self._prepare(request, resp, trace)
        out = Outlet(self, resp, trace)
        if self.cfg.role_chunk_first:
            await out.send("role", 0, renderer.role_event())
        async with self._running(trace):
            decoder = await self._prefill(job, trace)
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

    async def _stream_tokens(self, request, out, job, trace, decoder, events, renderer) -> None:
        fault_pending = trace.fault in ("cut_stream", "stall", "malformed_json")
        half = job.plan.n / 2
        for kind, tokens, data in events:
            self._record_tokens(trace, job, [await decoder.next_token() for _ in range(tokens)])
            if data is not None:
                await out.send(kind, tokens, data)
            if fault_pending and trace.completion_tokens >= half:
                fault_pending = False
                await self._mid_stream_fault(request, out, trace, decoder, renderer)

    async def _mid_stream_fault(self, request, out, trace, decoder, renderer) -> None:
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
        async with self._running(trace):
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


def warm_up() -> None:
    """Build the output vocabulary before listening, so the first request is not the slow one."""
    vocab.words(16, 0)


def listen_url(runner: web.AppRunner) -> str:
    host, port = runner.addresses[0][:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


async def serve(cfg: SimConfig) -> None:
    simulator = Simulator(cfg)
    # In-flight requests get a quarter second at shutdown: a stalled stream must not hold it.
    runner = web.AppRunner(simulator.app(), access_log=None, shutdown_timeout=0.25)
    await runner.setup()
    await web.TCPSite(runner, cfg.host, cfg.port, backlog=2048).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Only now: a caller may signal us as soon as it has read this line.
    url = listen_url(runner)
    print(f"benchy sim listening on {url}", flush=True)
    print(f"benchy sim: measure it with: benchy run --base-url {url}/v1", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        simulator.close()


def run(cfg: SimConfig) -> None:
    vocab.use(cfg.vocab)
    warm_up()
    asyncio.run(serve(cfg))
