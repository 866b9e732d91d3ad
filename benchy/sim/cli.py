"""`benchy sim`: the command line of the embedded simulator."""

from __future__ import annotations

import click
from click.core import ParameterSource

from benchy.sim.config import FAULT_KINDS, FLAVORS, PRESET_HELP, SPEC_STYLES, ConfigError, build_config, parse_fault

_PRESETS_TEXT = "\n".join(f"  {name}: {text}" for name, text in PRESET_HELP.items())

HELP = f"""Run a simulated OpenAI-compatible LLM server whose timing is known exactly.

\b
Endpoints: GET /health, /version, /v1/models; POST /v1/chat/completions and
/v1/completions (streaming SSE or not, stream_options.include_usage), POST
/tokenize (vLLM {{"model","prompt"|"messages"}} or llama.cpp {{"content"}}).
Unknown model: 404; invalid JSON: 400. Responses carry Server: benchy-sim/VER.

\b
Prompt: chat requests are rendered as
  <|start|>system<|message|>PREAMBLE<|end|> + <|start|>ROLE<|message|>TEXT<|end|>
  per message + <|start|>assistant, with a fixed ~26-token system preamble, so
every chat prompt shares a template prefix longer than one cache block.
Output: one-token words; re-tokenizing the content gives the token count.
Length: max_tokens/max_completion_tokens caps it (completions default 16);
ignore_eos gives exactly max_tokens; min_tokens a floor; otherwise a natural
length in [natural-min, natural-max] from a hash of the prompt (finish_reason
"stop", or "length" when capped). A stop string ends the output at the last
whole token before it (searched after min_tokens; finish_reason "stop").
--ignore-ignore-eos: ignore_eos and min_tokens are disregarded (a server
that lacks them), so outputs end at their natural length.

\b
Timing model (time.perf_counter, shared with the client on Linux):
  requests beyond --max-running wait in a FIFO queue;
  prefill is serialized across requests: uncached tokens / --prefill-tps;
  the first token appears when prefill ends; each next one is due
  1/rate after the previous deadline, rate = decode-tps / (1 +
  batch-slowdown * (running - 1)) with the current running count (slots held).
  --instant: no sleeps at all, events written as fast as possible.

\b
Prefix cache (vLLM-like, --no-prefix-cache to disable): 16-token blocks keyed
by a chained hash, LRU of --cache-blocks blocks; cached tokens = 16 x leading
blocks found (never the whole prompt), cost no prefill time and are reported
in usage.prompt_tokens_details.cached_tokens. Full blocks are inserted after
prefill.

\b
SSE shaping: --tokens-per-event K (ceil(n/K) token events) or
--events-per-response E (n tokens in E events, each written when its last
token exists). --role-chunk-first writes a role-only chunk right after the
headers, before queueing and prefill; otherwise the role rides on the first
token. --reasoning-tokens R: the first R chat tokens go in
delta.reasoning_content (an event straddling the boundary becomes two).
--null-content: content is null while usage still counts the tokens.

\b
Harmony (--harmony, gpt-oss): the model generates harmony.render_response:
  <|channel|>analysis<|message|>We ...<|end|><|start|>assistant<|channel|>final
  <|message|>The ...<|return|>
one token per marker or word, the analysis --reasoning-tokens long, the final
message the rest of the output, all cut at the output length. Stop strings
match this raw text (<|message|> stops after 2 tokens, <|end|> keeps only the
analysis). /v1/completions streams it as `text`; skip_special_tokens (default
true, as vLLM) drops the markers but keeps the header words ("analysisWe
..."), so a client must send skip_special_tokens: false. /v1/chat/completions
puts the analysis in reasoning_content, the final in content, and sends no
event for marker tokens (they still take their decode time). Outputs depend on
the user's words only, so both endpoints answer a question alike; usage counts
every token, reasoning_tokens only on chat.
--header-delay-s X: wait X s after arrival before the response headers.

\b
Behaviours of real servers that mislead benchmarks (each in the truth log):
  --spec-draft K: speculative decoding; the first token alone, then steps of
  1 + accepted drafts (each next one accepted with --spec-accept, at most K),
  steps spaced so the token rate stays --decode-tps; all tokens of a step
  share one time in token_times_s. --spec-style vllm: one event per step;
  llamacpp: one event per token, a step's events written back to back.
  --proxy-buffer-bytes B: a buffering proxy; SSE bytes leave once B have
  gathered (and at the end); events[].t_s is when they really left.
  --usage-scale F: usage.completion_tokens claims F x the tokens generated
  (usage_completion_tokens in the log); stream_options.continuous_usage_stats
  puts cumulative usage in every chunk (as vLLM).
  --ignore-stream-options: no usage in streams; non-streamed bodies keep it.
  --truncate-prompt N: only the last N prompt tokens are kept (usage and
  prefill count those; prompt_tokens_sent holds the original).
  --think-inline: the --reasoning-tokens go inside content as <think> ...
  </think> (one token per tag; a short output never closes it); usage says
  reasoning_tokens 0; first_content_token_s is the first answer token.
  --host-copy-tps T: prompt tokens / T seconds of host cache copying before
  each prefill (host_copy_s; prefill_start_s is after it), outside prompt_ms.
  --timings: llama.cpp's `timings` (prompt_n, cache_n, prompt_ms, predicted_n,
  predicted_ms, ...) in a chunk before usage, and in non-streamed bodies.

\b
Server-side views (GET /metrics, Prometheus text from the truth of each
finished request; --no-metrics: 404): --flavor vllm (default) serves vLLM's
names and types: histograms vllm:time_to_first_token_seconds (first token -
arrival), request_queue_time_seconds (admitted - queued),
request_prefill_time_seconds (first token - admitted),
request_decode_time_seconds (last token - first token),
request_inference_time_seconds (last token - admitted),
e2e_request_latency_seconds (last token - arrival); counters prompt_tokens,
generation_tokens, prefix_cache_queries (prompt tokens), prefix_cache_hits
(cached tokens), num_preemptions, request_success; gauges
num_requests_running, num_requests_waiting, kv_cache_usage_perc. --flavor
llamacpp serves llamacpp:prompt_tokens (uncached), prompt_tokens_cached,
prompt_seconds (prefill end - start), tokens_predicted,
tokens_predicted_seconds (last token - prefill end), requests_processing,
requests_deferred, and GET /props (build_info, total_slots = --max-running,
default_generation_settings.n_ctx = --context-length, model_path,
chat_template). Disagreements to provoke: --metrics-token-factor F (the
counters claim F tokens per generated token), --cache-despite-nonce (every
prompt but its last block is served from cache, however it starts),
--no-prompt-details (usage without cached_tokens, so only /metrics tells),
--proxy-delay-s X (requests reach the engine X s late: the server's own
times do not hold it; truth arrival_s is the engine's arrival).

\b
Faults (--fault KIND:RATE, repeatable, rates summing to <= 1; at most one per
request, drawn in arrival order from a RNG seeded by --seed):
  http500, http429 (no Retry-After), http429_retry (Retry-After: 1),
  not_sse (200 text/html), reset (connection aborted before headers): at once;
  cut_stream: connection aborted after about half the tokens;
  stall: after half the tokens, silence for --stall-s s, then the rest;
  malformed_json: one broken data: line mid-stream (non-stream: cut body);
  no_done: no [DONE]; no_usage: no usage chunk/field; null_content.

\b
Truth log (--truth-log PATH, JSONL, one line per request, flushed as each
request ends, faults and errors included): id, request_id (x-request-id
header), endpoint, stream, model, arrival_s, headers_s, queued_s, admitted_s,
prefill_start_s, prefill_end_s, prompt_tokens, cached_tokens,
completion_tokens, reasoning_tokens, finish_reason, token_times_s (one per
token), events [{{t_s, tokens, kind: role|content|reasoning|usage|done|
malformed|marker|timings}}] (t_s: just after the write returned; marker: --harmony
text of special tokens and headers only), first_token_event_s,
last_token_event_s, fault, status (null when no HTTP status was sent), error,
stop (null when not sent), prompt_tokens_sent, host_copy_s,
usage_completion_tokens, first_content_token_s, reasoning_effort (chat: the body field;
completions: a Harmony system message's "Reasoning:" line), skip_special_tokens
(the value in effect),
authorization_sha256 (SHA-256 of the Authorization header; the header itself is
never written).

\b
Presets (explicit flags override them):
{_PRESETS_TEXT}

Prints one line, "benchy sim listening on http://HOST:PORT", once it accepts
connections; stops cleanly on SIGTERM or SIGINT.
"""


@click.command("sim", help=HELP)
@click.option(
    "--preset", default="default", show_default=True, metavar="NAME", help=f"Starting values: {', '.join(PRESET_HELP)}."
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
@click.option("--spec-draft", type=int, help="Speculative decoding: at most this many drafted tokens per step.")
@click.option("--spec-accept", type=float, help="Chance each next drafted token is accepted (default 0.8).")
@click.option("--spec-style", type=click.Choice(SPEC_STYLES), help="One event per step (vllm) or per token (llamacpp).")
@click.option("--proxy-buffer-bytes", type=int, help="A buffering proxy: bytes held until this many gather.")
@click.option("--usage-scale", type=float, help="usage.completion_tokens claims this multiple of the tokens made.")
@click.option(
    "--ignore-stream-options/--no-ignore-stream-options", default=False, help="No usage in streamed responses."
)
@click.option("--truncate-prompt", type=int, help="Keep only the last N prompt tokens (0: never).")
@click.option(
    "--think-inline/--no-think-inline", default=False, help="Reasoning inline in content as <think>…</think>."
)
@click.option("--host-copy-tps", type=float, help="Host cache copy before each prefill, prompt tokens/s (0: none).")
@click.option("--timings/--no-timings", default=False, help="llama.cpp-style `timings` in every response.")
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
    "--fault",
    "faults",
    multiple=True,
    metavar="KIND:RATE",
    help=f"Inject a fault in a fraction of requests; KIND: {', '.join(FAULT_KINDS)}.",
)
@click.option("--seed", type=int, help="Seed of the fault RNG (default 0).")
@click.option("--stall-s", type=float, help="Silence of the stall fault, seconds (default 30).")
@click.option("--host", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port to bind; 0 picks a free one (default 0).")
@click.option("--truth-log", type=click.Path(dir_okay=False), help="Append the truth log here.")
@click.pass_context
def sim(ctx: click.Context, preset: str, faults: tuple[str, ...], **options) -> None:
    explicit = {name: value for name, value in options.items() if _given(ctx, name)}
    try:
        if faults:
            explicit["faults"] = tuple(parse_fault(spec) for spec in faults)
        cfg = build_config(preset, **explicit)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    from benchy.sim.app import run  # aiohttp only once the flags are known to be good

    try:
        run(cfg)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror}") from None


def _given(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
