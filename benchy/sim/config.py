"""The simulator's settings: presets, explicit overrides and their validation.

Kept free of aiohttp and click so that bad flags fail fast, before anything heavy is imported.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

FAULT_KINDS = (
    "http500",
    "http429",
    "http429_retry",
    "cut_stream",
    "reset",
    "stall",
    "malformed_json",
    "not_sse",
    "no_done",
    "no_usage",
    "null_content",
)

FLAVORS = ("vllm", "llamacpp")
CACHE_MATCHES = ("prefix", "anywhere")  # a prefix cache; a position-independent block cache
REASONING_FIELDS = ("reasoning_content", "reasoning", "both")  # both: one text in each (vLLM mid-rename)
# How a router in front of --replicas picks one: round robin, at random, or cache-aware (SGLang's
# cache_aware policy, llm-d's prefix scorer: the replica whose prompts share the most of this
# one's prefix, else the one with the fewest requests in flight).
ROUTES = ("rr", "random", "prefix")
SPEC_STYLES = ("vllm", "llamacpp")

BLOCK_SIZE = 16  # tokens per prefix-cache block, as vLLM's default


class ConfigError(ValueError):
    """A setting that cannot be simulated; the message is one line meant for the user."""


@dataclass(frozen=True)
class SimConfig:
    model: str = "benchy-sim"
    context_length: int = 32768
    prefill_tps: float = 5000.0
    decode_tps: float = 50.0
    max_running: int = 8
    batch_slowdown: float = 0.1
    natural_min: int = 64
    natural_max: int = 512
    prefix_cache: bool = True
    cache_blocks: int = 32768
    tokens_per_event: int = 1
    events_per_response: int = 0  # 0: shaping by tokens_per_event instead
    role_chunk_first: bool = False
    reasoning_tokens: int = 0
    reasoning_field: str = "reasoning_content"  # REASONING_FIELDS: which delta key carries reasoning
    # TensorRT-LLM's stream_interval, vLLM's --stream-interval: the first token alone, then N an event
    stream_interval: int = 0
    harmony: bool = False  # gpt-oss output: analysis then final channel (see engine.plan_harmony)
    null_content: bool = False
    ignore_ignore_eos: bool = False  # a server without ignore_eos/min_tokens
    header_delay_s: float = 0.0
    header_delay_per_token_s: float = 0.0  # more before the headers per prompt token (prompt work)
    # --- real server behaviours that mislead a benchmark (issue 15; see PRESET_HELP) ---
    spec_draft: int = 0  # speculative decoding: up to this many drafted tokens per step (0: off)
    spec_accept: float = 0.8  # chance that each next drafted token is accepted
    spec_style: str = "vllm"  # vllm: one event per step; llamacpp: one event per token, in bursts
    proxy_buffer_bytes: int = 0  # a buffering reverse proxy: SSE bytes held until this many gather
    usage_scale: float = 1.0  # usage.completion_tokens claims this multiple of the tokens generated
    ignore_stream_options: bool = False  # no usage in a stream (non-streamed bodies keep theirs)
    truncate_prompt: int = 0  # keep only the last N prompt tokens (Ollama's num_ctx), 0: never
    hidden_prompt_tokens: int = 0  # a hidden system prompt of this many tokens, put before …
    hidden_prompt_every: int = 1  # … one completion request in this many (the K-th, 2K-th …)
    think_inline: bool = False  # reasoning inside content as <think>…</think> (no reasoning parser)
    host_copy_tps: float = 0.0  # llama.cpp host-RAM prompt cache copy before each prefill (tokens/s)
    # the stream's headers go out when the engine takes the request up (after its queue and the
    # host copy), as llama-server's do, not on arrival (issue 52)
    headers_at_prefill: bool = False
    # a prefill holds every running stream's next token (llama.cpp's one batch: a new slot's prompt
    # goes into the same decode as the others' tokens), so after a freeze the held requests that
    # find a slot free get their headers before any stream's next token (issue 52)
    prefill_holds_decode: bool = False
    timings: bool = False  # llama.cpp's `timings` object at the end of every response
    # --- servers benchy did not write (issue 23) ---
    hold_open_s: float = 0.0  # no [DONE]: after finish_reason and usage the body stays open this long
    silent_tokens: int = 0  # the last N tokens of a response make no event (usage counts them)
    textless_first: bool = False  # the first token's text is held: its role chunk goes out alone
    # --- tool calls (issue 53; sim/tools.py): sent tools, the answer is calls ---
    tool_calls: int = 1  # calls in one answer (parallel calls), unless the request forbids them; 0: text anyway
    tool_parser_buffer: bool = False  # a tool-call parser that holds each call's arguments, sent at once
    output: str = "prose"  # what it says (prose.MODES): prose, or garbage, degraded, loop (issue 55)
    degraded_share: float = 0.3  # --output degraded: the share of tokens replaced by junk
    answers: bool = False  # answers the questions it can work out (sim/answers.py): the canary passes
    vocab: str = "word"  # the sim's tokenizer (vocab.VOCABS): "syllable" cuts words into 3-letter pieces
    tokenize: bool = True  # POST /tokenize with the sim's own vocabulary (False: 404, as many servers)
    note_tokenize: bool = False  # a truth-log line per /tokenize call: when, how many tokens
    instant: bool = False
    faults: tuple[tuple[str, float], ...] = ()
    seed: int = 0
    stall_s: float = 30.0
    host: str = "127.0.0.1"
    port: int = 8000  # benchy run's default --base-url: the two meet with no flags
    truth_log: str | None = None
    preset: str = "default"
    # Server-side views (issue 17): which engine's /metrics and info endpoints to imitate, and
    # behaviours in which the server's account disagrees with the client's.
    flavor: str = "vllm"  # "vllm" | "llamacpp" (/metrics names; llamacpp also serves /props)
    metrics: bool = True  # False: /metrics answers 404
    metrics_token_factor: float = 1.0  # /metrics counts this many tokens per generated token
    cache_despite_nonce: bool = False  # the prefix cache serves every prompt, unique or not
    prompt_details: bool = True  # usage.prompt_tokens_details (vLLM leaves it out by default)
    proxy_delay_s: float = 0.0  # a proxy holds each request this long before the engine sees it
    # dcgm-exporter-shaped GPU metrics at /dcgm/metrics (issue 28; sim/gpu.py): 0 GPUs: none.
    gpus: int = 0
    gpu_watts: float = 350.0  # each GPU's draw while a request runs
    gpu_idle_watts: float = 80.0  # each GPU's draw while none does
    gpu_dram_active: float = 0.5  # DCGM_FI_PROF_DRAM_ACTIVE while a request runs (0 idle)
    gpu_model: str = "NVIDIA H200"
    gpu_omit: tuple[str, ...] = ()  # fields left out of the exporter's text (power, energy, …)
    gpu_fail_every: int = 0  # every Nth GPU scrape answers HTTP 500 (0: never)
    # Deployments (issue 24): a cache that reuses blocks wherever they sit, whether its hits
    # are reported, and a router over replicas that each hold their own cache.
    cache_match: str = "prefix"  # "prefix" | "anywhere" (position-independent, by content)
    report_cache_hits: bool = True  # False: usage counts only the leading hits a prefix cache would
    replicas: int = 1
    route: str = "rr"  # "rr" (round robin) | "random" (seeded by --seed) | "prefix" (cache-aware)
    cache_ttl_s: float = 0.0  # a cached block unused this long is gone (hosted prompt caches, LMCache TTL); 0: never
    # A chat template that renders an assistant message's reasoning_content only after the last
    # user message (Qwen3's, DeepSeek-R1's): a new user message rewrites the history (issue 53).
    reasoning_last_turn: bool = False
    # --route prefix: when the replica holding the prefix has this many more requests in flight
    # than the least loaded one, the least loaded takes it (SGLang's balance_abs_threshold; 0: never)
    route_balance: int = 0
    # Images (issue 56; sim/images.py): decoded with Pillow, ceil(W/P) x ceil(H/P) tokens, encoded
    # through a cache keyed by content hash at a cost it logs
    image_patch: int = 28  # P: pixels a side of one image token's patch
    image_encode_tps: float = 5000.0  # image tokens encoded a second, on an encoder-cache miss
    image_cache: bool = True  # False: every image is encoded again (no processor/encoder cache)
    image_token_details: bool = False  # usage.prompt_tokens_details.multimodal_tokens.image (vLLM's own count)
    # A router's own pages (vllm-router, sglang-router): GET /list_workers names each replica
    # (served at /replicas/N), and the router's /metrics answers for the first replica only.
    router_pages: bool = False
    throttle: float = 0.0  # decode loses this share as the GPU heats (0: never)
    throttle_s: float = 10.0  # seconds after decoding first ran that it takes to lose all of it
    cache_reset: bool = True  # False: no reset endpoint (vLLM: 404; llama.cpp: 501, no --slot-save-path)
    # A server's process misbehaving (issue 52; sim/lifecycle.py): a freeze, a restart, several
    # processes on one port. N counts generation requests as they arrive (0: never).
    freeze_after: int = 0  # the N-th request's arrival stops the whole process …
    freeze_s: float = 1.0  # … this long (nothing read or written)
    restart_after: int = 0  # the N-th request's arrival cuts every connection, closes the port …
    restart_down_s: float = 2.0  # … this long, then serves again with empty caches, counters from zero
    processes: int = 1  # server processes sharing the port, each with its own counters


_DGX_SPARK = dict(
    model="openai/gpt-oss-120b",
    context_length=131072,
    prefill_tps=2500.0,
    decode_tps=38.0,
    max_running=16,
    batch_slowdown=0.1,
    prefix_cache=True,
)

PRESETS: dict[str, dict[str, Any]] = {
    "default": {},
    # 167-token prompt + 256 output tokens: 0.07 s prefill + 255/38 s decode = about 37.8 tok/s.
    "dgx-spark-gpt-oss-120b": _DGX_SPARK,
    # vLLM's Harmony parser buffering gpt-oss output: the report's 29 tokens in 2 events.
    "buffered": {**_DGX_SPARK, "events_per_response": 2},
    # The CUTLASS FP4 path on SM121: content is null while usage still counts the tokens.
    "fp4-null-content": {**_DGX_SPARK, "null_content": True},
    # gpt-oss through /v1/completions with a client-side template (report 000): raw Harmony text.
    "gpt-oss-harmony": {**_DGX_SPARK, "harmony": True, "reasoning_tokens": 24},
    # EAGLE/MTP on vLLM: 1-8 tokens per event at a steady cadence, the first token alone.
    "spec-vllm": {"spec_draft": 7, "spec_accept": 0.8, "decode_tps": 150.0},
    # llama-server with a draft model: one event per token, accepted tokens in bursts.
    "spec-llamacpp": {
        "spec_draft": 8,
        "spec_accept": 0.8,
        "spec_style": "llamacpp",
        "decode_tps": 150.0,
        "timings": True,
    },
    # nginx proxy_buffering on: one token per event, delivered in 4 KB bursts.
    "proxy-buffered": {"proxy_buffer_bytes": 4096, "decode_tps": 200.0},
    # A backend whose usage claims twice the tokens it streamed.
    "usage-double": {"usage_scale": 2.0},
    # A proxy that drops stream_options, in front of a server sending 8 tokens per event.
    "no-usage-8-per-event": {"ignore_stream_options": True, "tokens_per_event": 8, "decode_tps": 200.0},
    # Ollama's default num_ctx: only the last 1,024 prompt tokens are kept.
    "truncating": {"truncate_prompt": 1024},
    # An R1-style model without a reasoning parser: <think>…</think> inside content.
    "think-inline": {"think_inline": True, "reasoning_tokens": 32},
    # llama-server's default host-RAM prompt cache: a copy before each prefill, outside prompt_ms.
    "llamacpp-ram-cache": {
        "timings": True,
        "host_copy_tps": 4000.0,
        "prefill_tps": 10000.0,
        "max_running": 1,
        "context_length": 16384,
    },
    # A small byte-level BPE that merged nothing outside ASCII: a CJK character is 3 tokens, an
    # emoji 4 (the tiny llama.cpp model's 4k vocabulary splits CJK so): one more character of
    # such text can step over a target by several tokens.
    "byte-level": {"vocab": "bytes"},
    # llama-server with default flags at one prompt length (an H100, pp2048): its host-RAM
    # prompt cache copy (149 ms there) passes before its headers and outside its prompt_ms.
    "llamacpp-host-copy": {
        "flavor": "llamacpp",
        "timings": True,
        "host_copy_tps": 14000.0,
        "headers_at_prefill": True,
        "prefill_tps": 10000.0,
        "decode_tps": 150.0,
        "max_running": 4,
        "context_length": 16384,
    },
    # A gateway that sends finish_reason and usage, no [DONE], and keeps the connection open.
    "no-done-open": {"hold_open_s": 8.0, "decode_tps": 150.0},
    # The whole answer as one event at the end (a server that buffers everything).
    "one-event": {"events_per_response": 1, "decode_tps": 200.0},
    # The whole body in one read (a compressing proxy: gzip on for event streams).
    "one-read": {"proxy_buffer_bytes": 1 << 30, "decode_tps": 200.0},
    # The H200 llama-server: one token an event but the last token makes none; timings.
    "llamacpp-silent-eos": {"silent_tokens": 1, "timings": True, "flavor": "llamacpp", "decode_tps": 150.0},
    # The H200 gpt-oss llama-server: the first token is a byte of a split character, so its
    # role chunk goes out alone and the next event brings both tokens' text; timings.
    "llamacpp-textless-first": {"textless_first": True, "timings": True, "flavor": "llamacpp", "decode_tps": 150.0},
    # An R1-style model without a reasoning parser whose budget is spent in thought.
    "think-unclosed": {"think_inline": True, "reasoning_tokens": 1 << 20},
    # vLLM --stream-interval 20 / TensorRT-LLM stream_interval 20: first token alone, then 20 an event.
    "stream-interval-20": {"stream_interval": 20, "decode_tps": 200.0},
    # vLLM around the reasoning_content -> reasoning rename: the same reasoning text in both fields.
    "reasoning-both": {"reasoning_field": "both", "reasoning_tokens": 32},
    # A prompt cache with a lifetime (hosted APIs keep 5-10 minutes, LMCache a TTL), scaled down.
    "cache-ttl": {"cache_ttl_s": 0.5, "prefill_tps": 100000.0, "decode_tps": 3000.0, "max_running": 64},
    # A gateway with pre-call guardrails (or a long network path): 250 ms before the engine
    # sees each request; the engine's own times never hold it.
    "gateway-250ms": {"proxy_delay_s": 0.25},
    # A cache-aware router over four one-slot replicas: every request that shares a system
    # prompt goes to the replica that holds it and queues there while the others idle.
    "cache-aware-router": {"replicas": 4, "route": "prefix", "max_running": 1},
    # vllm-router (cache_aware) in front of two replicas: its /metrics is one replica's, its
    # /list_workers names both; a replica two requests busier than the other loses the next one.
    "vllm-router": {"replicas": 2, "route": "prefix", "route_balance": 2, "router_pages": True, "max_running": 4},
    # A GPU that throttles under sustained load (a DGX Spark, a laptop): decode falls steadily
    # linearly, by 40% over the first 12 s of decoding (eight 64-token requests: by a fifth).
    "throttling": {"throttle": 0.4, "throttle_s": 12.0, "decode_tps": 100.0},
    # A server process that stops for 1.5 s at the 20th request (a GC pause, a synchronous step).
    "frozen-process": {"freeze_after": 20, "freeze_s": 1.5},
    # The same stop on llama-server: no TTFT histogram, only each response's timings (prompt_ms).
    "frozen-llamacpp": {
        "freeze_after": 20,
        "freeze_s": 1.5,
        "flavor": "llamacpp",
        "timings": True,
        "headers_at_prefill": True,
        "prefill_holds_decode": True,
    },
    # A pod restarted behind a stable address at the 12th request: cut, refused 2 s, back empty.
    "restart": {"restart_after": 12, "restart_down_s": 2.0},
    # Four API-server processes on one port without shared metrics: /metrics answers for one.
    "several-processes": {"processes": 4},
    # For measuring the client's own CPU cost: no sleeps, no queueing.
    "instant": {"instant": True, "max_running": 100000},
}

PRESET_HELP = {
    "default": "prefill 5000 tok/s, decode 50 tok/s, max_running 8, batch_slowdown 0.1, cache on",
    "dgx-spark-gpt-oss-120b": "model openai/gpt-oss-120b, context 131072, prefill 2500 tok/s, "
    "decode 38 tok/s, max_running 16, cache on (167-token prompt + "
    "256 output tokens: ~37.8 tok/s end to end)",
    "buffered": "the dgx preset with 2 events per response (29 tokens in 2 SSE events)",
    "fp4-null-content": "the dgx preset with content: null (broken FP4 backend)",
    "gpt-oss-harmony": "the dgx preset with --harmony and a 24-token analysis message",
    "spec-vllm": "speculative decoding as vLLM streams it: up to 8 tokens per event (acceptance 0.8), "
    "steady cadence, the first token alone; decode 150 tok/s",
    "spec-llamacpp": "speculative decoding as llama-server streams it (draft 8): one event per "
    "token, each step's tokens written back to back; llama.cpp timings",
    "proxy-buffered": "a buffering reverse proxy: one token per event, bytes delivered in 4 KB bursts",
    "usage-double": "usage.completion_tokens claims twice the tokens streamed",
    "no-usage-8-per-event": "stream_options ignored (no usage in streams), 8 tokens per event",
    "truncating": "the server keeps only the last 1,024 prompt tokens (Ollama's num_ctx)",
    "think-inline": "32 reasoning tokens inline in content as <think>…</think>",
    "llamacpp-ram-cache": "llama.cpp timings, a host-RAM cache copy of 4,000 tok/s before each "
    "prefill (outside prompt_ms), prefill 10,000 tok/s, 1 slot, context 16384",
    "byte-level": "a byte-level vocabulary (--vocab bytes): ASCII words one token each, every other character a "
    "token per UTF-8 byte (CJK 3, emoji 4)",
    "llamacpp-host-copy": "llama.cpp flavor and timings, its host-RAM cache copy (14,000 tok/s) before the "
    "stream's headers and outside prompt_ms, prefill 10,000 tok/s, 4 slots",
    "no-done-open": "finish_reason and usage, then no [DONE] and the connection held open 8 s; decode 150 tok/s",
    "one-event": "the whole answer as one SSE event at the end; decode 200 tok/s",
    "one-read": "the whole body delivered in one read at the end (a compressing proxy); decode 200 tok/s",
    "llamacpp-silent-eos": "llama.cpp flavor and timings, one token an event, the last token makes no event",
    "llamacpp-textless-first": "llama.cpp flavor and timings, the first token makes a role chunk without "
    "text, the second event brings both tokens' text",
    "think-unclosed": "<think> opened inline and never closed: the whole output is thought",
    "stream-interval-20": "the first token alone when prefill ends, then 20 tokens an event at 20 steps' "
    "interval (vLLM --stream-interval, TensorRT-LLM stream_interval); decode 200 tok/s",
    "reasoning-both": "32 reasoning tokens sent in both reasoning_content and reasoning (the same text)",
    "cache-ttl": "cached blocks unused for 0.5 s expire (a hosted prompt cache's lifetime, scaled down); "
    "prefill 100,000 tok/s, decode 3,000 tok/s",
    "gateway-250ms": "a gateway holds each request 250 ms before the engine sees it (--proxy-delay-s 0.25)",
    "cache-aware-router": "4 one-slot replicas behind a cache-aware router (--route prefix): shared "
    "prefixes go to the replica that holds them, other prompts to the least loaded",
    "throttling": "decode falls steadily, by 40% over the first 12 s of decoding, then stays "
    "(--throttle 0.4 --throttle-s 12); decode 100 tok/s",
    "vllm-router": "2 replicas of 4 slots behind a cache-aware router (--route prefix --route-balance 2) with "
    "its pages (--router-pages): /metrics answers for one replica, /list_workers names both",
    "frozen-process": "the whole process stops for 1.5 s when the 20th request arrives: requests wait unread "
    "(--freeze-after 20 --freeze-s 1.5)",
    "frozen-llamacpp": "the frozen-process stop on a llama.cpp-shaped server: its /metrics (no TTFT histogram) "
    "and each response's timings, headers when a slot takes the request, prefills that hold the decodes "
    "(--flavor llamacpp --timings --headers-at-prefill --prefill-holds-decode)",
    "restart": "the server restarts when the 12th request arrives: connections cut, refused for 2 s, back with "
    "empty caches and /metrics from zero (--restart-after 12 --restart-down-s 2)",
    "several-processes": "4 server processes share the port, each with its own /metrics (--processes 4)",
    "instant": "no sleeps at all, effectively unlimited max_running",
}


def parse_fault(spec: str) -> tuple[str, float]:
    kind, sep, rate_text = spec.partition(":")
    if not sep:
        raise ConfigError(f"--fault {spec!r}: expected KIND:RATE, e.g. http500:0.1")
    if kind not in FAULT_KINDS:
        raise ConfigError(f"--fault: unknown kind {kind!r} (choose from: {', '.join(FAULT_KINDS)})")
    try:
        rate = float(rate_text)
    except ValueError:
        raise ConfigError(f"--fault {spec!r}: rate {rate_text!r} is not a number") from None
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"--fault {spec!r}: rate must be between 0 and 1")
    return kind, rate


def build_config(preset: str = "default", **overrides: Any) -> SimConfig:
    """The preset's values with every given (non-None) override on top, validated."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r} (choose from: {', '.join(PRESETS)})")
    known = {f.name for f in dataclasses.fields(SimConfig)}
    unknown = set(overrides) - known
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    values = {**PRESETS[preset], **{k: v for k, v in overrides.items() if v is not None}}
    cfg = SimConfig(preset=preset, **values)
    validate(cfg)
    return cfg


def validate(cfg: SimConfig) -> None:
    for name in (
        "prefill_tps",
        "decode_tps",
        "batch_slowdown",
        "header_delay_s",
        "header_delay_per_token_s",
        "stall_s",
        "host_copy_tps",
        "proxy_delay_s",
        "hold_open_s",
        "cache_ttl_s",
        "freeze_s",
        "restart_down_s",
    ):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"--{_flag(name)} must not be negative")
    if not cfg.instant:
        for name in ("prefill_tps", "decode_tps"):
            if getattr(cfg, name) == 0:
                raise ConfigError(f"--{_flag(name)} must be positive (0 only makes sense with --instant)")
    _require_at_least(cfg, "context_length", 1)
    _require_at_least(cfg, "max_running", 1)
    _require_at_least(cfg, "natural_min", 1)
    _require_at_least(cfg, "cache_blocks", 1)
    _require_at_least(cfg, "tokens_per_event", 1)
    _require_at_least(cfg, "events_per_response", 0)
    _require_at_least(cfg, "reasoning_tokens", 0)
    _require_at_least(cfg, "stream_interval", 0)
    if cfg.reasoning_field not in REASONING_FIELDS:
        raise ConfigError(f"--reasoning-field must be one of: {', '.join(REASONING_FIELDS)}")
    if cfg.stream_interval and (cfg.events_per_response or cfg.tokens_per_event != 1 or cfg.spec_draft):
        raise ConfigError(
            "--stream-interval sets the events itself: no --tokens-per-event, --events-per-response or --spec-draft"
        )
    _require_at_least(cfg, "replicas", 1)
    _validate_lifecycle(cfg)
    _require_at_least(cfg, "route_balance", 0)
    _require_at_least(cfg, "image_patch", 1)
    if cfg.image_encode_tps <= 0:
        raise ConfigError("--image-encode-tps must be positive")
    if cfg.cache_match not in CACHE_MATCHES:
        raise ConfigError(f"--cache-match must be one of: {', '.join(CACHE_MATCHES)}")
    if cfg.route not in ROUTES:
        raise ConfigError(f"--route must be one of: {', '.join(ROUTES)}")
    if cfg.natural_max < cfg.natural_min:
        raise ConfigError("--natural-max must be at least --natural-min")
    if cfg.events_per_response and cfg.tokens_per_event != 1:
        raise ConfigError("--tokens-per-event and --events-per-response cannot be combined")
    if cfg.flavor not in FLAVORS:
        raise ConfigError(f"--flavor must be one of: {', '.join(FLAVORS)}")
    if cfg.metrics_token_factor <= 0:
        raise ConfigError("--metrics-token-factor must be positive")
    _validate_behaviours(cfg)
    if not 0 <= cfg.port <= 65535:
        raise ConfigError("--port must be between 0 and 65535")
    for kind, rate in cfg.faults:
        parse_fault(f"{kind}:{rate}")
    if sum(rate for _, rate in cfg.faults) > 1.0 + 1e-9:
        raise ConfigError("--fault rates add up to more than 1 (one fault at most per request)")


def _validate_behaviours(cfg: SimConfig) -> None:
    for name in ("spec_draft", "proxy_buffer_bytes", "truncate_prompt", "silent_tokens", "hidden_prompt_tokens"):
        _require_at_least(cfg, name, 0)
    if not 0.0 <= cfg.spec_accept <= 1.0:
        raise ConfigError("--spec-accept must be between 0 and 1")
    if cfg.spec_style not in SPEC_STYLES:
        raise ConfigError(f"--spec-style must be one of: {', '.join(SPEC_STYLES)}")
    if cfg.spec_draft and (cfg.events_per_response or cfg.tokens_per_event != 1 or cfg.harmony):
        raise ConfigError(
            "--spec-draft sets the events itself: no --tokens-per-event, --events-per-response or --harmony"
        )
    if not 0.0 <= cfg.throttle < 1.0:
        raise ConfigError("--throttle must be at least 0 and below 1")
    if cfg.throttle_s <= 0:
        raise ConfigError("--throttle-s must be positive")
    if cfg.usage_scale <= 0:
        raise ConfigError("--usage-scale must be positive")
    _validate_gpus(cfg)
    if cfg.think_inline and cfg.harmony:
        raise ConfigError("--think-inline and --harmony cannot be combined")
    _require_at_least(cfg, "tool_calls", 0)
    if cfg.textless_first and (cfg.harmony or cfg.spec_draft):
        raise ConfigError("--textless-first cannot be combined with --harmony or --spec-draft")


def _validate_lifecycle(cfg: SimConfig) -> None:
    for name in ("freeze_after", "restart_after"):
        _require_at_least(cfg, name, 0)
    _require_at_least(cfg, "processes", 1)
    if cfg.processes > 1 and (cfg.restart_after or cfg.gpus or cfg.replicas > 1):
        raise ConfigError("--processes cannot be combined with --restart-after, --gpus or --replicas")


GPU_FIELDS = ("power", "energy", "util", "dram", "fb")


def _validate_gpus(cfg: SimConfig) -> None:
    _require_at_least(cfg, "gpus", 0)
    _require_at_least(cfg, "gpu_fail_every", 0)
    if cfg.gpu_watts < 0 or cfg.gpu_idle_watts < 0:
        raise ConfigError("--gpu-watts and --gpu-idle-watts must not be negative")
    if not 0.0 <= cfg.gpu_dram_active <= 1.0:
        raise ConfigError("--gpu-dram-active must be between 0 and 1")
    unknown = [f for f in cfg.gpu_omit if f not in GPU_FIELDS]
    if unknown:
        raise ConfigError(f"--gpu-omit: unknown field {unknown[0]!r} (choose from: {', '.join(GPU_FIELDS)})")


def _require_at_least(cfg: SimConfig, name: str, minimum: int) -> None:
    if getattr(cfg, name) < minimum:
        raise ConfigError(f"--{_flag(name)} must be at least {minimum}")


def _flag(name: str) -> str:
    return name.replace("_", "-")
