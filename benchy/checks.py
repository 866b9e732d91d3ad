"""Typed warnings about a run, computed from saved results only (so a report can re-derive
nothing: it renders these). Each warning has a stable code, a message and an actionable hint.

Codes (severity): sse_buffering (warning), above_bandwidth_ceiling (error), ceiling_unknown
(warning), prefix_cache_hit (warning), depth_cache_miss (warning), empty_output / zero_tokens
(warning; error when no request of the case succeeded), reasoning_only (warning),
output_length_mismatch (warning), no_usage (warning), request_errors (warning; error when
every request failed), client_overloaded (warning), first_chunk_before_prefill (info), dangerous_stop (warning; error
when no request of the case succeeded), special_tokens_stripped (warning).

`run_checks` also annotates the results it checks: each case gets `ceiling` (its bandwidth
ceiling and the measured rates as % of it) when the setup has one, and metrics a warning
withholds become null with the warning's message as the reason (the figure is kept under
`withheld` for audit, never shown). Requests whose output is empty or zero tokens are
failures: `classify` turns them into errors before any statistic is taken (results.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from benchy import metrics, profiles, server_checks
from benchy.records import RequestRecord

ERROR = "error"  # the number is wrong or missing: a hard failure
WARNING = "warning"  # the number is real but qualified
INFO = "info"  # worth knowing; the numbers are right (never fatal, even under --strict)
SEVERITY_ORDER = (ERROR, WARNING, INFO)

OUTPUT_FAILURES = ("empty_output", "zero_tokens")  # error kinds `classify` gives
BUFFERING_HINT = (
    "The server sends several tokens per event (vLLM buffers Harmony output, for "
    "example). Compare servers by end-to-end throughput, or fix the server's streaming."
)
# TTFT that grows with output length by at least this share of the growth in total time, and
# by this much, is a buffer flushing (real TTFT does not depend on the output length).
TTFT_GROWTH_SHARE = 0.25
TTFT_GROWTH_MIN_S = 0.025
LIVE_STREAM_TOKENS_PER_EVENT = 1.5
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


@dataclass(frozen=True)
class Warning_:
    code: str
    severity: str
    case: str | None
    message: str
    hint: str
    metrics: tuple[str, ...] = ()  # the case's metrics this warning qualifies (the table marks them)
    withheld: tuple[str, ...] = ()  # metrics it makes unavailable (null, this message the reason)
    details: dict = field(default_factory=dict)  # the figures behind the message, machine-readable

    def to_dict(self) -> dict:
        out = asdict(self)
        out["metrics"], out["withheld"] = list(self.metrics), list(self.withheld)
        return out


CaseCheck = Callable[[dict, dict], Iterable[Warning_]]
RunCheck = Callable[[dict], Iterable[Warning_]]
_CASE_CHECKS: list[CaseCheck] = []
_RUN_CHECKS: list[RunCheck] = []


def case_check(fn: CaseCheck) -> CaseCheck:
    _CASE_CHECKS.append(fn)
    return fn


def run_check(fn: RunCheck) -> RunCheck:
    """A check across cases (e.g. how TTFT moves with output length)."""
    _RUN_CHECKS.append(fn)
    return fn


def run_checks(results: dict) -> list[dict]:
    """Every warning, errors first; annotates `results` in place (see the module docstring).
    Run checks go first: what they withhold (a buffer's 'decode rate') is then never compared
    with the ceiling."""
    found: list[Warning_] = [w for run_level in _RUN_CHECKS for w in run_level(results)]
    withhold(results, found)
    annotate_ceilings(results)
    for case in results.get("cases", []):
        for check in _CASE_CHECKS:
            found.extend(check(case, results))
    withhold(results, found)
    found.sort(key=lambda w: SEVERITY_ORDER.index(w.severity))
    return [w.to_dict() for w in found]


def is_clean(warnings: list[dict]) -> bool:
    """No error and no warning (notes of severity info do not make a run unclean)."""
    return all(w["severity"] == INFO for w in warnings)


def withhold(results: dict, warnings: list[Warning_]) -> None:
    """Nulls each withheld metric of the warned case, for the case and its requests; the
    figure moves to `withheld` so that checking the results again finds the same thing."""
    cases = {c["label"]: c for c in results.get("cases", [])}
    for w in warnings:
        case = cases.get(w.case)
        if case is None:
            continue
        for name in w.withheld:
            _withhold_in(case, "summary", name, w.message)
            for req in case["requests"]:
                if req.get("metrics", {}).get(name) is not None:
                    _withhold_in(req, "metrics", name, w.message)


def _withhold_in(entry: dict, key: str, name: str, reason: str) -> None:
    value = entry.get(key, {}).get(name)
    if value is not None:
        entry.setdefault("withheld", {})[name] = value
        entry[key][name] = None
    entry.setdefault("unavailable", {})[name] = reason


def _figure(case: dict, name: str) -> dict | None:
    """A case's summary of `name`, or the one a warning withheld (for checks only)."""
    return case["summary"].get(name) or case.get("withheld", {}).get(name)


def _median(case: dict, name: str) -> float | None:
    summary = case["summary"].get(name)
    return summary["median"] if summary else None


def _measured_ok(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"] and r["status"] == "ok"]


@case_check
def sse_buffering(case: dict, results: dict) -> Iterable[Warning_]:
    reason = case["unavailable"].get("ttft_s", "")
    if "SSE buffering" in reason:
        per_event = _median(case, "tokens_per_event")
        yield Warning_(
            "sse_buffering",
            WARNING,
            case["label"],
            f"{reason}. TTFT, inter-token latency, decode and prefill rates are unavailable; "
            "end-to-end throughput is still valid.",
            BUFFERING_HINT,
            details={"tokens_per_event_median": per_event},
        )


@case_check
def request_errors(case: dict, results: dict) -> Iterable[Warning_]:
    # Empty and zero-token outputs are failures too, but have checks of their own.
    errors = {k: v for k, v in case["errors"].items() if k not in OUTPUT_FAILURES}
    if errors:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items(), key=str))
        total = case["n_ok"] + case["n_failed"]
        yield Warning_(
            "request_errors",
            _failure_severity(case),
            case["label"],
            f"{sum(errors.values())} of {total} requests failed ({kinds}); statistics cover "
            f"only the {case['n_ok']} that succeeded.",
            "See each request's `error` in requests.jsonl; lower the concurrency or raise "
            "--timeout if the server is overloaded.",
            details={"errors": errors},
        )


@case_check
def prefix_cache_hit(case: dict, results: dict) -> Iterable[Warning_]:
    template = (results.get("setup", {}).get("calibration") or {}).get("overhead_tokens", 0) or 0
    # A cached --depth context is meant to hit (depth_cache_miss checks it); only the rest counts.
    hits = [
        r
        for r in _measured_ok(case)
        if (r.get("cached_tokens") or 0) - (r.get("reused_context_tokens") or 0) > max(template, 0) + 0.5
    ]
    if hits:
        most = max(r["cached_tokens"] for r in hits)
        yield Warning_(
            "prefix_cache_hit",
            WARNING,
            case["label"],
            f"{len(hits)} of {len(_measured_ok(case))} requests were partly served from the "
            f"server's prefix cache (up to {most} cached prompt tokens beyond the "
            f"{template:.0f}-token chat template): TTFT, prefill and end-to-end figures are "
            "inflated.",
            "Keep the nonce on (no --no-nonce) so no request shares a prefix with another.",
            metrics=("ttft_s", "prefill_tps", "e2e_tps"),
            details={"requests": len(hits), "cached_tokens_max": most, "template_tokens": template},
        )


def _context_served(cached: int | None, context: int) -> bool:
    """Cache blocks round down (vLLM 16 tokens, TensorRT-LLM up to 64), so allow a little."""
    return cached is not None and cached >= context - max(64, 0.1 * context)


@case_check
def depth_cache_miss(case: dict, results: dict) -> Iterable[Warning_]:
    """--depth-mode cached: the server must report the context it was sent ahead as cached."""
    reusing = [r for r in _measured_ok(case) if r.get("reused_context_tokens")]
    missed = [r for r in reusing if not _context_served(r.get("cached_tokens"), r["reused_context_tokens"])]
    if not missed:
        return
    depth = missed[0]["reused_context_tokens"]
    if all(r.get("cached_tokens") is None for r in missed):
        what = "the server reports no cached_tokens, so benchy cannot verify it; prefill t/s is unavailable"
    else:
        most = max(r.get("cached_tokens") or 0 for r in missed)
        what = (
            f"the server reported at most {most} cached tokens, so it prefilled the context again: "
            "prefill t/s covers depth + pp there, not the pp tokens alone"
        )
    yield Warning_(
        "depth_cache_miss",
        WARNING,
        case["label"],
        f"{len(missed)} of {len(reusing)} requests reused a {depth}-token context sent ahead, but {what}.",
        "Enable the server's prefix cache (vLLM --enable-prefix-caching, llama.cpp cache_prompt) "
        "or a larger cache, or measure with --depth-mode cold.",
    )


# ------------------------------------------------------------------ outputs


def output_failure(rec: RequestRecord) -> tuple[str, str] | None:
    """(error kind, message) when a request that ended normally delivered no output, else None."""
    if not rec.ok:
        return None
    claimed = metrics.completion_tokens(rec)
    if claimed == 0:
        said = "completion_tokens 0" if rec.usage_reported else "no text and no usage"
        return "zero_tokens", f"the server generated nothing ({said}, finish_reason {rec.finish_reason!r})"
    if rec.content_chars == 0 and (rec.reasoning_chars == 0 or rec.content_null_events):
        nulls = f"; {rec.content_null_events} deltas said content: null" if rec.content_null_events else ""
        return "empty_output", f"the server claimed {claimed} completion tokens but sent no content{nulls}"
    return None


def classify(rec: RequestRecord) -> RequestRecord:
    """The record as benchy counts it: an empty or zero-token output is a failed request."""
    failure = output_failure(rec)
    if failure is None:
        return rec
    return dataclasses.replace(rec, status="error", error_kind=failure[0], error=failure[1])


def _failure_severity(case: dict) -> str:
    return ERROR if case["n_ok"] == 0 else WARNING


def _failed_as(case: dict, kind: str) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"] and r.get("error_kind") == kind]


@case_check
def empty_output(case: dict, results: dict) -> Iterable[Warning_]:
    bad = _failed_as(case, "empty_output")
    if bad:
        claimed = int(np.median([r.get("completion_tokens") or 0 for r in bad]))
        nulls = sum(r.get("content_null_events") or 0 for r in bad)
        yield Warning_(
            "empty_output",
            _failure_severity(case),
            case["label"],
            f"{len(bad)} of {_measured(case)} requests returned no content although the server "
            f"claimed {claimed} completion tokens (median; {nulls} `content: null` deltas): "
            f"they count as failed; statistics cover only the {case['n_ok']} that succeeded.",
            "A broken kernel can generate tokens and print nothing (vLLM's CUTLASS FP4 path on "
            "SM121/GB10 returns content: null; VLLM_MXFP4_BACKEND=marlin fixes it). Check one "
            "answer with curl before benchmarking.",
            details={"requests": len(bad), "claimed_tokens_median": claimed, "content_null_events": nulls},
        )


@case_check
def zero_tokens(case: dict, results: dict) -> Iterable[Warning_]:
    bad = _failed_as(case, "zero_tokens")
    if bad:
        reasons = sorted({str(r.get("finish_reason")) for r in bad})
        yield Warning_(
            "zero_tokens",
            _failure_severity(case),
            case["label"],
            f"{len(bad)} of {_measured(case)} requests generated 0 tokens (finish_reason "
            f"{', '.join(reasons)}): they count as failed; statistics cover only the "
            f"{case['n_ok']} that succeeded.",
            "The server stopped at once: a stop string or EOS token that matches immediately "
            "(e.g. <|message|> or <|end|> in a Harmony model's stop list) or a wrong chat "
            "template. Check the stop list and generation_config.",
            details={"requests": len(bad), "finish_reasons": reasons},
        )


@case_check
def reasoning_only(case: dict, results: dict) -> Iterable[Warning_]:
    ok = _measured_ok(case)
    only = [r for r in ok if not r.get("content_chars") and r.get("reasoning_chars")]
    if only:
        yield Warning_(
            "reasoning_only",
            WARNING,
            case["label"],
            f"{len(only)} of {len(ok)} requests spent every output token on reasoning and "
            "gave no final answer: time to first content is unavailable, and the rates "
            "count reasoning tokens.",
            "Raise --tg so the model reaches its answer, or lower its reasoning effort.",
            metrics=("ttfc_s",),
            details={"requests": len(only)},
        )


@case_check
def output_length_mismatch(case: dict, results: dict) -> Iterable[Warning_]:
    # Without usage the token count is a lower bound: it cannot show a short output.
    counted = [r for r in _measured_ok(case) if r.get("usage_reported")]
    short = [r for r in counted if (r.get("completion_tokens") or 0) < r["target_output_tokens"]]
    if not short:
        return
    got = [r["completion_tokens"] for r in counted]
    delivered = int(np.median(got))
    cause, hint = _short_output_cause(short, results.get("setup", {}))
    yield Warning_(
        "output_length_mismatch",
        WARNING,
        case["label"],
        f"{len(short)} of {len(counted)} requests got fewer tokens than the {case['tg']} asked "
        f"(median {delivered}, min {min(got)}): {cause}. "
        f"The row is labelled with the tokens delivered; its rates are real for those, but "
        f"not comparable with tg{case['tg']} elsewhere.",
        hint,
        metrics=("e2e_tps", "decode_tps"),
        details={
            "asked": case["tg"],
            "delivered_median": delivered,
            "delivered_min": min(got),
            "delivered_max": max(got),
            "short_requests": len(short),
            "finish_reasons": sorted({str(r.get("finish_reason")) for r in short}),
        },
    )


def _short_output_cause(short: list[dict], setup: dict) -> tuple[str, str]:
    """Why outputs came back short, by what the server said (finish_reason) and what was sent."""
    reasons = {r.get("finish_reason") for r in short}
    if reasons == {"length"}:
        return (
            "the server ended them at a length limit below the one asked (finish_reason length)",
            "Check the server's own output cap (max_tokens limit, context length minus the prompt).",
        )
    if setup.get("stop") and "stop" in reasons:
        return (
            f"a stop string ({', '.join(map(repr, setup['stop']))}, from --stop) or the end-of-sequence "
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
def no_usage(case: dict, results: dict) -> Iterable[Warning_]:
    ok = _measured_ok(case)
    missing = [r for r in ok if not r.get("usage_reported")]
    if missing:
        yield Warning_(
            "no_usage",
            WARNING,
            case["label"],
            f"{len(missing)} of {len(ok)} requests carried no token usage: benchy counts one "
            "token per text event, a lower bound, so e2e t/s is a floor, and a buffered "
            "stream cannot be told apart request by request.",
            "Ask the server for usage (vLLM: stream_options include_usage is sent; some "
            "proxies drop it) or measure the server directly.",
            metrics=("e2e_tps", "decode_tps"),
            details={"requests": len(missing)},
        )


def _measured(case: dict) -> int:
    return case["n_ok"] + case["n_failed"]


# ------------------------------------------------------------------ stream timing


@case_check
def first_chunk_before_prefill(case: dict, results: dict) -> Iterable[Warning_]:
    pairs = [
        (r["first_chunk_s"], r["metrics"]["ttft_s"])
        for r in _measured_ok(case)
        if r.get("first_chunk_s") is not None and (r.get("metrics") or {}).get("ttft_s") is not None
    ]
    if not pairs:
        return
    lead = float(np.median([ttft - first for first, ttft in pairs]))
    ttft = float(np.median([t for _, t in pairs]))
    if lead >= max(FIRST_CHUNK_LEAD_MIN_S, FIRST_CHUNK_LEAD_SHARE * ttft):
        yield Warning_(
            "first_chunk_before_prefill",
            INFO,
            case["label"],
            f"A role-only or empty first chunk arrived {lead * 1000:.0f} ms (median) before "
            f"the first token: TTFT ({ttft * 1000:.0f} ms) is taken from the first token, "
            "not from that chunk.",
            "Nothing to fix; tools that time the first chunk report a TTFT this much too low.",
            metrics=("ttft_s",),
            details={"lead_s_median": lead, "ttft_s_median": ttft},
        )


@run_check
def ttft_grows_with_output(results: dict) -> Iterable[Warning_]:
    """At a fixed prompt, real TTFT does not depend on the output length; a buffered stream's
    first event waits for a share of the output, so its 'TTFT' grows with it."""
    groups: dict[tuple, list[dict]] = {}
    for case in results.get("cases", []):
        if case["concurrency"] == 1 and _figure(case, "ttft_s") and case["summary"].get("e2e_s"):
            key = (case["pp"], case["depth"], case.get("depth_mode"), case["endpoint"])
            groups.setdefault(key, []).append(case)
    for group in groups.values():
        yield from _ttft_growth(sorted(group, key=lambda c: c["tg"]))


def _streams_token_by_token(case: dict) -> bool:
    """The server's own usage shows about one token per event: direct evidence of a live
    stream, which outweighs a TTFT trend (on a fast small model, load noise in TTFT can
    rival the whole decode time)."""
    requests = _measured_ok(case)
    tpe = _figure(case, "tokens_per_event")
    return (
        bool(requests)
        and all(r.get("usage_reported") for r in requests)
        and tpe is not None
        and tpe["median"] <= LIVE_STREAM_TOKENS_PER_EVENT
    )


def _ttft_median(case: dict) -> float:
    """The TTFT median of a case ttft_grows_with_output kept (it has one, perhaps withheld)."""
    figure = _figure(case, "ttft_s")
    assert figure is not None
    return figure["median"]


def _ttft_growth(group: list[dict]) -> Iterable[Warning_]:
    if len(group) < 2 or group[0]["tg"] == group[-1]["tg"]:
        return
    short, long = group[0], group[-1]
    if _streams_token_by_token(short) and _streams_token_by_token(long):
        return
    t_short, t_long = _ttft_median(short), _ttft_median(long)
    grew = t_long - t_short
    total_grew = long["summary"]["e2e_s"]["median"] - short["summary"]["e2e_s"]["median"]
    if grew < TTFT_GROWTH_MIN_S or total_grew <= 0 or grew < TTFT_GROWTH_SHARE * total_grew:
        return
    message = (
        f"'TTFT' grows with output length at a fixed prompt ({t_short * 1000:,.0f} ms at "
        f"tg{short['tg']}, {t_long * 1000:,.0f} ms at tg{long['tg']}): the first event waits for "
        "a buffer to flush, so TTFT, inter-token latency, decode and prefill rates are "
        "withheld; end-to-end throughput is still valid"
    )
    for case in group:
        yield Warning_(
            "sse_buffering",
            WARNING,
            case["label"],
            message,
            BUFFERING_HINT,
            withheld=metrics.STREAM_TIMING_METRICS,
            details={"ttft_s_by_tg": {f"tg{c['tg']}": _ttft_median(c) for c in group}},
        )


# ------------------------------------------------------------------ bandwidth ceiling


@dataclass(frozen=True)
class CeilingInputs:
    """What the user gave for the decode ceiling (--hardware, --model-profile, --bandwidth-gbs,
    --active-bytes-per-token); explicit figures override the profiles' ones."""

    hardware: str | None = None
    model_profile: str | None = None
    bandwidth_gbs: float | None = None
    active_bytes_per_token: float | None = None

    @property
    def asked(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))

    def validate(self) -> None:
        """Raises profiles.ProfileError (one line) for an unknown name or a figure ≤ 0."""
        if self.hardware is not None:
            profiles.hardware(self.hardware)
        if self.model_profile is not None:
            profiles.model_profile(self.model_profile)
        for flag, value in (
            ("--bandwidth-gbs", self.bandwidth_gbs),
            ("--active-bytes-per-token", self.active_bytes_per_token),
        ):
            if value is not None and not value > 0:
                raise profiles.ProfileError(f"{flag} must be > 0, got {value:g}")

    def resolve(self, served_model: str) -> dict | None:
        """setup["ceiling"]: every figure the ceiling is computed from, so results alone
        re-derive it; `missing` says why there is none. None when nothing was asked."""
        if not self.asked:
            return None
        hw = profiles.hardware(self.hardware) if self.hardware else None
        bandwidth = self.bandwidth_gbs or (hw.bandwidth_gbs if hw else None)
        model, source = None, None
        if self.model_profile:
            model, source = profiles.model_profile(self.model_profile), "--model-profile"
        elif bandwidth:
            model = profiles.guess_model_profile(served_model)
            source = f"guessed from the served model id {served_model!r}" if model else None
        weights = self.active_bytes_per_token or (model.active_bytes_per_token if model else None)
        return {
            "hardware": hw.name if hw else None,
            "bandwidth_gbs": bandwidth,
            "bandwidth_source": "--bandwidth-gbs" if self.bandwidth_gbs else (hw.note if hw else None),
            "model_profile": model.name if model else None,
            "model_profile_source": source,
            "active_bytes_per_token": weights,
            "weights_source": "--active-bytes-per-token"
            if self.active_bytes_per_token
            else (model.weights if model else None),
            "kv_shape": _kv_shape(model) if model else None,
            "missing": _missing(bandwidth, weights, served_model),
        }


def _kv_shape(model: profiles.ModelProfile) -> dict:
    return {
        "layers": model.layers,
        "kv_heads": model.kv_heads,
        "head_dim": model.head_dim,
        "kv_bytes_per_element": model.kv_bytes_per_element,
        "sliding_window": model.sliding_window,
        "sliding_window_layer_fraction": model.sliding_window_layer_fraction,
    }


def _missing(bandwidth: float | None, weights: float | None, served_model: str) -> str | None:
    if not bandwidth:
        return "no memory bandwidth: pass --hardware or --bandwidth-gbs"
    if not weights:
        return (
            f"no model profile matches the served model {served_model!r} (quantized builds are "
            "never guessed): pass --model-profile or --active-bytes-per-token"
        )
    return None


def case_ceiling(case: dict, ceiling: dict | None) -> profiles.Ceiling | None:
    """The case's decode ceiling from setup["ceiling"] (weights + KV read at mid-decode)."""
    if not ceiling or ceiling.get("missing"):
        return None
    bandwidth, weights = ceiling["bandwidth_gbs"], ceiling["active_bytes_per_token"]
    pp, tg, depth = case["pp"], max(1, case["tg"]), case.get("depth") or 0
    if not ceiling.get("kv_shape"):
        return profiles.custom_ceiling(bandwidth, weights, pp, tg, depth)
    model = profiles.ModelProfile(
        name=ceiling.get("model_profile") or "custom", active_bytes_per_token=weights, **ceiling["kv_shape"]
    )
    return profiles.case_ceiling(bandwidth, model, pp, tg, depth)


def annotate_ceilings(results: dict) -> None:
    """case["ceiling"]: {tokens_per_s, context_tokens, weight/kv bytes per token, decode_pct,
    e2e_pct}: each case's ceiling and its measured medians as a % of it."""
    ceiling = results.get("setup", {}).get("ceiling")
    for case in results.get("cases", []):
        found = case_ceiling(case, ceiling)
        if found is None:
            continue
        decode, e2e = _median(case, "decode_tps"), _median(case, "e2e_tps")
        case["ceiling"] = {
            "tokens_per_s": found.tokens_per_s,
            "context_tokens": found.context_tokens,
            "weight_bytes_per_token": found.weight_bytes_per_token,
            "kv_bytes_per_token": found.kv_bytes_per_token,
            "decode_pct": None if decode is None else found.percent_of(decode),
            "e2e_pct": None if e2e is None else found.percent_of(e2e),
        }


_RATE_NAMES = {"decode_tps": ("decode", "decode_pct"), "e2e_tps": ("end-to-end", "e2e_pct")}


@case_check
def above_bandwidth_ceiling(case: dict, results: dict) -> Iterable[Warning_]:
    ceiling = case.get("ceiling")
    if not ceiling:
        return
    over = [name for name, (_, pct) in _RATE_NAMES.items() if (ceiling.get(pct) or 0) > 100.0]
    if not over:
        return
    setup = results["setup"]["ceiling"]
    rates = ", ".join(
        f"{_RATE_NAMES[n][0]} {_median(case, n):.1f} tok/s = {ceiling[_RATE_NAMES[n][1]]:.0f}%" for n in over
    )
    read_gb = (ceiling["weight_bytes_per_token"] + ceiling["kv_bytes_per_token"]) / 1e9
    yield Warning_(
        "above_bandwidth_ceiling",
        ERROR,
        case["label"],
        f"Impossible rate: {rates} of the {ceiling['tokens_per_s']:.1f} tok/s ceiling "
        f"({setup['bandwidth_gbs']:g} GB/s ÷ {read_gb:.2f} GB read per token). One stream "
        "cannot decode faster than memory bandwidth allows, so this number was not measured "
        "as it looks.",
        "The ceiling is a conservative upper bound (peak bandwidth, every weight at its "
        "smallest size), so a rate above it is wrong: look for buffered or cached output "
        "and token counts the server did not generate. Only speculative decoding can "
        "legitimately beat it. If the profile does not fit the server (hardware, tensor "
        "parallelism, a smaller quantization), pass --bandwidth-gbs / "
        "--active-bytes-per-token.",
        metrics=tuple(over),
        details={
            "ceiling_tps": ceiling["tokens_per_s"],
            **{_RATE_NAMES[n][1]: ceiling[_RATE_NAMES[n][1]] for n in over},
        },
    )


@run_check
def ceiling_unknown(results: dict) -> Iterable[Warning_]:
    ceiling = results.get("setup", {}).get("ceiling")
    if ceiling and ceiling.get("missing"):
        yield Warning_(
            "ceiling_unknown",
            WARNING,
            None,
            f"No bandwidth ceiling, so impossible rates cannot be caught: {ceiling['missing']}.",
            f"Known hardware: {', '.join(profiles.hardware_names())}; known models: "
            f"{', '.join(profiles.model_names())}.",
        )


# ------------------------------------------------------------------ the client itself


@case_check
def client_overloaded(case: dict, results: dict) -> Iterable[Warning_]:
    client = case.get("client") or {}
    reasons = _overload_reasons(case, client) + _late_sends(case, results)
    if reasons:
        yield Warning_(
            "client_overloaded",
            WARNING,
            case["label"],
            f"benchy itself fell behind while requests were in flight ({'; '.join(reasons)}): "
            "chunks were timestamped late, so TTFT, inter-token latency and decode rate "
            "include client delay.",
            "Lower --concurrency, run benchy on an idle machine (not beside the server), or "
            "split the load over several benchy processes.",
            metrics=("ttft_s", "decode_tps", "itl_s", "prefill_tps"),
            details=dict(client),
        )


def _overload_reasons(case: dict, client: dict) -> list[str]:
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


def _late_sends(case: dict, results: dict) -> list[str]:
    lag = case.get("send_lag")
    capped = (results.get("setup", {}).get("load") or {}).get("max_inflight") is not None
    if lag and not capped and lag["p90"] > SEND_LAG_P90_LIMIT_S:
        return [
            f"sends fell behind their schedule (median {lag['median'] * 1000:.0f} ms, "
            f"p90 {lag['p90'] * 1000:.0f} ms late), so the offered rate was lower than asked"
        ]
    return []


# ------------------------------------------------------------------ Harmony (gpt-oss)

STOP_HINT = (
    "Stop only at <|return|> and <|call|>, the markers a Harmony turn really ends with (servers "
    "stop there already): drop the others from --stop and from the server's generation config."
)


@case_check
def harmony_output(case: dict, results: dict) -> Iterable[Warning_]:
    """dangerous_stop: requests that a stop string ended before any answer text (report 000: a
    stop list holding <|message|> cut every answer to 0 tokens); special_tokens_stripped: the
    server dropped Harmony's markers, so reasoning and answer cannot be told apart."""
    setup = results.get("setup", {})
    measured = [r for r in case["requests"] if not r["warmup"]]
    cut = [
        r
        for r in measured
        if r.get("finish_reason") == "stop"
        and not r.get("content_chars")
        and r.get("error_kind") in (None,) + OUTPUT_FAILURES
    ]
    if cut and (setup.get("stop") or setup.get("template") == "harmony"):
        yield Warning_(
            "dangerous_stop",
            _failure_severity(case),
            case["label"],
            f"{len(cut)} of {len(measured)} requests stopped (finish_reason stop) before any "
            f"answer text: {_stop_cause(setup)}.",
            STOP_HINT,
            metrics=("e2e_tps", "ttfc_s"),
            details={
                "requests": len(cut),
                "stop": setup.get("stop") or [],
                "dangerous_stops": setup.get("dangerous_stops") or [],
            },
        )
    stripped = [r for r in _measured_ok(case) if "special_tokens_stripped" in (r.get("anomalies") or [])]
    if stripped:
        yield Warning_(
            "special_tokens_stripped",
            WARNING,
            case["label"],
            f"{len(stripped)} of {len(_measured_ok(case))} requests came back as Harmony text "
            "without its special tokens ('analysisWe need…assistantfinal…'): reasoning and "
            "answer cannot be told apart, so all of it counts as content and time to first "
            "content is withheld.",
            "Make the server keep special tokens (benchy sends skip_special_tokens: false; a "
            "proxy or server may drop it), or use --endpoint chat, where the server splits "
            "the channels.",
            withheld=("ttfc_s",),
            details={"requests": len(stripped)},
        )


def _stop_cause(setup: dict) -> str:
    dangerous = setup.get("dangerous_stops") or []
    if dangerous:
        first = dangerous[0]
        return f"--stop {first['stop']!r} occurs inside every Harmony response ({first['reason']})"
    if setup.get("stop"):
        return f"a --stop string ({', '.join(map(repr, setup['stop']))}) matched before the answer"
    return (
        "the server's own stop list (generation_config, --override-generation-config) holds a "
        "string that occurs inside a Harmony response"
    )


@case_check
def server_disagreement(case: dict, results: dict) -> Iterable[Warning_]:
    """The server's /metrics against the client's figures (server_checks.py)."""
    for code, message, hint, affected, details in server_checks.messages(case, results.get("setup", {})):
        yield Warning_(code, WARNING, case["label"], message, hint, metrics=affected, details=details)
