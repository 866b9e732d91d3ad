"""Typed warnings about a run: a pure function of its results (`check(run)`), run after every
metric and never writing into them. Each warning has a stable code, a message, an actionable
hint, the metrics it qualifies and, where a figure decided it, typed evidence (observed,
threshold, unit).

Codes (severity): sse_buffering (warning), above_bandwidth_ceiling (error), ceiling_unknown
(warning), prefix_cache_hit (warning), depth_cache_miss (warning), empty_output / zero_tokens
(warning; error when most requests of the case failed), reasoning_only (warning),
output_length_mismatch (warning), no_usage (warning), request_errors (warning; error when
most requests of the case failed), client_overloaded (warning), first_chunk_before_prefill (info),
dangerous_stop (warning; error when most requests of the case failed), special_tokens_stripped
(warning), usage_mismatch (warning), local_tokenizer_mismatch (info), prompt_length_mismatch (warning),
ttft_not_prefill (warning), prefill_holds_queueing (warning), gpu_samples_failed (warning),
gpu_idle_dominates (info), steady_state_differs (warning; checks/steady.py), client_bound (warning; checks/client_bound.py).

What is withheld is decided where the results are built (results.py: a buffered stream, a
TTFT trend, stripped Harmony markers), with a reason code; a check reports it by that code and
lists the metrics in `withheld`. Requests whose output is empty or zero tokens are failures
(metrics.classify, before any statistic is taken).
"""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks import client_bound as _client_bound  # noqa: F401  (registers client_bound)
from benchy.checks import drift as drift_checks
from benchy.checks import drift_across as _drift_across  # noqa: F401  (registers rate_drift_across_cases)
from benchy.checks import latency as latency_checks
from benchy.checks import server as server_checks
from benchy.checks import steady as _steady  # noqa: F401  (registers steady_state_differs)
from benchy.checks.registry import (
    ERROR,
    INFO,
    WARNING,
    Warning_,
    case_check,
    check,
    run_check,
)
from benchy.measure import evidence, metrics, profiles, stats
from benchy.measure.metrics import OUTPUT_FAILURES
from benchy.measure.workloads import PartialReuse, WorkloadFigures
from benchy.results import latency
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    ClientHealth,
    Evidence,
    LoopHealth,
    RunResult,
    Setup,
    WarningDetails,
    WorkerHealth,
)

BUFFERING_HINT = (
    "The server sends several tokens per event (vLLM buffers Harmony output, for "
    "example). Compare servers by end-to-end throughput, or fix the server's streaming."
)
# A first chunk this much ahead of the first token (and this share of TTFT) is worth a note.
FIRST_CHUNK_LEAD_MIN_S = 0.02
FIRST_CHUNK_LEAD_SHARE = 0.2
# benchy's event loop (monitor.py) counts as overloaded when, with requests in flight, one
# sample in 20 woke more than 20 ms late (p95, so that one hiccup of the OS is not enough: a
# timestamp that late distorts any inter-token gap), it spent over 5% of the time in stalls
# (long blocks are few samples but much time), or its CPU time passed 90% of the wall time
# (one core saturated); or, in an open loop without --max-inflight (whose queue delays sends
# on purpose), one send in ten left more than 20 ms after its scheduled time.
LAG_P95_LIMIT_MS = 20.0
STALLED_SHARE_LIMIT = 0.05
SEND_LAG_P90_LIMIT_S = 0.02
CPU_SHARE_LIMIT = 0.9
MIN_LAG_SAMPLES = 10


def run_checks(results: dict) -> list[dict]:
    """The warnings of saved results (a results.json dict), as dicts."""
    return [w.to_dict() for w in check(RunResult.from_dict(results))]


def is_clean(warnings: list[CheckWarning]) -> bool:
    """No error and no warning (notes of severity info do not make a run unclean)."""
    return all(w.severity == INFO for w in warnings)


@case_check
def sse_buffering(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    why = case.reason("ttft_s")
    if case.summary.get("ttft_s") is None and why.code == metrics.BUFFERED:
        per_event = case.median("tokens_per_event")
        yield Warning_(
            "sse_buffering",
            WARNING,
            case.label,
            f"{why.message}. TTFT, inter-token latency, decode and prefill rates are unavailable; "
            "end-to-end throughput is still valid.",
            BUFFERING_HINT,
            withheld=metrics.STREAM_TIMING_METRICS,
            details=WarningDetails(tokens_per_event_median=per_event),
            evidence=(
                Evidence("tokens_per_event_median", per_event, evidence.FIRST_ARRIVAL_MAX_TOKENS, "tokens/event"),
            ),
        )


@case_check
def request_errors(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    # Empty and zero-token outputs are failures too, but have checks of their own.
    errors = {k: v for k, v in case.errors.items() if k not in OUTPUT_FAILURES}
    if errors:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items(), key=str))
        total = case.n_ok + case.n_failed
        first = _first_errors(case, errors)
        said = _first_errors_text(first)
        yield Warning_(
            "request_errors",
            _failure_severity(case),
            case.label,
            f"{sum(errors.values())} of {total} requests failed ({kinds}); statistics cover "
            f"only the {case.n_ok} that succeeded.{said}",
            _errors_hint(errors, run, case),
            details=WarningDetails(errors=errors, first_errors=first),
        )


def _first_errors_text(first: dict[str, str]) -> str:
    """The first failure of each kind as one sentence of its own, the kinds apart by `;`."""
    if not first:
        return ""
    said = "; ".join(f"{kind}: {message.strip().rstrip('.')}" for kind, message in first.items())
    return f" The first of each kind: {said}."


def _first_errors(case: CaseResult, errors: dict[str, int]) -> dict[str, str]:
    """The first failure of each kind, in the server's own words (its HTTP error body)."""
    return {kind: message for kind, message in case.facts().first_errors.items() if kind in errors}


def _errors_hint(errors: dict[str, int], run: RunResult, case: CaseResult) -> str:
    """What to do about the failures the case saw, by their kinds: a dead server is not fixed
    by a longer --timeout, nor a refused parameter by a lower load."""
    if any(k.startswith("http_4") and k != "http_429" for k in errors):
        lower = (  # a trace's lengths are its own: no flag of benchy's shortens them
            "Replay a trace whose lengths fit the server" if case.kind == "trace" else "Lower --pp/--depth/--tg"
        )
        return (
            "The server refused requests (its message is above): a prompt longer than its context, "
            f"or a parameter it does not take. {lower}, or fix the option."
        )
    if "connect" in errors or (run.stopped and run.stopped.by == "server-gone"):
        return (
            "Connections were refused or never made: the server was down or unreachable (it may "
            "have died during the run: see its log). Restart it, check --base-url, and run again."
        )
    if errors.keys() & {"timeout", "stall"}:
        return (
            "Requests ran past --timeout or went silent past --stall-timeout: the server is "
            "overloaded or stuck. Lower the load, or raise the limit if such waits are expected."
        )
    return (
        "See each request's `error` in requests.jsonl; connections the server dropped or reset "
        "usually mean it is overloaded or restarting: lower the load."
    )


@case_check
def prefix_cache_hit(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    template = template_tokens(run.setup)
    # A cached --depth context is meant to hit (depth_cache_miss checks it); only the rest counts.
    # Requests of a cache-aware workload (they carry unique_tokens) are meant to hit: the
    # workload checks judge their reuse instead.
    facts = case.facts()
    threshold = max(template, 0) + 0.5
    hits = [cached for excess, cached in zip(facts.cache_excess, facts.cache_excess_cached) if excess > threshold]
    if hits:
        most = max(hits)
        yield Warning_(
            "prefix_cache_hit",
            WARNING,
            case.label,
            f"{len(hits)} of {facts.n_ok} requests were partly served from the "
            f"server's prefix cache (up to {most} cached prompt tokens beyond the "
            f"{template:.0f}-token chat template): TTFT, prefill and end-to-end figures are "
            "inflated.",
            "Keep the nonce on (no --no-nonce) so no request shares a prefix with another.",
            metrics=("ttft_s", "prefill_tps", "e2e_tps"),
            details=WarningDetails(requests=len(hits), cached_tokens_max=most, template_tokens=template),
            evidence=(Evidence("cached_tokens_max", most, template, "tokens"),),
        )


def template_tokens(setup: Setup) -> float:
    """The chat template's tokens, as calibration measured them (0 without a calibration)."""
    return setup.calibration.overhead_tokens if setup.calibration else 0.0


@case_check
def depth_cache_miss(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """--depth-mode cached: the server must report the context it was sent ahead as cached."""
    facts = case.facts()  # context_served judged each request that reused one
    if not facts.n_context_missed or _partial(case) is not None:  # some hit: routing, not a cache that is off
        return
    depth = facts.missed_context
    if not facts.missed_cached_known:
        what = "the server reports no cached_tokens, so benchy cannot verify it; prefill t/s is unavailable"
    else:
        most = facts.missed_cached_max
        what = (
            f"the server reported at most {most} cached tokens, so it prefilled the context again: "
            "prefill t/s covers depth + pp there, not the pp tokens alone"
        )
    yield Warning_(
        "depth_cache_miss",
        WARNING,
        case.label,
        f"{facts.n_context_missed} of {facts.n_reusing} requests reused a {depth}-token context sent ahead, but {what}.",
        "Enable the server's prefix cache (vLLM --enable-prefix-caching, llama.cpp cache_prompt) "
        "or a larger cache, or measure with --depth-mode cold.",
    )


# Cache-aware workloads (benchy/measure/workloads.py finds these; a shared-prefix case's miss is
# depth_cache_miss's, since its prefixes are cached contexts).
CACHE_HINT = (
    "The server's prefix cache is smaller than what the load keeps alive: give it more room "
    "(vLLM: --gpu-memory-utilization, --num-gpu-blocks-override; llama.cpp: --cache-ram, more "
    "--parallel slots; SGLang: --mem-fraction-static) or lower the concurrency."
)


def _workload(case: CaseResult, *, judged: bool = False) -> WorkloadFigures | None:
    """The case's workload figures; judged: only where eviction and no-reuse are this module's
    (a shared-prefix case's prefixes are cached contexts: depth_cache_miss judges those)."""
    figures = case.workload
    if figures is None or (judged and figures.kind == "shared_prefix"):
        return None
    return figures


@case_check
def cache_eviction(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """Reuse worked, then fell short of what the server had already prefilled."""
    figures = _workload(case, judged=True)
    ev = figures.eviction if figures else None
    if ev is None:
        return
    where = f"turn {ev.turn} (conversation {ev.conversation})" if ev.turn else f"request {ev.request_id}"
    yield Warning_(
        "cache_eviction",
        WARNING,
        case.label,
        f"The server stopped reusing what it had already prefilled from {where}, {ev.after_s:.1f} s into "
        f"the case with {ev.in_flight} requests in flight and {ev.held_tokens:,} prompt tokens held "
        f"across {'conversations' if ev.turn else 'requests'}: {ev.requests} of {ev.of_requests} "
        f"requests that should have reused earlier tokens reported fewer cached tokens ({ev.lost_tokens:,} "
        "tokens prefilled again). Their TTFT includes that prefill.",
        CACHE_HINT,
        metrics=("ttft_s", "prefill_tps"),
        details=ev.to_dict(),
        evidence=(Evidence("reported_cached_tokens", ev.reported_tokens, ev.expected_tokens, "tokens"),),
    )


@case_check
def cache_not_reused(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    figures = _workload(case, judged=True)
    miss = figures.no_reuse if figures else None
    if miss is None:
        return
    yield Warning_(
        "cache_not_reused",
        WARNING,
        case.label,
        f"{miss.requests} requests resent {miss.expected_tokens:,} tokens the server had already "
        "prefilled, and it reported none of them as cached: its prefix cache is off or does not report hits.",
        "Enable the server's prefix cache (vLLM --enable-prefix-caching, llama.cpp cache_prompt, SGLang's "
        "radix cache is on by default) and check that it reports usage.prompt_tokens_details.cached_tokens.",
        metrics=("ttft_s", "prefill_tps"),
        details=miss.to_dict(),
    )


ROUTING_HINT = (
    "Behind a router, give it cache affinity (session or prefix-aware routing: SGLang router, llm-d, "
    "nginx hash on a session key), or measure one replica directly; otherwise see cache_eviction's hint."
)
EXPIRY_HINT = (
    "The cache forgets what sat idle too long (hosted prompt caches keep 5-10 minutes, LMCache a TTL): "
    "shorten --think-time below that lifetime to measure reuse, or raise the lifetime if the server lets you."
)


@case_check
def cache_partial_reuse(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """Some requests reused what they should have, others not: a finding of its own, never
    "reported none" when some were reported."""
    part = _partial(case)
    if part is None:
        return
    cause = (
        f" The pattern: {part.pattern}."
        if part.pattern
        else " Hits and misses alternate, which eviction alone (hits, then misses) does not do."
    )
    cause += _router_words(run)
    yield Warning_(
        "cache_partial_reuse",
        WARNING,
        case.label,
        f"Partial reuse: {part.hit_requests} of {part.requests} requests ({part.hit_fraction:.0%}) reused all the "
        f"history the server had prefilled, {part.partial_requests} reused part of it and {part.missed_requests} "
        f"none; the server reported {part.reported_tokens:,} of {part.expected_tokens:,} expected tokens "
        f"cached.{cause} TTFT mixes hits and misses.",
        EXPIRY_HINT if part.cause == "expiry" else ROUTING_HINT,
        metrics=("ttft_s", "prefill_tps"),
        details=part.to_dict(),
        evidence=(Evidence("hit_fraction", round(part.hit_fraction, 4), 1.0, "requests"),),
    )


def _partial(case: CaseResult) -> PartialReuse | None:
    """The case's partial reuse, a shared-prefix case's too (some of its requests found the
    prefix and others not: the prefix was sent ahead, so the cache works where it was)."""
    figures = _workload(case)
    part = figures.partial_reuse if figures else None
    if part is None or (figures is not None and figures.kind == "shared_prefix" and not part.hit_requests):
        return None
    return part


def _router_words(run: RunResult) -> str:
    status = run.setup.server_metrics
    if status is None or not status.router:
        return ""
    return (
        f" The base URL is a router: its {status.router} names {len(status.replicas)} replicas, each "
        "with its own cache."
    )


@case_check
def cache_not_reported(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """A workload whose server never says how many tokens it served from cache."""
    figures = _workload(case)
    if figures is None or figures.reuse.requests or not figures.reuse.unreported:
        return
    yield Warning_(
        "cache_not_reported",
        WARNING,
        case.label,
        f"None of the {figures.reuse.unreported} successful requests reported cached tokens "
        "(usage.prompt_tokens_details.cached_tokens): the reuse this workload is about cannot be "
        "verified, and eviction or leakage would go unseen. TTFT is measured all the same.",
        "vLLM: start it with --enable-prompt-tokens-details; other servers: check that usage "
        "carries prompt_tokens_details.cached_tokens.",
        details=WarningDetails(requests=figures.reuse.unreported),
    )


@case_check
def cache_leakage(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """More cached tokens than the request could share: its unique part was served from cache."""
    figures = _workload(case)
    leak = figures.leakage if figures else None
    if leak is None:
        return
    where = f", the first at turn {leak.turn}" if leak.turn else ""
    yield Warning_(
        "cache_leakage",
        WARNING,
        case.label,
        f"{leak.requests} of {leak.of_requests} requests reported more cached tokens than they could "
        f"share with anything sent before (up to {leak.max_excess_tokens:,.0f} tokens into their unique, "
        f"nonce-led part{where}): the cache served text from another conversation or run, or the server "
        "miscounts cached tokens. Their TTFT is too good to be this workload's.",
        "Keep the nonce on (no --no-nonce); if it is on, the server's cached_tokens cannot be trusted.",
        metrics=("ttft_s", "prefill_tps"),
        details=leak.to_dict(),
    )


# ------------------------------------------------------------------ outputs


def _failure_severity(case: CaseResult) -> str:
    """A case that lost most of its measured requests is a failed case, not a qualified one."""
    return ERROR if case.n_failed > case.n_ok else WARNING


@case_check
def empty_output(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    bad = case.facts().failed_as["empty_output"]
    if bad.count:
        claimed = int(stats.median(bad.claimed_tokens))
        nulls = bad.content_null_events
        yield Warning_(
            "empty_output",
            _failure_severity(case),
            case.label,
            f"{bad.count} of {_measured(case)} requests returned no content although the server "
            f"claimed {claimed} completion tokens (median; {nulls} `content: null` deltas): "
            f"they count as failed; statistics cover only the {case.n_ok} that succeeded.",
            "A broken kernel can generate tokens and print nothing (vLLM's CUTLASS FP4 path on "
            "SM121/GB10 returns content: null; VLLM_MXFP4_BACKEND=marlin fixes it). Check one "
            "answer with curl before benchmarking.",
            details=WarningDetails(requests=bad.count, claimed_tokens_median=claimed, content_null_events=nulls),
        )


@case_check
def zero_tokens(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    bad = case.facts().failed_as["zero_tokens"]
    if bad.count:
        reasons = sorted(bad.finish_reasons)
        yield Warning_(
            "zero_tokens",
            _failure_severity(case),
            case.label,
            f"{bad.count} of {_measured(case)} requests generated 0 tokens (finish_reason "
            f"{', '.join(reasons)}): they count as failed; statistics cover only the "
            f"{case.n_ok} that succeeded.",
            "The server stopped at once: a stop string or EOS token that matches immediately "
            "(e.g. <|message|> or <|end|> in a Harmony model's stop list) or a wrong chat "
            "template. Check the stop list and generation_config.",
            details=WarningDetails(requests=bad.count, finish_reasons=reasons),
        )


@case_check
def reasoning_only(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    facts = case.facts()  # no content but reasoning, or a think block never closed
    if facts.n_reasoning_only:
        yield Warning_(
            "reasoning_only",
            WARNING,
            case.label,
            f"{facts.n_reasoning_only} of {facts.n_ok} requests spent every output token on reasoning and "
            "gave no final answer: time to first content is unavailable, and the rates "
            "count reasoning tokens.",
            "Raise --tg so the model reaches its answer, or lower its reasoning effort.",
            metrics=("ttfc_s",),
            details=WarningDetails(requests=facts.n_reasoning_only),
        )


@case_check
def output_length_mismatch(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    # Without usage the token count is a lower bound: it cannot show a short output.
    facts = case.facts()
    got = facts.delivered  # the believed count of each request with usage
    if not facts.n_short:
        return
    delivered = int(stats.median(got))
    cause, hint = _short_output_cause(facts.short_finish_reasons, run.setup.stop)
    asked = f"the {case.tg}" if case.tg else "each request's own length (a dataset's answers)"
    yield Warning_(
        "output_length_mismatch",
        WARNING,
        case.label,
        f"{facts.n_short} of {len(got)} requests got fewer tokens than {asked} asked "
        f"(median {delivered}, min {min(got)}): {cause}. "
        f"The row is labelled with the tokens delivered; its rates are real for those, but "
        f"not comparable with tg{case.tg} elsewhere.",
        hint,
        metrics=("e2e_tps", "decode_tps"),
        details=WarningDetails(
            asked=case.tg,
            delivered_median=delivered,
            delivered_min=min(got),
            delivered_max=max(got),
            short_requests=facts.n_short,
            finish_reasons=sorted({str(reason) for reason in facts.short_finish_reasons}),
        ),
        evidence=(Evidence("delivered_median", delivered, case.tg, "tokens"),),
    )


def _short_output_cause(reasons: set, stop: list[str]) -> tuple[str, str]:
    """Why outputs came back short, by what the server said (their finish_reasons) and what was sent."""
    if reasons == {"length"}:
        return (
            "the server ended them at a length limit below the one asked (finish_reason length)",
            "Check the server's own output cap (max_tokens limit, context length minus the prompt).",
        )
    if stop and "stop" in reasons:
        return (
            f"a stop string ({', '.join(map(repr, stop))}, from --stop) or the end-of-sequence "
            "token ended them (finish_reason stop)",
            "Drop --stop to measure a fixed output length; if they still end early, the server "
            "ignores ignore_eos and min_tokens.",
        )
    return (
        "the server stopped at its end of sequence: it ignored ignore_eos and min_tokens",
        "Use a server that honours ignore_eos (vLLM, SGLang, llama.cpp, TensorRT-LLM do), or "
        "compare against runs of the delivered length.",
    )


COUNTED_METRICS = ("e2e_tps", "decode_tps", "itl_s", "tokens_per_event")  # built on the token count


@case_check
def no_usage(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """Only where the count is then an estimate: one token per event, which the locally counted
    text confirms, needs no usage."""
    facts = case.facts()  # without usage, and counted by estimate
    if facts.n_guessed:
        scale = run.setup.calibration.scale if run.setup.calibration else 1.0
        yield Warning_(
            "no_usage",
            WARNING,
            case.label,
            f"{facts.n_guessed} of {facts.n_ok} requests carried no token usage and several tokens per "
            f"event: benchy counted the streamed text with its own tokenizer (× {scale:.3g}, the "
            "ratio calibration measured), so token counts and the rates built on them are estimates.",
            "Ask the server for usage (benchy sends stream_options include_usage; some proxies "
            "drop it) or measure the server directly.",
            metrics=COUNTED_METRICS,
            details=WarningDetails(requests=facts.n_guessed, scale=scale),
        )


USAGE_HINT = (
    "A backend or proxy miscounts usage. The figures use the count of the streamed text; check the "
    "server's usage with one curl request against the text it returned."
)


@case_check
def usage_mismatch(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """usage against two independent witnesses that agree on another count (evidence.token_count),
    or usage below the event count."""
    facts = case.facts()
    first = facts.first_doubted
    if first is None:
        return
    usage = stats.median(facts.doubted_usage)
    counted = stats.median(facts.doubted_tokens)
    yield Warning_(
        "usage_mismatch",
        WARNING,
        case.label,
        f"{facts.n_doubted} of {facts.n_ok} requests: {first.mismatch}. The figures use the {first.source} "
        f"count ({first.tokens} tokens), not usage.",
        USAGE_HINT,
        metrics=COUNTED_METRICS,
        details=WarningDetails(requests=facts.n_doubted, usage_median=usage, counted_median=counted),
        evidence=(Evidence("usage_to_stream_ratio", usage / counted if counted else None, 1.0, "ratio"),),
    )


LOCAL_TOKENIZER_HINT = (
    "Nothing to fix: usage is used. The local count is benchy's o200k tokenizer, an estimate "
    "for any model whose vocabulary is not o200k (and for random-weight models, whose text is noise)."
)


@case_check
def local_tokenizer_mismatch(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """A note, not a warning: the local count alone disagreed with usage and was outvoted."""
    facts = case.facts()
    if not facts.n_local_odd:
        return
    ratio = stats.median(facts.local_ratios)
    yield Warning_(
        "local_tokenizer_mismatch",
        INFO,
        case.label,
        f"{facts.n_local_odd} of {facts.n_ok} requests: {facts.first_local_mismatch}.",
        LOCAL_TOKENIZER_HINT,
        details=WarningDetails(requests=facts.n_local_odd, backed_by=sorted(facts.local_backed_by)),
        evidence=(Evidence("local_to_usage_ratio", ratio, 1.0, "ratio"),),
    )


PROMPT_LENGTH_HINT = (
    "The server keeps only part of long prompts (Ollama's num_ctx default, "
    "truncate_prompt_tokens, context shifting): raise its context, or lower --pp/--depth."
)
PROMPT_LONGER_HINT = (
    "The server counted more than benchy sent: it adds text of its own to some requests (a hidden "
    "system prompt, a chat template that differs from the one calibration measured)."
)
ESTIMATE_HINT = (
    " benchy's lengths here are an o200k estimate (setup.calibration.lengths says why no exact "
    "source fit); the model's own tokenizer, --tokenizer FILE|DIR, may fit where the server's did not."
)


@case_check
def prompt_length_mismatch(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """The server counted another prompt length than the row's, for a reason of its own:
    shorter (truncation) or longer (text it adds). Misses on both sides of the target under an
    o200k estimate are benchy's own fitting error, not the server's: no warning (the requests'
    prefill t/s is still left out, each row saying why). A minority of misses qualifies those
    requests; the case's prefill t/s is the others' (results/build.py)."""
    facts = case.facts()  # prefill_tps unavailable as PROMPT_LENGTH_MISSED
    missed = facts.n_prompt_missed
    if not missed:
        return
    longer = facts.n_prompt_longer
    estimate = case.prompt_lengths == evidence.LENGTHS_O200K
    if estimate and 0 < longer < missed:
        return
    counted = int(stats.median(facts.prompt_missed_tokens))
    target = facts.prompt_missed_target
    way = "more" if longer * 2 > missed else "fewer"
    hint = PROMPT_LONGER_HINT if way == "more" else PROMPT_LENGTH_HINT
    whole = "prefill_tps" in case.unavailable
    effect = (
        "so the row is not the prompt length it is labelled with: prefill t/s is withheld, and TTFT and "
        "end-to-end figures are those of another prompt."
        if whole
        else "those requests are left out of prefill t/s, which is the other requests'; their TTFT and "
        "end-to-end times are those of another prompt."
    )
    yield Warning_(
        "prompt_length_mismatch",
        WARNING,
        case.label,
        f"{missed} of {facts.n_ok} requests: the server counted {counted} prompt tokens (median), {way} than "
        f"the {target} sent, {effect}",
        hint + (ESTIMATE_HINT if estimate else ""),
        metrics=("ttft_s", "e2e_tps", "e2e_s"),
        withheld=("prefill_tps",) if whole else (),
        details=WarningDetails(requests=missed, target_tokens=target, server_tokens_median=counted),
        evidence=(Evidence("server_prompt_tokens_median", counted, target, "tokens"),),
    )


@run_check
def prompt_length_at_calibration(run: RunResult) -> Iterable[CheckWarning]:
    """calibration's length_check (prompts.check_length): the run's longest prompt, counted."""
    for endpoint, cal in sorted(run.setup.calibrations.items()):
        found = cal.length_check
        if found is not None and found.missed:
            yield Warning_(
                "prompt_length_mismatch",
                WARNING,
                None,
                f"At calibration ({endpoint}) the server counted {found.server_tokens} prompt tokens "
                f"of the run's longest prompt ({found.target_tokens} tokens): it does not read long "
                "prompts whole, so rows above that length are not what their labels say.",
                PROMPT_LENGTH_HINT,
                details={"endpoint": endpoint, **found.to_dict()},
                evidence=(Evidence("server_prompt_tokens", found.server_tokens, found.target_tokens, "tokens"),),
            )


@run_check
def cache_reset_unavailable(run: RunResult) -> Iterable[CheckWarning]:
    """--cache-reset asked for, and the server offers no way to empty its cache."""
    failed = [c for c in run.cases if c.cache_reset and not c.cache_reset.ok]
    first = failed[0].cache_reset if failed else None
    if first is None:
        return
    yield Warning_(
        "cache_reset_unavailable",
        WARNING,
        None,
        f"--cache-reset could not empty the server's prefix cache: {first.message}. "
        "The run went on without resets: its cases started on whatever the cache held.",
        "vLLM answers POST /reset_prefix_cache, SGLang POST /flush_cache, llama-server the slot erase "
        "only when started with --slot-save-path DIR; otherwise restart the server for a cold cache.",
        details={"cases": [c.label for c in failed], **first.to_dict()},
    )


def _measured(case: CaseResult) -> int:
    return case.n_ok + case.n_failed


# ------------------------------------------------------------------ stream timing


@case_check
def first_chunk_before_prefill(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """The registry's first_chunk_lead_s against TTFT, both summarized with the case (files
    before 1.12 carry no lead: no note for them)."""
    lead, ttft = case.median("first_chunk_lead_s"), case.median("ttft_s")
    if lead is None or ttft is None:
        return
    if lead >= max(FIRST_CHUNK_LEAD_MIN_S, FIRST_CHUNK_LEAD_SHARE * ttft):
        yield Warning_(
            "first_chunk_before_prefill",
            INFO,
            case.label,
            f"A role-only or empty first chunk arrived {lead * 1000:.0f} ms (median) before "
            f"the first token: TTFT ({ttft * 1000:.0f} ms) is taken from the first token, "
            "not from that chunk.",
            "Nothing to fix; tools that time the first chunk report a TTFT this much too low.",
            metrics=("ttft_s",),
            details=WarningDetails(lead_s_median=lead, ttft_s_median=ttft),
            evidence=(
                Evidence(
                    "first_chunk_lead_s_median", lead, max(FIRST_CHUNK_LEAD_MIN_S, FIRST_CHUNK_LEAD_SHARE * ttft), "s"
                ),
            ),
        )


# Where the server reports its own prompt time, TTFT minus it beyond this share of TTFT (and
# this many seconds) is time that is not prefill: queueing, a host cache copy, scheduling.
NOT_PREFILL_SHARE = 0.25
NOT_PREFILL_MIN_S = 0.02
# Files without a queueing judgment (before 1.9): TTFT at concurrency c above this multiple of
# the c=1 TTFT (and this many seconds more) is time spent queueing (metrics.queued's thresholds).
QUEUE_TTFT_GROWTH = metrics.QUEUE_TTFT_GROWTH
QUEUE_TTFT_MIN_S = metrics.QUEUE_TTFT_MIN_S
NOT_PREFILL_HINT = (
    "TTFT is what a user waits; prefill t/s taken from it is not the server's prefill speed. "
    "For llama.cpp, --cache-ram 0 removes the host-RAM cache copy; no more requests in flight "
    "than slots removes the queueing."
)


@case_check
def ttft_not_prefill(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """Time inside TTFT that the server's own prompt time does not hold."""
    facts = case.facts()  # (TTFT, prompt_ms) of each request with llama.cpp's timings
    if not facts.pair_ttft:
        return
    ttft = stats.median(facts.pair_ttft)
    prompt = stats.median(facts.pair_prompt_s)
    gap = case.median("ttft_gap_s")  # the registry's TTFT − prompt_ms, summarized with the case
    if gap is None:
        return
    limit = max(NOT_PREFILL_MIN_S, NOT_PREFILL_SHARE * ttft)
    if gap < limit:
        return
    client, server = case.median("prefill_tps"), case.median("server_prefill_tps")
    rates = ""
    if client is not None and server is not None:
        rates = f" Prefill: {client:,.0f} t/s from TTFT, against the server's own {server:,.0f} t/s."
    yield Warning_(
        "ttft_not_prefill",
        WARNING,
        case.label,
        f"TTFT is {ttft * 1000:,.0f} ms (median) but the server's own prompt time is "
        f"{prompt * 1000:,.0f} ms: {gap * 1000:,.0f} ms ({gap / ttft:.0%}) of TTFT is not prefill "
        f"({_not_prefill_cause(case, run)}).{rates}",
        NOT_PREFILL_HINT,
        metrics=("prefill_tps", "ttft_s"),
        details=WarningDetails(ttft_s_median=ttft, server_prompt_s_median=prompt, not_prefill_s_median=gap),
        evidence=(Evidence("not_prefill_s_median", gap, limit, "s"),),
    )


def _not_prefill_cause(case: CaseResult, run: RunResult) -> str:
    fixed = latency.found_for(case, run.cases)
    if fixed is not None:
        return f"a fixed {fixed.fixed_s * 1000:,.0f} ms before the server takes the request: see fixed_latency"
    slots, in_flight = _slots(run), case.concurrency
    if in_flight is None:  # a trace replay: its arrivals set the load
        return "queueing behind the replay's other requests in flight, or work before prefill"
    if slots is not None and in_flight > slots:
        return f"{in_flight} requests in flight on {_slots_text(slots)}: they queue"
    if in_flight > 1:
        return "queueing behind the other requests in flight, or work before prefill"
    return "work before prefill, e.g. llama.cpp's host-RAM prompt cache copying slots"


def _slots(run: RunResult) -> int | None:
    slots = run.setup.server.slots if run.setup.server else None
    return slots if slots is not None and slots > 0 else None


@run_check
def prefill_holds_queueing(run: RunResult) -> Iterable[CheckWarning]:
    """TTFT under load past the same prompt alone (results/build.py judged it and withheld the
    prefill rate), or, in files without that judgment, TTFT growing with concurrency or more
    requests in flight than the server's slots."""
    for judged in run.cases:  # closed and open loops, workloads: results/build.py judged them
        if judged.queueing is not None:
            yield from _queued(judged, run)
    cases = [c for c in run.cases if c.rate is None and c.concurrency is not None and c.figure("ttft_s")]
    slots = _slots(run)
    for case in cases:
        if case.queueing is not None:
            continue
        if (case.concurrency or 1) <= 1 or case.facts().pair_ttft:
            continue  # ttft_not_prefill speaks where the server reports its own prompt time
        base = next((c for c in cases if c.concurrency == 1 and _same_shape(c, case)), None)
        why = _queue_evidence(case, base, slots)
        if why:
            yield Warning_(
                "prefill_holds_queueing",
                WARNING,
                case.label,
                f"{why}: requests wait for a free slot, and that wait is in TTFT, so prefill t/s "
                "here holds queue time; it is not the server's prefill speed.",
                QUEUE_HINT,
                metrics=("prefill_tps", "ttft_s"),
                details=WarningDetails(concurrency=case.concurrency, slots=slots),
            )


QUEUE_HINT = (
    "TTFT under load is what a user waits, queue included. For the server's prefill speed, "
    "measure at concurrency 1, or keep requests in flight at or below the server's slots "
    "(llama.cpp -np, vLLM --max-num-seqs, OLLAMA_NUM_PARALLEL)."
)


def _queued(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    q = case.queueing
    if q is None or not q.queued or q.alone_ttft is None or q.excess_s is None or q.loaded_ttft_s is None:
        return
    against = "the same prompt sent alone" if q.source == "alone" else f"the same prompt at concurrency 1 ({q.source})"
    against += f" ({q.alone_ttft.median * 1000:,.0f} ms)"
    if case.kind == "trace" or (case.kind == "shared_prefix" and case.depth):  # judged on a line (load/alone.py)
        against = (
            "what each request's uncached tokens take alone (the line through a short and a long prompt sent alone)"
        )
    load = metrics.load_words(case.kind, case.concurrency, case.rate)
    yield Warning_(
        "prefill_holds_queueing",
        WARNING,
        case.label,
        f"TTFT {load} is {q.loaded_ttft_s * 1000:,.0f} ms (median), "
        f"{q.excess_s * 1000:,.0f} ms more than {against}: "
        f"requests waited for the server ({_queue_cause(case, run)}). TTFT holds that wait; "
        f"prefill t/s is withheld.{_server_prefill_text(case)}",
        QUEUE_HINT,
        metrics=("ttft_s",),
        withheld=("prefill_tps",),
        details=WarningDetails(
            concurrency=case.concurrency,
            slots=_slots(run),
            source=q.source,
            alone_ttft_s_median=q.alone_ttft.median,
            ttft_s_median=q.loaded_ttft_s,
            server_prefill_tps=_server_prefill(case),
        ),
        evidence=(Evidence("ttft_excess_s", q.excess_s, q.threshold_s, "s"),),
    )


def _slots_text(slots: int) -> str:
    return f"{slots} slot" if slots == 1 else f"{slots} slots"


def _queue_cause(case: CaseResult, run: RunResult) -> str:
    slots = _slots(run)
    if slots is not None and case.concurrency is not None and case.concurrency > slots:
        return f"{case.concurrency} requests in flight on {_slots_text(slots)}"
    return "it serves fewer requests at once than were in flight, or slows each prefill under load"


def _server_prefill(case: CaseResult) -> float | None:
    """The server's own prefill rate: its per-response timings (llama.cpp), else its /metrics."""
    own = case.median("server_prefill_tps")
    if own is not None:
        return own
    server = case.server_figures()
    return server.derived.get("prefill_tps") if server else None


def _server_prefill_text(case: CaseResult) -> str:
    rate = _server_prefill(case)
    return (
        f" The server's own prefill: {rate:,.0f} t/s."
        if rate is not None
        else " The server reports no prefill time of its own."
    )


def _same_shape(a: CaseResult, b: CaseResult) -> bool:
    return (a.pp, a.tg, a.depth, a.depth_mode, a.endpoint) == (b.pp, b.tg, b.depth, b.depth_mode, b.endpoint)


def _queue_evidence(case: CaseResult, base: CaseResult | None, slots: int | None) -> str | None:
    if slots is not None and (case.concurrency or 1) > slots:
        return f"{case.concurrency} requests in flight on a server with {_slots_text(slots)}"
    if base is None:
        return None
    ttft, ttft_1 = case.figure("ttft_s"), base.figure("ttft_s")
    if ttft is None or ttft_1 is None:
        return None
    if ttft.median > QUEUE_TTFT_GROWTH * ttft_1.median and ttft.median - ttft_1.median > QUEUE_TTFT_MIN_S:
        return (
            f"TTFT grows with concurrency ({ttft_1.median * 1000:,.0f} ms at c1, "
            f"{ttft.median * 1000:,.0f} ms at c{case.concurrency})"
        )
    return None


@run_check
def ttft_grows_with_output(run: RunResult) -> Iterable[CheckWarning]:
    """The cases results.py withheld because TTFT grew with the output length (metrics.
    buffered_trend), one warning each, with every TTFT of their group."""
    trend = [c for c in run.cases if c.reason("ttft_s").code == metrics.BUFFERED_TREND and "ttft_s" in c.withheld]
    for case in trend:
        group = [c for c in trend if _same_prompt(c, case)]
        yield Warning_(
            "sse_buffering",
            WARNING,
            case.label,
            case.unavailable["ttft_s"],
            BUFFERING_HINT,
            withheld=metrics.STREAM_TIMING_METRICS,
            details=WarningDetails(ttft_s_by_tg={f"tg{c.tg}": c.withheld["ttft_s"].median for c in group}),
        )


def _same_prompt(a: CaseResult, b: CaseResult) -> bool:
    return (a.pp, a.depth, a.depth_mode, a.endpoint) == (b.pp, b.depth, b.depth_mode, b.endpoint)


# ------------------------------------------------------------------ bandwidth ceiling


_RATE_NAMES = {"decode_tps": ("decode", "decode_pct"), "e2e_tps": ("end-to-end", "e2e_pct")}


@case_check
def above_bandwidth_ceiling(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    ceiling, setup = case.ceiling, run.setup.ceiling
    if not ceiling or not setup:
        return
    pcts = {"decode_tps": ceiling.decode_pct, "e2e_tps": ceiling.e2e_pct}
    over = [name for name, pct in pcts.items() if (pct or 0) > 100.0]
    if not over:
        return
    rates = ", ".join(f"{_RATE_NAMES[n][0]} {case.median(n):.1f} tok/s = {pcts[n]:.0f}%" for n in over)
    read_gb = ((ceiling.weight_bytes_per_token or 0) + (ceiling.kv_bytes_per_token or 0)) / 1e9
    yield Warning_(
        "above_bandwidth_ceiling",
        ERROR,
        case.label,
        f"Impossible rate: {rates} of the {ceiling.tokens_per_s:.1f} tok/s ceiling "
        f"({setup.bandwidth_gbs:g} GB/s ÷ {read_gb:.2f} GB read per token). One stream "
        "cannot decode faster than memory bandwidth allows, so this number was not measured "
        "as it looks.",
        "The ceiling is a conservative upper bound (peak bandwidth, every weight at its "
        "smallest size), so a rate above it is wrong: look for buffered or cached output "
        "and token counts the server did not generate. Only speculative decoding can "
        "legitimately beat it. If the profile does not fit the server (hardware, tensor "
        "parallelism, a smaller quantization), pass --bandwidth-gbs / "
        "--active-bytes-per-token.",
        metrics=tuple(over),
        details={"ceiling_tps": ceiling.tokens_per_s, **{_RATE_NAMES[n][1]: pcts[n] for n in over}},
        evidence=tuple(Evidence(n, case.median(n), ceiling.tokens_per_s, "tokens/s") for n in over),
    )


@run_check
def ceiling_unknown(run: RunResult) -> Iterable[CheckWarning]:
    ceiling = run.setup.ceiling
    if ceiling and ceiling.missing:
        yield Warning_(
            "ceiling_unknown",
            WARNING,
            None,
            f"No bandwidth ceiling, so impossible rates cannot be caught: {ceiling.missing}.",
            f"Known hardware: {', '.join(profiles.hardware_names())}; known models: "
            f"{', '.join(profiles.model_names())}.",
        )


# ------------------------------------------------------------------ the GPUs (--gpu-metrics)

IDLE_SHARE_NOTE = 0.5  # the idle draw is over half the case's: J/token is mostly idle power


@case_check
def gpu_samples_failed(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    gpu = case.gpu
    if gpu is None or not gpu.failed_samples:
        return
    tried = gpu.samples + gpu.failed_samples
    yield Warning_(
        "gpu_samples_failed",
        WARNING,
        case.label,
        f"{gpu.failed_samples} of {tried} GPU samples failed ({'; '.join(gpu.sample_errors)}); the GPU "
        "figures cover the samples that were taken" + ("" if gpu.energy_j is not None else ", and give no energy"),
        "Check the exporter's health and load (a scrape times out after 5 s); a failed sample is never "
        "counted as zero.",
        evidence=(Evidence("failed_samples", gpu.failed_samples, 0, "samples"),),
    )


@case_check
def gpu_idle_dominates(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    gpu = case.gpu
    if gpu is None or not gpu.power_w or gpu.idle_power_w is None:
        return
    share = gpu.idle_power_w / gpu.power_w
    if share <= IDLE_SHARE_NOTE:
        return
    marginal = gpu.marginal_joules_per_token
    yield Warning_(
        "gpu_idle_dominates",
        INFO,
        case.label,
        f"The GPUs' idle draw ({gpu.idle_power_w:,.0f} W) is {share:.0%} of their draw in this case "
        f"({gpu.power_w:,.0f} W): its J/token is mostly idle power spread over its tokens"
        + (f"; the load added {marginal:.3g} J/token" if marginal is not None else ""),
        "Compare marginal J/token across servers at low load, or load the server more (concurrency, "
        "rate) to see the energy a token costs when the GPU is busy.",
        evidence=(Evidence("idle_share", share, IDLE_SHARE_NOTE, "ratio"),),
    )


# ------------------------------------------------------------------ the client itself


@case_check
def client_overloaded(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    client = case.client or ClientHealth()
    reasons = _overloaded_workers(client) + _late_sends(case, run)
    if reasons:
        yield Warning_(
            "client_overloaded",
            WARNING,
            case.label,
            f"benchy itself fell behind while requests were in flight ({'; '.join(reasons)}): "
            "chunks were timestamped late, so TTFT, inter-token latency and decode rate "
            "include client delay.",
            _overloaded_hint(case),
            metrics=("ttft_s", "decode_tps", "itl_s", "prefill_tps"),
            details=WarningDetails(client=case.client),
        )


def _overloaded_hint(case: CaseResult) -> str:
    """At one request in flight the load is not what overloads benchy: the machine is."""
    elsewhere = "run benchy on an idle machine (not beside the server)"
    if case.kind == "trace":
        return f"Replay the trace slower (--speed below 1), {elsewhere}, or split the load over --workers."
    if case.rate is not None:
        return f"Lower --rate, {elsewhere}, or split the load over several benchy processes (--workers)."
    if (case.concurrency or 1) > 1:
        return f"Lower --concurrency, {elsewhere}, or split the load over several benchy processes (--workers)."
    return (
        "At one request in flight the load is light: the machine benchy runs on is busy. "
        f"{elsewhere[0].upper()}{elsewhere[1:]}, or give it a core of its own."
    )


def _overloaded_workers(client: ClientHealth) -> list[str]:
    """Each worker judged on its own figures (workers.py, cluster.py); one that fell behind is
    named with its node, so the host to relieve is known."""
    per_worker: list[LoopHealth] = list(client.per_worker) or [client]
    found = []
    for entry in per_worker:
        reasons = _overload_reasons(entry)
        if reasons and isinstance(entry, WorkerHealth) and len(per_worker) > 1:
            found.append(f"worker {entry.worker} on {entry.node}: {', '.join(reasons)}")
        else:
            found += reasons
    return found


def _overload_reasons(loop: LoopHealth) -> list[str]:
    reasons = []
    # Results merged from several worker processes may carry no p95: their worst p99 stands in.
    p95 = loop.loop_lag_ms_p95 if loop.loop_lag_ms_p95 is not None else loop.loop_lag_ms_p99
    most = loop.loop_lag_ms_max or 0.0
    if (loop.lag_samples or 0) >= MIN_LAG_SAMPLES and p95 is not None and p95 > LAG_P95_LIMIT_MS:
        reasons.append(f"event-loop lag p95 {p95:.0f} ms > {LAG_P95_LIMIT_MS:.0f} ms, max {most:.0f} ms")
    if (loop.stalled_share or 0) > STALLED_SHARE_LIMIT:
        reasons.append(f"the event loop was stalled {loop.stalled_share:.0%} of the time (stalls up to {most:.0f} ms)")
    if (loop.cpu_share or 0) > CPU_SHARE_LIMIT:
        reasons.append(f"benchy used {loop.cpu_share:.0%} of a CPU core")
    return reasons


def _late_sends(case: CaseResult, run: RunResult) -> list[str]:
    lag = case.send_lag
    capped = run.setup.load is not None and run.setup.load.max_inflight is not None
    if lag and lag.p90 is not None and not capped and lag.p90 > SEND_LAG_P90_LIMIT_S:
        return [
            f"sends fell behind their schedule (median {lag.median * 1000:.0f} ms, "
            f"p90 {lag.p90 * 1000:.0f} ms late), so the offered rate was lower than asked"
        ]
    return []


# ------------------------------------------------------------------ Harmony (gpt-oss)

STOP_HINT = (
    "Stop only at <|return|> and <|call|>, the markers a Harmony turn really ends with (servers "
    "stop there already): drop the others from --stop and from the server's generation config."
)


@case_check
def harmony_output(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """dangerous_stop: requests that a stop string ended before any answer text (report 000: a
    stop list holding <|message|> cut every answer to 0 tokens); special_tokens_stripped: the
    server dropped Harmony's markers, so reasoning and answer cannot be told apart."""
    setup = run.setup
    facts = case.facts()  # finish_reason stop, no content, and not another failure
    if facts.n_stop_cut and (setup.stop or setup.template == "harmony"):
        yield Warning_(
            "dangerous_stop",
            _failure_severity(case),
            case.label,
            f"{facts.n_stop_cut} of {facts.n_measured} requests stopped (finish_reason stop) before any "
            f"answer text: {_stop_cause(setup)}.",
            STOP_HINT,
            metrics=("e2e_tps", "ttfc_s"),
            details=WarningDetails(
                requests=facts.n_stop_cut, stop=list(setup.stop), dangerous_stops=list(setup.dangerous_stops)
            ),
        )
    if facts.n_stripped:  # Anomaly.SPECIAL_TOKENS_STRIPPED
        yield Warning_(
            "special_tokens_stripped",
            WARNING,
            case.label,
            f"{facts.n_stripped} of {facts.n_ok} requests came back as Harmony text "
            "without its special tokens ('analysisWe need…assistantfinal…'): reasoning and "
            "answer cannot be told apart, so all of it counts as content and time to first "
            "content is withheld.",
            "Make the server keep special tokens (benchy sends skip_special_tokens: false; a "
            "proxy or server may drop it), or use --endpoint chat, where the server splits "
            "the channels.",
            withheld=("ttfc_s",),
            details=WarningDetails(requests=facts.n_stripped),
        )


def _stop_cause(setup: Setup) -> str:
    if setup.dangerous_stops:
        first = setup.dangerous_stops[0]
        return f"--stop {first.stop!r} occurs inside every Harmony response ({first.reason})"
    if setup.stop:
        return f"a --stop string ({', '.join(map(repr, setup.stop))}) matched before the answer"
    return (
        "the server's own stop list (generation_config, --override-generation-config) holds a "
        "string that occurs inside a Harmony response"
    )


# Findings of their own modules (checks/latency.py, checks/drift.py), in this place of the order.
for _run_check in latency_checks.RUN_CHECKS:
    run_check(_run_check)
for _case_check in drift_checks.CASE_CHECKS:
    case_check(_case_check)

# The server's /metrics against the client's figures (checks/server.py), in this place of the order.
for _server_check in server_checks.CASE_CHECKS:
    case_check(_server_check)


@case_check
def case_cut_short(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """The run stopped inside this case (results withheld its rates): say so wherever the
    case's figures are read, not only in report.md's banner."""
    why = case.reason("aggregate_tps")
    if why.code != metrics.CUT_SHORT:
        return
    yield Warning_(
        "case_cut_short",
        WARNING,
        case.label,
        f"The run stopped inside this case: {why.message}. Aggregate t/s and req/s are "
        "withheld; the per-request figures are those of the requests that finished, which favour "
        "the ones that finished first.",
        "Run the case to its end for figures of the whole case.",
        metrics=tuple(m.name for m in metrics.TABLE_METRICS),
        withheld=("aggregate_tps", "request_rate"),
        details=WarningDetails(measured=case.n_ok + case.n_failed, planned=case.planned_requests),
    )
