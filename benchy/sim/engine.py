"""The simulated model: what it generates (deterministic) and when (the timing model).

Timing, all against time.perf_counter() (CLOCK_MONOTONIC, so other processes can compare):
requests hold one of max_running slots (FIFO queue beyond that); prefill is serialized across
requests and takes uncached_tokens / prefill_tps (after prompt_tokens / host_copy_tps of
llama.cpp-style cache copying, when set); the first token appears when prefill ends;
each next token is due 1 / per_request_rate after the previous one's deadline, with
per_request_rate = decode_tps / (1 + batch_slowdown * (running - 1)) at that moment.
With prefill_holds_decode (llama.cpp's one batch of prompts and decodes) a token due while a
prefill is under way or queued waits for it.
Speculative decoding (spec_draft > 0) makes tokens in verify steps instead: the first token
alone, then steps of 1 + accepted drafts, all of a step's tokens at one deadline, the steps
spaced so that the token rate stays decode_tps on average.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import json
import random
import time
from array import array
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field

from benchy.jsontypes import JsonObject
from benchy.sim import prose
from benchy.sim.cache import Lookup, PrefixCache
from benchy.sim.config import BLOCK_SIZE, SimConfig

clock = time.perf_counter

# About 24 tokens, like a real system prompt: every chat prompt shares a template prefix
# longer than one cache block, as it does on a real server.
SYSTEM_PREAMBLE = "You are a helpful assistant served by benchy-sim. Knowledge cutoff: 2024-06. Reasoning: medium."


def message_text(content: object) -> str:
    """OpenAI message content: a string, a list of parts, or null."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return str(content)


# What render_chat does, written as the Jinja chat template a server would publish (/props).
CHAT_TEMPLATE = (
    "<|start|>system<|message|>" + SYSTEM_PREAMBLE + "<|end|>"
    "{% for m in messages %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] }}<|end|>{% endfor %}"
    "<|start|>assistant"
)


def render_chat(messages: list[JsonObject], reasoning_last_turn: bool = False) -> str:
    """The prompt; with `reasoning_last_turn`, an assistant message's reasoning_content as a
    think block, only for those after the last user message (reasoning_dropped counts the rest)."""
    turns = [f"<|start|>system<|message|>{SYSTEM_PREAMBLE}<|end|>"]
    last_user = max((i for i, m in enumerate(messages) if m.get("role", "user") == "user"), default=-1)
    for i, message in enumerate(messages):
        text = message_text(message.get("content"))
        reasoning = message.get("reasoning_content") if reasoning_last_turn else None
        if isinstance(reasoning, str) and reasoning and i > last_user:
            text = f"{THINK_OPEN}{reasoning}{THINK_CLOSE}{text}"
        turns.append(f"<|start|>{message.get('role', 'user')}<|message|>{text}<|end|>")
    turns.append("<|start|>assistant")
    return "".join(turns)


def reasoning_dropped(messages: list[JsonObject]) -> int:
    """Assistant messages whose reasoning a last-turn-only template leaves out (before the last user message)."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role", "user") == "user"), default=-1)
    return sum(1 for m in messages[:last_user] if m.get("role") == "assistant" and m.get("reasoning_content"))


def prompt_hash(ids: list[int]) -> int:
    digest = hashlib.blake2b(array("I", ids).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass
class Plan:
    """Everything a request will generate, decided up front (greedy decoding is deterministic)."""

    texts: list[str]  # one entry per generated token
    finish_reason: str
    kinds: list[str] | None = None  # --harmony: MARKER, REASONING or CONTENT per token
    broken_tokens: int = 0  # --output garbage/degraded/loop: tokens that are junk or inside the loop

    @property
    def n(self) -> int:
        return len(self.texts)


def plan_output(
    cfg: SimConfig,
    prompt_ids: list[int],
    max_tokens: int,
    *,
    min_tokens: int = 0,
    ignore_eos: bool = False,
    stop: Sequence[str] = (),
) -> Plan:
    h = prompt_hash(prompt_ids)
    n = output_length(cfg, h, max_tokens, min_tokens, ignore_eos)
    finish = "length" if n >= max_tokens else "stop"
    texts, broken = prose.texts(cfg.output, n, h % 1_000_003, cfg.degraded_share)
    if cfg.think_inline:
        texts = think_inline(texts, cfg.reasoning_tokens)
    kept = tokens_before_stop(texts, stop, min_tokens)
    if kept < n:
        return Plan(texts[:kept], "stop", broken_tokens=min(broken, kept))
    return Plan(texts, finish, broken_tokens=broken)


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def think_inline(texts: list[str], reasoning: int) -> list[str]:
    """An R1-style output without a reasoning parser: <think>, `reasoning` words, </think>, the
    answer; each tag one token, as in R1's vocabulary. Cut at len(texts), so a short output's
    think block never closes."""
    n = len(texts)
    if reasoning <= 0 or n == 0:
        return texts
    words = texts[: max(0, min(reasoning, n - 1))]
    answer = texts[len(words) + 2 :] if n > len(words) + 2 else []
    return ([THINK_OPEN] + words + [THINK_CLOSE] + answer)[:n]


def think_tokens(cfg: SimConfig, n: int) -> int:
    """Tokens of an inline think block, its tags included (all of the output if it never closes)."""
    return min(cfg.reasoning_tokens + 2, n) if cfg.think_inline and cfg.reasoning_tokens else 0


def spec_steps(cfg: SimConfig, n: int, seed: int) -> list[int]:
    """Tokens per decode step under speculative decoding: the first token alone (it comes out of
    prefill), then 1 + the drafted tokens accepted in a row (each with chance spec_accept, at
    most spec_draft), deterministic per request."""
    if n <= 0:
        return []
    rng, steps, left = random.Random(seed), [1], n - 1
    while left > 0:
        accepted = 0
        while accepted < cfg.spec_draft and rng.random() < cfg.spec_accept:
            accepted += 1
        steps.append(min(1 + accepted, left))
        left -= steps[-1]
    return steps


def spec_mean_step(cfg: SimConfig) -> float:
    """Expected tokens per speculative step: sum of spec_accept**i for i in 0..spec_draft."""
    return sum(cfg.spec_accept**i for i in range(cfg.spec_draft + 1))


def output_length(cfg: SimConfig, h: int, max_tokens: int, min_tokens: int, ignore_eos: bool) -> int:
    if ignore_eos:
        return max_tokens
    natural = cfg.natural_min + h % (cfg.natural_max - cfg.natural_min + 1)
    return min(max(natural, min_tokens), max_tokens)


# --harmony: gpt-oss's raw completion, harmony.render_response(analysis, final) token by token.
MARKER, REASONING, CONTENT = "marker", "reasoning", "content"
HARMONY_HEAD = ("<|channel|>", "analysis", "<|message|>")
HARMONY_MID = ("<|end|>", "<|start|>", "assistant", "<|channel|>", "final", "<|message|>")
HARMONY_END = ("<|return|>",)
HARMONY_OVERHEAD = len(HARMONY_HEAD) + len(HARMONY_MID) + len(HARMONY_END)


def plan_harmony(
    cfg: SimConfig,
    seed_ids: list[int],
    max_tokens: int,
    *,
    min_tokens: int = 0,
    ignore_eos: bool = False,
    stop: Sequence[str] = (),
) -> Plan:
    """n tokens: the analysis message (--reasoning-tokens long), then the final one filling the
    rest, cut at n. Stop strings are matched against this raw text, markers included.
    seed_ids are the user's words, not the template's, so that the chat endpoint and a
    client-side template get the same answer to the same question."""
    h = prompt_hash(seed_ids)
    n = output_length(cfg, h, max_tokens, min_tokens, ignore_eos)
    analysis = cfg.reasoning_tokens
    final = max(0, n - analysis - HARMONY_OVERHEAD)
    reasoning, broken_r = _led_by("We", analysis, h, cfg)
    answer, broken_a = _led_by("The", final, h + 1, cfg)
    parts = (
        (HARMONY_HEAD, MARKER),
        (reasoning, REASONING),
        (HARMONY_MID, MARKER),
        (answer, CONTENT),
        (HARMONY_END, MARKER),
    )
    texts = [text for tokens, _ in parts for text in tokens][:n]
    kinds = [kind for tokens, kind in parts for _ in tokens][:n]
    broken = broken_r + broken_a  # of the planned tokens, before a cut
    kept = tokens_before_stop(texts, stop, min_tokens)
    if kept < len(texts):
        return Plan(texts[:kept], "stop", kinds[:kept], broken_tokens=min(broken, kept))
    return Plan(texts, "length" if n >= max_tokens else "stop", kinds, broken_tokens=min(broken, len(texts)))


def _led_by(first: str, n: int, seed: int, cfg: SimConfig) -> tuple[list[str], int]:
    """n one-token words in --output's mode, the first without a leading space (as gpt-oss
    starts a message), and how many of them are broken."""
    if n <= 0:
        return [], 0
    rest, broken = prose.texts(cfg.output, n - 1, seed % 1_000_003, cfg.degraded_share)
    return [first] + rest, broken


def tokens_before_stop(texts: list[str], stop: Sequence[str], min_tokens: int) -> int:
    """How many whole tokens precede the earliest stop string (searched after min_tokens)."""
    stops = [s for s in stop if s]
    if not stops:
        return len(texts)
    full = "".join(texts)
    offsets = [0]
    for text in texts:
        offsets.append(offsets[-1] + len(text))
    search_from = offsets[min(min_tokens, len(texts))]
    hits = [i for i in (full.find(s, search_from) for s in stops) if i >= 0]
    if not hits:
        return len(texts)
    return bisect.bisect_right(offsets, min(hits)) - 1


@dataclass(frozen=True)
class Prefill:
    """One prompt's prefill: when it ran, what the cache served, and what eviction did."""

    start_s: float
    end_s: float
    cached_tokens: int
    lost_tokens: int = 0  # prefix tokens that had been cached but were evicted before this lookup
    evicted_blocks: int = 0  # blocks this prompt's insert pushed out of the cache
    cache_used_blocks: int | None = None  # blocks held after the insert (None: no cache)
    reported_cached_tokens: int = 0  # what usage and timings say (--no-report-cache-hits: fewer)


class Slots:
    """max_running slots handed out strictly first come, first served."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self.running < self.capacity and not self._waiters:
            self.running += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just as we gave up
            else:
                self._waiters.remove(waiter)
            raise

    @property
    def waiting(self) -> int:
        return sum(not w.done() for w in self._waiters)

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on; running is unchanged
                return
        self.running -= 1


class Engine:
    def __init__(self, cfg: SimConfig):
        self.cfg = cfg
        anywhere = cfg.cache_match == "anywhere"
        self.cache = (
            PrefixCache(cfg.cache_blocks, anywhere=anywhere, ttl_s=cfg.cache_ttl_s, clock=clock)
            if cfg.prefix_cache
            else None
        )
        self.slots = Slots(cfg.max_running)
        self._prefill_lock = asyncio.Lock()
        self._prefill_free_at = 0.0
        self.prefilling = 0  # prefills under way or queued for the lock (--prefill-holds-decode)
        self.prefills_done = asyncio.Event()
        self._hot_since: float | None = None  # --throttle: when decoding first ran

    def cached_tokens(self, ids: list[int]) -> int:
        return self.lookup(ids).cached_tokens

    def lookup(self, ids: list[int]) -> Lookup:
        if self.cfg.cache_despite_nonce:  # a cache that matches whatever the prompt starts with
            return Lookup((len(ids) - 1) // BLOCK_SIZE * BLOCK_SIZE)
        return self.cache.lookup_detail(ids) if self.cache is not None else Lookup(0)

    async def prefill(self, ids: list[int], started: Callable[[], Awaitable[None]] | None = None) -> Prefill:
        """Runs this prompt's prefill after every earlier one. A host-RAM cache copy
        (host_copy_tps) comes first, in the same serial queue. `started` is awaited when the
        prefill starts (after the copy): the stream's headers where they wait for it."""
        self.prefilling += 1
        self.prefills_done.clear()
        try:
            return await self._prefill(ids, started)
        finally:
            self.prefilling -= 1
            if not self.prefilling:
                self.prefills_done.set()

    async def _prefill(self, ids: list[int], started: Callable[[], Awaitable[None]] | None) -> Prefill:
        async with self._prefill_lock:
            # Start at the previous prefill's deadline, not at the (later) lock hand-over.
            start = max(clock(), self._prefill_free_at) + self.host_copy_seconds(len(ids))
            found = self.lookup(ids)
            end = start + self._prefill_seconds(len(ids) - found.cached_tokens)
            self._prefill_free_at = end
            if started is not None:
                await self.wait_until(start)
                await started()
            await self.wait_until(end)
            evicted = self.cache.insert(ids) if self.cache is not None else 0
            if self.cache is not None:
                self.cache.hold(ids)
        used = len(self.cache) if self.cache is not None else None
        reported = found.cached_tokens if self.cfg.report_cache_hits else found.prefix_tokens
        return Prefill(start, end, found.cached_tokens, found.lost_tokens, evicted, used, reported)

    def release(self, ids: list[int]) -> None:
        """This prompt's request ended: the blocks it held may expire from now (cache.release)."""
        if self.cache is not None:
            self.cache.release(ids)

    def reset_cache(self) -> int:
        """Empties the prefix cache (vLLM's POST /reset_prefix_cache); returns the blocks it held."""
        return self.cache.clear() if self.cache is not None else 0

    def host_copy_seconds(self, tokens: int) -> float:
        return tokens / self.cfg.host_copy_tps if self.cfg.host_copy_tps and not self.cfg.instant else 0.0

    def _prefill_seconds(self, tokens: int) -> float:
        return 0.0 if self.cfg.instant else tokens / self.cfg.prefill_tps

    def token_interval(self) -> float:
        if self.cfg.instant:
            return 0.0
        running = max(self.slots.running, 1)
        rate = self.cfg.decode_tps / (1.0 + self.cfg.batch_slowdown * (running - 1))
        return 1.0 / (rate * self.heat_factor())

    def heat_now(self) -> float:
        """The heat factor as it stands, without starting the clock (the GPU exporter's view)."""
        if not self.cfg.throttle or self._hot_since is None:
            return 1.0
        return 1.0 - self.cfg.throttle * min(1.0, (clock() - self._hot_since) / self.cfg.throttle_s)

    def heat_factor(self) -> float:
        """--throttle: a GPU that clocks down as it heats (a DGX Spark, a laptop under sustained
        load): decode loses a share that grows linearly over --throttle-s of uptime, then stays."""
        if not self.cfg.throttle:
            return 1.0
        now = clock()
        if self._hot_since is None:
            self._hot_since = now
        return 1.0 - self.cfg.throttle * min(1.0, (now - self._hot_since) / self.cfg.throttle_s)

    async def wait_until(self, deadline: float) -> None:
        delay = deadline - clock()
        if delay > 0:
            await asyncio.sleep(delay)

    def decoder(self, first_due: float, steps: list[int] | None = None) -> Decoder:
        return Decoder(self, first_due, steps)


class Decoder:
    """Paces one request's tokens against absolute deadlines, so loop jitter never accumulates.
    With `steps` (speculative decoding), the tokens of one step share its deadline, and steps
    are spaced by the mean step's worth of token intervals."""

    def __init__(self, engine: Engine, first_due: float, steps: list[int] | None = None):
        self._engine = engine
        self._due = first_due
        self._started = False
        self._steps = list(reversed(steps)) if steps else None
        self._left_in_step = 0
        self._step_scale = spec_mean_step(engine.cfg) if steps else 1.0
        self.dues: list[float] = []  # each token's deadline: the timing model's, however late it came

    async def next_token(self) -> float:
        """Waits for the next token and returns the time it was produced."""
        if self._steps is None or self._left_in_step == 0:
            if self._started:
                self._due += self._engine.token_interval() * self._step_scale
            if self._steps:
                self._left_in_step = self._steps.pop()
        if self._steps is not None:
            self._left_in_step = max(0, self._left_in_step - 1)
        self._started = True
        self.dues.append(self._due)
        if not self._engine.cfg.instant:
            await self._engine.wait_until(self._due)
            if self._engine.cfg.prefill_holds_decode and self._engine.prefilling:
                await self._held_by_prefill()
        return clock()

    async def _held_by_prefill(self) -> None:
        """--prefill-holds-decode: the token waits out every prefill under way or queued (one
        batch), and the next ones are due from then."""
        await self._engine.prefills_done.wait()
        self._due = max(self._due, clock())

    async def pause(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._due = max(self._due, clock())


@dataclass
class Trace:
    """One truth-log record: what the simulated server really did for one request."""

    id: str
    request_id: str | None
    endpoint: str
    stream: bool | None = None
    model: str | None = None
    arrival_s: float = 0.0
    proxy_held_s: float = 0.0  # --proxy-delay-s: how long the proxy held it before arrival_s
    # How far the simulator's own loop fell behind while the request was in it or waiting to be
    # read (sim/stalls.py): how late a busy machine may have made any of its stamps; None without
    # a truth log.
    loop_behind_s: float | None = None
    headers_s: float | None = None
    queued_s: float | None = None  # parsed and tokenized: waiting for a slot from here
    admitted_s: float | None = None
    prefill_start_s: float | None = None
    prefill_end_s: float | None = None
    prompt_tokens: int | None = None  # what the server kept (after --truncate-prompt)
    prompt_tokens_sent: int | None = None  # what the request held
    input_tokens: list[int] | None = None  # /v1/embeddings: each input's tokens, in order; /v1/rerank: each pair's
    query_tokens: int | None = None  # /v1/rerank: the query's tokens (in every pair, before a separator)
    images: list[JsonObject] | None = None  # each image as processed, in order (sim/images.py)
    image_tokens: int | None = None  # their tokens, prefilled after the text
    cached_tokens: int | None = None  # served from cache, truly
    reported_cached_tokens: int | None = None  # what usage said (--no-report-cache-hits: fewer)
    replica: int = 0  # --replicas: which one the router sent it to
    process: int = 0  # --processes: which process served it
    life: int = 0  # --restart-after: 0 before the restart, 1 after
    routed: bool = False  # counted among the router's requests in flight
    # The prefix cache's side (issue 18): prefix tokens this request would have reused had
    # they not been evicted, blocks its insert evicted, and blocks held after it.
    cache_lost_tokens: int | None = None
    cache_evicted_blocks: int | None = None
    cache_used_blocks: int | None = None
    reasoning_dropped: int = 0  # --reasoning-last-turn: earlier turns' reasoning the template left out
    host_copy_s: float = 0.0  # --host-copy-tps: time before prefill_start_s, outside prompt_ms
    completion_tokens: int = 0
    usage_completion_tokens: int | None = None  # what usage claimed (--usage-scale), when sent
    first_content_token_s: float | None = None  # the first answer token (after </think> inline)
    reasoning_tokens: int = 0
    finish_reason: str | None = None
    token_times_s: list[float] = field(default_factory=list)  # when each token was produced
    token_due_s: list[float] = field(default_factory=list)  # when the timing model had it due (a busy
    # machine makes token_times_s late; the model's own properties are judged on these)
    spec_steps: list[int] | None = None  # --spec-draft: tokens per decode step, as planned
    events: list[JsonObject] = field(default_factory=list)
    first_token_event_s: float | None = None
    last_token_event_s: float | None = None
    fault: str | None = None
    output: str | None = None  # --output: the mode it spoke in (prose.MODES)
    broken_tokens: int = 0  # of its planned tokens, those junk or inside a loop (prose.texts)
    echo_logprob_mean: float | None = None  # echo with logprobs: the mean it gave the prompt's tokens after the first
    done_sent: bool | None = None  # data: [DONE] was sent (a stream; not with --hold-open-s)
    held_open_s: float | None = None  # --hold-open-s: the body stayed open this long after usage
    status: int | None = None
    error: str | None = None
    # What the request asked for: the stop strings, the reasoning effort (chat: the body field;
    # completions: the "Reasoning:" line of a Harmony system message) and skip_special_tokens.
    stop: list[str] | None = None
    reasoning_effort: str | None = None
    skip_special_tokens: bool | None = None
    # SHA-256 of the Authorization header, so a test can prove which key arrived without the
    # key itself ever being written; None when no header came.
    authorization_sha256: str | None = None
    # Sent tools (sim/tools.py): the calls the answer held, their tokens (names and arguments)
    # and their arguments' tokens; their events are of kind "tool". None: no tool call.
    tool_calls: int | None = None
    tool_tokens: int | None = None
    tool_argument_tokens: int | None = None
    logged: bool = field(default=False, init=False)  # bookkeeping, not part of the record

    def event(self, kind: str, tokens: int, t: float) -> None:
        self.events.append({"t_s": t, "tokens": tokens, "kind": kind})
        # silent tokens (--silent-tokens) make no event a client sees; a textless first token's
        # role chunk (--textless-first) carries no text
        if tokens and kind not in ("silent", "textless"):
            if self.first_token_event_s is None:
                self.first_token_event_s = t
            self.last_token_event_s = t

    def to_json(self) -> str:
        record = asdict(self)
        del record["logged"]
        return json.dumps(record, separators=(",", ":"))


class TruthLog:
    """JSONL, one line per request, appended and flushed as each request ends."""

    def __init__(self, path: str | None):
        self._file = open(path, "a", encoding="utf-8") if path else None

    def write(self, trace: Trace) -> bool:
        """Writes the record once (True); later calls for the same request do nothing (False)."""
        if trace.logged:
            return False
        trace.logged = True
        if self._file and not self._file.closed:  # handlers cancelled at shutdown end late
            self._file.write(trace.to_json() + "\n")
            self._file.flush()
        return True

    def note(self, record: JsonObject) -> None:
        """A line that is not a request's (the GPUs' draw, sim/gpu.py)."""
        if self._file and not self._file.closed:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file:
            self._file.close()
