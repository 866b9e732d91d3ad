"""Typed warnings about a run, computed from saved results only (so a report can re-derive
nothing: it renders these). Each warning has a stable code, a message and an actionable hint.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Iterable

ERROR = "error"  # the number is wrong or missing: a hard failure
WARNING = "warning"  # the number is real but qualified


@dataclass(frozen=True)
class Warning_:
    code: str
    severity: str
    case: str | None
    message: str
    hint: str

    def to_dict(self) -> dict:
        return asdict(self)


CaseCheck = Callable[[dict, dict], Iterable[Warning_]]
_CASE_CHECKS: list[CaseCheck] = []


def case_check(fn: CaseCheck) -> CaseCheck:
    _CASE_CHECKS.append(fn)
    return fn


def run_checks(results: dict) -> list[dict]:
    found: list[Warning_] = []
    for case in results.get("cases", []):
        for check in _CASE_CHECKS:
            found.extend(check(case, results))
    return [w.to_dict() for w in found]


def _measured_ok(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"] and r["status"] == "ok"]


@case_check
def sse_buffering(case: dict, results: dict) -> Iterable[Warning_]:
    reason = case["unavailable"].get("ttft_s", "")
    if "SSE buffering" in reason:
        yield Warning_("sse_buffering", WARNING, case["label"],
                       f"{reason}. TTFT, inter-token latency, decode and prefill rates are unavailable; "
                       "end-to-end throughput is still valid.",
                       "The server sends several tokens per event (vLLM buffers Harmony output, for "
                       "example). Compare servers by end-to-end throughput, or fix the server's streaming.")


@case_check
def request_errors(case: dict, results: dict) -> Iterable[Warning_]:
    if case["n_failed"]:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(case["errors"].items()))
        total = case["n_ok"] + case["n_failed"]
        severity = ERROR if case["n_ok"] == 0 else WARNING
        yield Warning_("request_errors", severity, case["label"],
                       f"{case['n_failed']} of {total} requests failed ({kinds}); statistics cover "
                       f"the {case['n_ok']} that succeeded.",
                       "See each request's `error` in requests.jsonl; lower the concurrency or raise "
                       "--timeout if the server is overloaded.")


@case_check
def prefix_cache_hit(case: dict, results: dict) -> Iterable[Warning_]:
    template = (results.get("setup", {}).get("calibration") or {}).get("overhead_tokens", 0) or 0
    hits = [r for r in _measured_ok(case) if (r.get("cached_tokens") or 0) > max(template, 0) + 0.5]
    if hits:
        most = max(r["cached_tokens"] for r in hits)
        yield Warning_("prefix_cache_hit", WARNING, case["label"],
                       f"{len(hits)} requests were partly served from the server's prefix cache (up to "
                       f"{most} cached prompt tokens beyond the {template:.0f}-token chat template): "
                       "prefill figures are inflated.",
                       "Keep the nonce on (no --no-nonce) so no request shares a prefix with another.")
