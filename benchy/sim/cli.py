"""`benchy sim`: the command line of the embedded simulator."""

from __future__ import annotations

import errno
from typing import Any

import click
from click.core import ParameterSource

from benchy.sim import prose, vocab
from benchy.sim.config import (
    CACHE_MATCHES,
    FAULT_KINDS,
    FLAVORS,
    PRESET_HELP,
    REASONING_FIELDS,
    ROUTES,
    SPEC_STYLES,
    ConfigError,
    build_config,
    parse_fault,
)

HELP = """Run a simulated OpenAI-compatible LLM server whose timing is known exactly.

\b
Listens on http://127.0.0.1:8000, benchy run's default --base-url, so a plain
`benchy run` in another terminal measures it (--port 0 picks a free port).
Prints "benchy sim listening on http://HOST:PORT" once it accepts connections;
stops cleanly on SIGTERM or SIGINT. Timing model, prefix cache, faults, Harmony
and the truth log: docs/sim.md.
"""


@click.command("sim", help=HELP)
@click.option(
    "--preset",
    default="default",
    show_default=True,
    metavar="NAME",
    help=f"Starting values (explicit flags override them; docs/sim.md): {', '.join(PRESET_HELP)}.",
)
@click.option("--model", help="Model id served and required of requests.")
@click.option("--context-length", type=int, help="max_model_len in tokens.")
@click.option("--prefill-tps", type=float, help="Prefill rate, uncached prompt tokens/s.")
@click.option("--decode-tps", type=float, help="Decode rate of a lone request, tokens/s.")
@click.option("--max-running", type=int, help="Requests served at once; the rest queue (FIFO).")
@click.option(
    "--batch-slowdown", type=float, help="Per-request decode rate is decode-tps / (1 + this x (running - 1))."
)
@click.option("--natural-min", type=int, help="Shortest natural output, tokens.")
@click.option("--natural-max", type=int, help="Longest natural output, tokens.")
@click.option("--prefix-cache/--no-prefix-cache", default=True, help="Automatic prefix cache.")
@click.option("--cache-blocks", type=int, help="Prefix cache capacity in 16-token blocks.")
@click.option("--tokens-per-event", type=int, help="Tokens in each SSE content event.")
@click.option("--events-per-response", type=int, help="Split all tokens into this many events.")
@click.option(
    "--role-chunk-first/--no-role-chunk-first",
    default=False,
    help="Role-only chunk right after the headers, before prefill (vLLM).",
)
@click.option("--reasoning-tokens", type=int, help="First R chat tokens are reasoning_content.")
@click.option(
    "--reasoning-field",
    type=click.Choice(REASONING_FIELDS),
    help="The delta key of reasoning text; both: the same text in each (default reasoning_content).",
)
@click.option(
    "--stream-interval",
    type=int,
    help="The first token alone, then N tokens an event at N steps' interval (vLLM, TensorRT-LLM; 0: off).",
)
@click.option(
    "--harmony/--no-harmony",
    default=False,
    help="gpt-oss Harmony output: analysis then final channel, special tokens in raw completions.",
)
@click.option(
    "--null-content/--no-null-content",
    default=False,
    help="content: null while usage counts the tokens (broken FP4 backend).",
)
@click.option(
    "--ignore-ignore-eos/--no-ignore-ignore-eos",
    default=False,
    help="Disregard ignore_eos and min_tokens: outputs end at their natural length.",
)
@click.option("--header-delay-s", type=float, help="Seconds before response headers are sent.")
@click.option(
    "--header-delay-per-token-s",
    type=float,
    help="More seconds before the headers per prompt token: a server that works on the prompt before it answers "
    "(llama.cpp with its host-RAM prompt cache on an H200: 76 ms at 512 tokens, 0.98 s at 8,192).",
)
@click.option("--spec-draft", type=int, help="Speculative decoding: at most this many drafted tokens per step.")
@click.option("--spec-accept", type=float, help="Chance each next drafted token is accepted (default 0.8).")
@click.option("--spec-style", type=click.Choice(SPEC_STYLES), help="One event per step (vllm) or per token (llamacpp).")
@click.option("--proxy-buffer-bytes", type=int, help="A buffering proxy: bytes held until this many gather.")
@click.option("--usage-scale", type=float, help="usage.completion_tokens claims this multiple of the tokens made.")
@click.option(
    "--ignore-stream-options/--no-ignore-stream-options", default=False, help="No usage in streamed responses."
)
@click.option("--truncate-prompt", type=int, help="Keep only the last N prompt tokens (0: never).")
@click.option("--hidden-prompt-tokens", type=int, help="A hidden system prompt of N tokens before some prompts.")
@click.option(
    "--hidden-prompt-every",
    type=click.IntRange(min=1),
    help="The hidden prompt goes before one completion request in K (the K-th, 2K-th …; default 1: all).",
)
@click.option(
    "--think-inline/--no-think-inline", default=False, help="Reasoning inline in content as <think>…</think>."
)
@click.option("--host-copy-tps", type=float, help="Host cache copy before each prefill, prompt tokens/s (0: none).")
@click.option(
    "--headers-at-prefill/--no-headers-at-prefill",
    default=False,
    help="The stream's headers go out when the engine takes the request up (after the host copy), as llama-server's.",
)
@click.option(
    "--prefill-holds-decode/--no-prefill-holds-decode",
    default=False,
    help="A prefill holds every running stream's next token (llama.cpp's one batch of prompts and decodes).",
)
@click.option("--hold-open-s", type=float, help="No [DONE]: the body stays open this long after usage.")
@click.option("--silent-tokens", type=int, help="The last N tokens of a response make no event.")
@click.option(
    "--textless-first/--no-textless-first",
    default=False,
    help="The first token makes a role chunk without text (a split character); the next event has both.",
)
@click.option(
    "--tool-calls", type=int, help="Sent tools, an answer holds this many calls (default 1; parallel; 0: text anyway)."
)
@click.option(
    "--tool-parser-buffer/--no-tool-parser-buffer",
    default=False,
    help="A tool-call parser that holds each call's arguments and sends them at once.",
)
@click.option("--timings/--no-timings", default=False, help="llama.cpp-style `timings` in every response.")
@click.option(
    "--output",
    "output",
    type=click.Choice(prose.MODES),
    help="What it says: prose (default), or a broken model's garbage (made-up words), degraded "
    "(a share of tokens junk: --degraded-share), loop (the same phrase to the limit) or fillers "
    "(<filler_N> special tokens: one token each generated, several each resent as text).",
)
@click.option(
    "--answers/--no-answers",
    default=None,
    help="Play a working model: answer the questions it can work out (a product, a code to copy, "
    "a sentence's words, a small JSON object) right, so --canary passes; prose otherwise.",
)
@click.option(
    "--degraded-share", type=click.FloatRange(0, 1), help="--output degraded: the share of tokens junk (0.3)."
)
@click.option(
    "--vocab",
    type=click.Choice(vocab.VOCABS),
    help="The sim's tokenizer: word (a word one token, default) or syllable (a word cut into "
    "pieces of up to 3 letters: several tokens, unlike o200k).",
)
@click.option(
    "--tokenize/--no-tokenize",
    default=True,
    help="Serve POST /tokenize with the sim's own vocabulary (--no-tokenize: 404, as servers without one).",
)
@click.option(
    "--note-tokenize/--no-note-tokenize",
    default=False,
    help="Note each /tokenize call in the truth log (when it came, how many tokens).",
)
@click.option("--instant/--no-instant", default=False, help="No sleeps: infinitely fast model.")
@click.option(
    "--flavor",
    type=click.Choice(FLAVORS),
    help="Whose /metrics names to imitate; llamacpp also serves /props (default vllm).",
)
@click.option("--metrics/--no-metrics", default=True, help="Serve GET /metrics (Prometheus text).")
@click.option("--metrics-token-factor", type=float, help="/metrics counts this many tokens per generated token.")
@click.option(
    "--cache-despite-nonce/--no-cache-despite-nonce",
    default=False,
    help="The prefix cache serves every prompt but its last block, unique or not.",
)
@click.option(
    "--prompt-details/--no-prompt-details",
    default=True,
    help="usage.prompt_tokens_details.cached_tokens (vLLM omits it by default).",
)
@click.option("--proxy-delay-s", type=float, help="A proxy holds each request this long before the engine sees it.")
@click.option(
    "--route-balance",
    type=int,
    help="--route prefix: the idlest replica takes a request when the prefix's has this many more in flight (0: never).",
)
@click.option(
    "--router-pages/--no-router-pages",
    default=None,
    help="A router's pages: /list_workers names the replicas (at /replicas/N); /metrics answers for the first only.",
)
@click.option("--throttle", type=float, help="Decode loses this share as the GPU heats (0-1; default 0: never).")
@click.option("--throttle-s", type=float, help="Seconds of decoding to lose all of --throttle (default 10).")
@click.option("--gpus", type=int, help="Simulated GPUs behind a dcgm-exporter at /dcgm/metrics (0: none).")
@click.option("--gpu-watts", type=float, help="Each GPU's draw while a request runs, W (default 350).")
@click.option("--gpu-idle-watts", type=float, help="Each GPU's draw while none runs, W (default 80).")
@click.option("--gpu-dram-active", type=float, help="DCGM_FI_PROF_DRAM_ACTIVE while busy, 0-1 (default 0.5).")
@click.option("--gpu-model", help='modelName label of the GPUs (default "NVIDIA H200").')
@click.option(
    "--gpu-omit",
    multiple=True,
    metavar="FIELD",
    help="Leave a field out of /dcgm/metrics: power, energy, util, dram, fb.",
)
@click.option("--gpu-fail-every", type=int, help="Every Nth /dcgm/metrics scrape answers HTTP 500.")
@click.option(
    "--cache-match",
    type=click.Choice(CACHE_MATCHES),
    help="prefix: a prompt reuses its leading cached blocks; anywhere: every cached block, wherever it sits "
    "(position-independent reuse, as LMCache/CacheBlend). Default prefix.",
)
@click.option(
    "--report-cache-hits/--no-report-cache-hits",
    default=True,
    help="Report every cache hit in usage (--no-report-cache-hits: only the leading ones a prefix cache would).",
)
@click.option(
    "--cache-reset/--no-cache-reset",
    default=True,
    help="Serve the flavor's cache reset (vLLM POST /reset_prefix_cache; llama.cpp slot erase, else HTTP 501 "
    "as llama-server without --slot-save-path).",
)
@click.option("--cache-ttl-s", type=float, help="A cached block unused this long expires (0: never; default 0).")
@click.option(
    "--reasoning-last-turn/--no-reasoning-last-turn",
    default=None,
    help="The chat template renders assistant reasoning_content only after the last user message "
    "(Qwen3, DeepSeek-R1): each new user message rewrites the history, and the cache loses it "
    "from the first earlier reasoning on (truth: reasoning_dropped).",
)
@click.option("--image-patch", type=int, help="An image of W x H pixels is ceil(W/P) x ceil(H/P) tokens (default 28).")
@click.option(
    "--image-encode-tps", type=float, help="Image tokens encoded a second on an encoder-cache miss (default 5000)."
)
@click.option(
    "--image-cache/--no-image-cache",
    default=True,
    help="Cache encoded images by content hash (vLLM's processor and encoder caches); off: encode every image.",
)
@click.option(
    "--image-token-details/--no-image-token-details",
    default=False,
    help="usage.prompt_tokens_details.multimodal_tokens.image (vLLM's): the server's own count of image tokens.",
)
@click.option("--replicas", type=int, help="Replicas behind one router, each with its own slots and cache (default 1).")
@click.option(
    "--route",
    type=click.Choice(ROUTES),
    help="How the router picks a replica: rr, random or prefix (cache-aware; default rr).",
)
@click.option("--freeze-after", type=int, help="The N-th request's arrival stops the whole process (0: never).")
@click.option("--freeze-s", type=float, help="How long a freeze lasts, s (default 1): nothing is read or written.")
@click.option(
    "--restart-after",
    type=int,
    help="The N-th request's arrival restarts the server: connections cut, the port closed, then back with empty "
    "caches and counters from zero (0: never).",
)
@click.option("--restart-down-s", type=float, help="How long a restart leaves the port closed, s (default 2).")
@click.option(
    "--processes", type=int, help="Server processes sharing the port, each with its own /metrics (default 1)."
)
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="KIND:RATE",
    help=f"Inject a fault in a fraction of requests; KIND: {', '.join(FAULT_KINDS)}.",
)
@click.option("--seed", type=int, help="Seed of the fault RNG (default 0).")
@click.option("--stall-s", type=float, help="Silence of the stall fault, seconds (default 30).")
@click.option("--host", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port to bind; 0 picks a free one (default 8000).")
@click.option("--truth-log", type=click.Path(dir_okay=False), help="Append the truth log here.")
@click.pass_context
def sim(ctx: click.Context, /, preset: str, faults: tuple[str, ...], gpu_omit: tuple[str, ...], **options: Any) -> None:
    explicit = {name: value for name, value in options.items() if _given(ctx, name)}
    if gpu_omit:
        explicit["gpu_omit"] = tuple(gpu_omit)
    try:
        if faults:
            explicit["faults"] = tuple(parse_fault(spec) for spec in faults)
        if explicit.get("flavor") == "llamacpp":
            explicit.setdefault("timings", True)  # llama.cpp times every response (--no-timings: not)
        cfg = build_config(preset, **explicit)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    from benchy.sim.serve import run  # aiohttp only once the flags are known to be good

    try:
        run(cfg)
    except OSError as exc:
        hint = " (another server holds it? --port 0 picks a free port)" if exc.errno == errno.EADDRINUSE else ""
        raise click.ClickException(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror}{hint}") from None


def _given(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
