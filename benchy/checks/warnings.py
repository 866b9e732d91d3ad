"""Typed warnings about a run: a pure function of its results (`check(run)`), run after every
metric and never writing into them. Each warning has a stable code (the closed set of
results/verdicts/codes.py, with its severity rule and its class of figures), a message, an
actionable hint, the metrics it qualifies and, where a figure decided it, typed evidence
(observed, threshold, unit).

The checks live in topic modules: outputs.py (errors, failed and short outputs, Harmony, a case
cut short), tokens.py (token counts and usage), prompts.py (prompt lengths), cache.py (the
prefix cache and cache-aware workloads), timing.py (buffering, first chunk, TTFT against the
server's prompt time), hardware.py (bandwidth ceiling, GPUs), client.py and client_bound.py
(benchy itself), steady.py, latency.py, drift.py, server.py (the server's /metrics), and
queueing.py. The traps the analysis decides (results/findings.py) word their own warnings: their
checks ask the finding for it. This module registers them all, in the order
`check(run)` runs them (run-level checks first, then each case's; errors sort first).

What is withheld is decided where the results are built (results/build.py: a buffered stream,
a TTFT trend, stripped Harmony markers, queueing), with a reason code; a check reports it by
that code and lists the metrics in `withheld`. Requests whose output is empty or zero tokens
are failures (classify.classify, before any statistic is taken).
"""

from __future__ import annotations

from typing import Any

from benchy.checks import (
    cache,
    client,
    client_bound,
    drift,
    drift_across,
    hardware,
    latency,
    outputs,
    prompts,
    queueing,
    sanity,
    saturation,
    server,
    steady,
    timing,
    tokens,
)
from benchy.checks.registry import INFO, CaseCheck, RunCheck, case_check, run_check
from benchy.checks.registry import check as check  # the checks' one entry: re-exported
from benchy.results.types import CheckWarning, RunResult

RUN_CHECKS: tuple[RunCheck, ...] = (
    prompts.prompt_length_at_calibration,
    cache.cache_reset_unavailable,
    queueing.prefill_holds_queueing,
    timing.ttft_grows_with_output,
    hardware.ceiling_unknown,
    hardware.hardware_contradicted,
    drift_across.rate_drift_across_cases,
    *latency.RUN_CHECKS,
    saturation.rate_knee,
    sanity.canary_failed,
)
CASE_CHECKS: tuple[CaseCheck, ...] = (
    client_bound.client_bound,
    steady.steady_state_differs,
    timing.sse_buffering,
    outputs.request_errors,
    cache.prefix_cache_hit,
    cache.depth_cache_miss,
    cache.cache_eviction,
    cache.cache_not_reused,
    cache.cache_partial_reuse,
    cache.cache_not_reported,
    cache.cache_leakage,
    outputs.empty_output,
    outputs.zero_tokens,
    outputs.reasoning_only,
    outputs.tool_choice_ignored,
    outputs.output_length_mismatch,
    tokens.no_usage,
    tokens.usage_mismatch,
    tokens.local_tokenizer_mismatch,
    tokens.usage_unconfirmed,
    prompts.prompt_length_mismatch,
    timing.first_chunk_before_prefill,
    timing.ttft_not_prefill,
    hardware.above_bandwidth_ceiling,
    hardware.gpu_samples_failed,
    hardware.gpu_idle_dominates,
    client.client_overloaded,
    outputs.dangerous_stop,
    outputs.special_tokens_stripped,
    sanity.output_garbage,
    *drift.CASE_CHECKS,
    *server.CASE_CHECKS,
    outputs.case_cut_short,
    saturation.saturated,
)
for _run_check in RUN_CHECKS:
    run_check(_run_check)
for _case_check in CASE_CHECKS:
    case_check(_case_check)


def run_checks(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The warnings of saved results (a results.json dict), as dicts."""
    return [w.to_dict() for w in check(RunResult.from_dict(results))]


def is_clean(warnings: list[CheckWarning]) -> bool:
    """No error and no warning (notes of severity info do not make a run unclean)."""
    return all(w.severity == INFO for w in warnings)
