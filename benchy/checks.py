"""Typed warnings about a run: a pure function of its results (`check(run)`), run after every
metric and never writing into them. Each warning has a stable code, a message, an actionable
hint, the metrics it qualifies and, where a figure decided it, typed evidence (observed,
threshold, unit).

Codes (severity): sse_buffering (warning), above_bandwidth_ceiling (error), ceiling_unknown
(warning), prefix_cache_hit (warning), depth_cache_miss (warning), empty_output / zero_tokens
(warning; error when no request of the case succeeded), reasoning_only (warning),
output_length_mismatch (warning), no_usage (warning), request_errors (warning; error when
every request failed), client_overloaded (warning), first_chunk_before_prefill (info),
dangerous_stop (warning; error when no request of the case succeeded), special_tokens_stripped
(warning).

What is withheld is decided where the results are built (results.py: a buffered stream, a
TTFT trend, stripped Harmony markers), with a reason code; a check reports it by that code and
lists the metrics in `withheld`. Requests whose output is empty or zero tokens are failures
(metrics.classify, before any statistic is taken).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from benchy import metrics, profiles, server_checks
from benchy.metrics import OUTPUT_FAILURES
from benchy.results import CaseResult, CheckWarning, Evidence, RequestResult, RunResult, Setup

ERROR = "error"  # the number is wrong or missing: a hard failure
WARNING = "warning"  # the number is real but qualified
INFO = "info"  # worth knowing; the numbers are right (never fatal, even under --strict)
SEVERITY_ORDER = (ERROR, WARNING, INFO)

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


def Warning_(  # noqa: N802  (the name checks have always used)
    code: str,
    severity: str,
    case: str | None,
    message: str,
    hint: str,
    metrics: tuple[str, ...] = (),
    withheld: tuple[str, ...] = (),
    details: dict | None = None,
    evidence: tuple[Evidence, ...] = (),
) -> CheckWarning:
    """A CheckWarning; `metrics` it qualifies (the table marks them), `withheld` the metrics
    results.py made unavailable for the reason it reports, `details` the figures behind the
    message, `evidence` the observed figure against its threshold."""
    return CheckWarning(
        code, severity, case, message, hint, list(metrics), list(withheld), dict(details or {}), list(evidence)
    )


CaseCheck = Callable[[CaseResult, RunResult], Iterable[CheckWarning]]
RunCheck = Callable[[RunResult], Iterable[CheckWarning]]
_CASE_CHECKS: list[CaseCheck] = []
_RUN_CHECKS: list[RunCheck] = []


def case_check(fn: CaseCheck) -> CaseCheck:
    _CASE_CHECKS.append(fn)
    return fn


def run_check(fn: RunCheck) -> RunCheck:
    """A check across cases (e.g. a TTFT trend across output lengths)."""
    _RUN_CHECKS.append(fn)
    return fn


def check(run: RunResult) -> list[CheckWarning]:
    """Every warning about `run`, errors first. Reads `run`, never writes into it."""
    found = [w for run_level in _RUN_CHECKS for w in run_level(run)]
    found += [w for case in run.cases for case_level in _CASE_CHECKS for w in case_level(case, run)]
    return sorted(found, key=lambda w: SEVERITY_ORDER.index(w.severity))


def run_checks(results: dict) -> list[dict]:
    """The warnings of saved results (a results.json dict), as dicts."""
    return [w.to_dict() for w in check(RunResult.from_dict(results))]


def is_clean(warnings: list[dict]) -> bool:
    """No error and no warning (notes of severity info do not make a run unclean)."""
    return all(w["severity"] == INFO for w in warnings)


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
            details={"tokens_per_event_median": per_event},
            evidence=(
                Evidence("tokens_per_event_median", per_event, metrics.BUFFERED_TOKENS_PER_EVENT, "tokens/event"),
            ),
        )


@case_check
def request_errors(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    # Empty and zero-token outputs are failures too, but have checks of their own.
    errors = {k: v for k, v in case.errors.items() if k not in OUTPUT_FAILURES}
    if errors:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items(), key=str))
        total = case.n_ok + case.n_failed
        yield Warning_(
            "request_errors",
            _failure_severity(case),
            case.label,
            f"{sum(errors.values())} of {total} requests failed ({kinds}); statistics cover "
            f"only the {case.n_ok} that succeeded.",
            "See each request's `error` in requests.jsonl; lower the concurrency or raise "
            "--timeout if the server is overloaded.",
            details={"errors": errors},
        )


@case_check
def prefix_cache_hit(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    template = (run.setup.calibration or {}).get("overhead_tokens", 0) or 0
    # A cached --depth context is meant to hit (depth_cache_miss checks it); only the rest counts.
    hits = [
        r
        for r in case.measured_ok()
        if (r.cached_tokens or 0) - (r.reused_context_tokens or 0) > max(template, 0) + 0.5
    ]
    if hits:
        most = max(r.cached_tokens or 0 for r in hits)
        yield Warning_(
            "prefix_cache_hit",
            WARNING,
            case.label,
            f"{len(hits)} of {len(case.measured_ok())} requests were partly served from the "
            f"server's prefix cache (up to {most} cached prompt tokens beyond the "
            f"{template:.0f}-token chat template): TTFT, prefill and end-to-end figures are "
            "inflated.",
            "Keep the nonce on (no --no-nonce) so no request shares a prefix with another.",
            metrics=("ttft_s", "prefill_tps", "e2e_tps"),
            details={"requests": len(hits), "cached_tokens_max": most, "template_tokens": template},
            evidence=(Evidence("cached_tokens_max", most, template, "tokens"),),
        )


def _context_served(cached: int | None, context: int) -> bool:
    """Cache blocks round down (vLLM 16 tokens, TensorRT-LLM up to 64), so allow a little."""
    return cached is not None and cached >= context - max(64, 0.1 * context)


@case_check
def depth_cache_miss(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """--depth-mode cached: the server must report the context it was sent ahead as cached."""
    reusing = [r for r in case.measured_ok() if r.reused_context_tokens]
    missed = [r for r in reusing if not _context_served(r.cached_tokens, r.reused_context_tokens)]
    if not missed:
        return
    depth = missed[0].reused_context_tokens
    if all(r.cached_tokens is None for r in missed):
        what = "the server reports no cached_tokens, so benchy cannot verify it; prefill t/s is unavailable"
    else:
        most = max(r.cached_tokens or 0 for r in missed)
        what = (
            f"the server reported at most {most} cached tokens, so it prefilled the context again: "
            "prefill t/s covers depth + pp there, not the pp tokens alone"
        )
    yield Warning_(
        "depth_cache_miss",
        WARNING,
        case.label,
        f"{len(missed)} of {len(reusing)} requests reused a {depth}-token context sent ahead, but {what}.",
        "Enable the server's prefix cache (vLLM --enable-prefix-caching, llama.cpp cache_prompt) "
        "or a larger cache, or measure with --depth-mode cold.",
    )


# ------------------------------------------------------------------ outputs


def _failure_severity(case: CaseResult) -> str:
    return ERROR if case.n_ok == 0 else WARNING


def _failed_as(case: CaseResult, kind: str) -> list[RequestResult]:
    return [r for r in case.requests if not r.warmup and r.error_kind == kind]


@case_check
def empty_output(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    bad = _failed_as(case, "empty_output")
    if bad:
        claimed = int(np.median([r.completion_tokens or 0 for r in bad]))
        nulls = sum(r.content_null_events or 0 for r in bad)
        yield Warning_(
            "empty_output",
            _failure_severity(case),
            case.label,
            f"{len(bad)} of {_measured(case)} requests returned no content although the server "
            f"claimed {claimed} completion tokens (median; {nulls} `content: null` deltas): "
            f"they count as failed; statistics cover only the {case.n_ok} that succeeded.",
            "A broken kernel can generate tokens and print nothing (vLLM's CUTLASS FP4 path on "
            "SM121/GB10 returns content: null; VLLM_MXFP4_BACKEND=marlin fixes it). Check one "
            "answer with curl before benchmarking.",
            details={"requests": len(bad), "claimed_tokens_median": claimed, "content_null_events": nulls},
        )


@case_check
def zero_tokens(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    bad = _failed_as(case, "zero_tokens")
    if bad:
        reasons = sorted({str(r.finish_reason) for r in bad})
        yield Warning_(
            "zero_tokens",
            _failure_severity(case),
            case.label,
            f"{len(bad)} of {_measured(case)} requests generated 0 tokens (finish_reason "
            f"{', '.join(reasons)}): they count as failed; statistics cover only the "
            f"{case.n_ok} that succeeded.",
            "The server stopped at once: a stop string or EOS token that matches immediately "
            "(e.g. <|message|> or <|end|> in a Harmony model's stop list) or a wrong chat "
            "template. Check the stop list and generation_config.",
            details={"requests": len(bad), "finish_reasons": reasons},
        )


@case_check
def reasoning_only(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    ok = case.measured_ok()
    only = [r for r in ok if not r.content_chars and r.reasoning_chars]
    if only:
        yield Warning_(
            "reasoning_only",
            WARNING,
            case.label,
            f"{len(only)} of {len(ok)} requests spent every output token on reasoning and "
            "gave no final answer: time to first content is unavailable, and the rates "
            "count reasoning tokens.",
            "Raise --tg so the model reaches its answer, or lower its reasoning effort.",
            metrics=("ttfc_s",),
            details={"requests": len(only)},
        )


@case_check
def output_length_mismatch(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    # Without usage the token count is a lower bound: it cannot show a short output.
    counted = [r for r in case.measured_ok() if r.usage_reported]
    short = [r for r in counted if (r.completion_tokens or 0) < r.target_output_tokens]
    if not short:
        return
    got = [r.completion_tokens or 0 for r in counted]
    delivered = int(np.median(got))
    cause, hint = _short_output_cause(short, run.setup.stop)
    yield Warning_(
        "output_length_mismatch",
        WARNING,
        case.label,
        f"{len(short)} of {len(counted)} requests got fewer tokens than the {case.tg} asked "
        f"(median {delivered}, min {min(got)}): {cause}. "
        f"The row is labelled with the tokens delivered; its rates are real for those, but "
        f"not comparable with tg{case.tg} elsewhere.",
        hint,
        metrics=("e2e_tps", "decode_tps"),
        details={
            "asked": case.tg,
            "delivered_median": delivered,
            "delivered_min": min(got),
            "delivered_max": max(got),
            "short_requests": len(short),
            "finish_reasons": sorted({str(r.finish_reason) for r in short}),
        },
        evidence=(Evidence("delivered_median", delivered, case.tg, "tokens"),),
    )


def _short_output_cause(short: list[RequestResult], stop: list[str]) -> tuple[str, str]:
    """Why outputs came back short, by what the server said (finish_reason) and what was sent."""
    reasons = {r.finish_reason for r in short}
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


@case_check
def no_usage(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    ok = case.measured_ok()
    missing = [r for r in ok if not r.usage_reported]
    if missing:
        yield Warning_(
            "no_usage",
            WARNING,
            case.label,
            f"{len(missing)} of {len(ok)} requests carried no token usage: benchy counts one "
            "token per text event, a lower bound, so e2e t/s is a floor, and a buffered "
            "stream cannot be told apart request by request.",
            "Ask the server for usage (vLLM: stream_options include_usage is sent; some "
            "proxies drop it) or measure the server directly.",
            metrics=("e2e_tps", "decode_tps"),
            details={"requests": len(missing)},
        )


def _measured(case: CaseResult) -> int:
    return case.n_ok + case.n_failed


# ------------------------------------------------------------------ stream timing


@case_check
def first_chunk_before_prefill(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    pairs = [
        (first, ttft)
        for r in case.measured_ok()
        if (first := r.first_chunk_s) is not None and (ttft := r.metrics.get("ttft_s")) is not None
    ]
    if not pairs:
        return
    lead = float(np.median([ttft - first for first, ttft in pairs]))
    ttft = float(np.median([t for _, t in pairs]))
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
            details={"lead_s_median": lead, "ttft_s_median": ttft},
            evidence=(
                Evidence(
                    "first_chunk_lead_s_median", lead, max(FIRST_CHUNK_LEAD_MIN_S, FIRST_CHUNK_LEAD_SHARE * ttft), "s"
                ),
            ),
        )


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
            details={"ttft_s_by_tg": {f"tg{c.tg}": c.withheld["ttft_s"].median for c in group}},
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


# ------------------------------------------------------------------ the client itself


@case_check
def client_overloaded(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    client = case.client or {}
    reasons = _overload_reasons(client) + _late_sends(case, run)
    if reasons:
        yield Warning_(
            "client_overloaded",
            WARNING,
            case.label,
            f"benchy itself fell behind while requests were in flight ({'; '.join(reasons)}): "
            "chunks were timestamped late, so TTFT, inter-token latency and decode rate "
            "include client delay.",
            "Lower --concurrency, run benchy on an idle machine (not beside the server), or "
            "split the load over several benchy processes.",
            metrics=("ttft_s", "decode_tps", "itl_s", "prefill_tps"),
            details=dict(client),
        )


def _overload_reasons(client: dict) -> list[str]:
    reasons = []
    # Results merged from several worker processes may carry no p95: their worst p99 stands in.
    p95 = client.get("loop_lag_ms_p95", client.get("loop_lag_ms_p99"))
    if (client.get("lag_samples") or 0) >= MIN_LAG_SAMPLES and p95 is not None and p95 > LAG_P95_LIMIT_MS:
        reasons.append(
            f"event-loop lag p95 {p95:.0f} ms > {LAG_P95_LIMIT_MS:.0f} ms, max {client['loop_lag_ms_max']:.0f} ms"
        )
    if (client.get("stalled_share") or 0) > STALLED_SHARE_LIMIT:
        reasons.append(
            f"the event loop was stalled {client['stalled_share']:.0%} of the time "
            f"(stalls up to {client['loop_lag_ms_max']:.0f} ms)"
        )
    if (client.get("cpu_share") or 0) > CPU_SHARE_LIMIT:
        reasons.append(f"benchy used {client['cpu_share']:.0%} of a CPU core")
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
    measured = [r for r in case.requests if not r.warmup]
    cut = [
        r
        for r in measured
        if r.finish_reason == "stop" and not r.content_chars and r.error_kind in (None,) + OUTPUT_FAILURES
    ]
    if cut and (setup.stop or setup.template == "harmony"):
        yield Warning_(
            "dangerous_stop",
            _failure_severity(case),
            case.label,
            f"{len(cut)} of {len(measured)} requests stopped (finish_reason stop) before any "
            f"answer text: {_stop_cause(setup)}.",
            STOP_HINT,
            metrics=("e2e_tps", "ttfc_s"),
            details={
                "requests": len(cut),
                "stop": list(setup.stop),
                "dangerous_stops": list(setup.dangerous_stops),
            },
        )
    stripped = [r for r in case.measured_ok() if metrics.SPECIAL_TOKENS_STRIPPED in r.anomalies]
    if stripped:
        yield Warning_(
            "special_tokens_stripped",
            WARNING,
            case.label,
            f"{len(stripped)} of {len(case.measured_ok())} requests came back as Harmony text "
            "without its special tokens ('analysisWe need…assistantfinal…'): reasoning and "
            "answer cannot be told apart, so all of it counts as content and time to first "
            "content is withheld.",
            "Make the server keep special tokens (benchy sends skip_special_tokens: false; a "
            "proxy or server may drop it), or use --endpoint chat, where the server splits "
            "the channels.",
            withheld=("ttfc_s",),
            details={"requests": len(stripped)},
        )


def _stop_cause(setup: Setup) -> str:
    if setup.dangerous_stops:
        first = setup.dangerous_stops[0]
        return f"--stop {first['stop']!r} occurs inside every Harmony response ({first['reason']})"
    if setup.stop:
        return f"a --stop string ({', '.join(map(repr, setup.stop))}) matched before the answer"
    return (
        "the server's own stop list (generation_config, --override-generation-config) holds a "
        "string that occurs inside a Harmony response"
    )


@case_check
def server_disagreement(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    """The server's /metrics against the client's figures (server_checks.py reads saved dicts)."""
    if not case.server:
        return
    for code, message, hint, affected, details in server_checks.messages(case.to_dict(), run.setup.to_dict()):
        yield Warning_(code, WARNING, case.label, message, hint, metrics=affected, details=details)
