"""A fixed latency in front of the engine: the part of TTFT that no prompt length explains.

Why: a gateway with pre-call guardrails, an API manager, a content filter or a long network
path adds the same time before the engine sees each request. TTFT holds it and is right (a
user waits it), but a prefill rate taken from TTFT counts it as prefill: 250 ms in front of an
engine that prefills 4,000 t/s prints 1,100 t/s at 512 tokens and 3,400 at 8,192.

Prefill time grows with the prompt; a fixed part does not. Across a single-stream sweep of
prompt lengths, TTFT against the uncached prompt tokens is a line whose slope is the engine's
time per token and whose intercept is the fixed part (plus one decode step and the HTTP round
trip, which are small). An intercept past FIXED_MIN_S and past the fit's own noise is a fixed
latency: the sweep's TTFT-based prefill rates are withheld (build.py) and the engine's
rate is the slope's inverse. The response headers' time is the second witness: a gateway that
holds the request (or a long path) holds its headers too, while an engine that answers with its
headers at once and then spends a fixed time of its own (a first decode step, scheduling, a big
model's forward pass) sends them long before that time is over: an intercept after early
headers (before HEADERS_SHARE of it) is the engine's, and no finding. Prefill that grows faster
than linearly (attention) bends the line upward, which lowers the intercept: the verdict errs
toward no finding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchy.measure import stats
from benchy.measure.metrics import FIXED_LATENCY, Unavailable
from benchy.results.types import CaseResult

# An intercept below this is a decode step and HTTP, not a gateway.
FIXED_MIN_S = 0.05
# The intercept must pass this many of its standard errors (the points' scatter about the line).
FIXED_SIGMAS = 3.0
# The headers must come this late, as a share of the fixed part, for it to lie before the engine.
HEADERS_SHARE = 0.5
# The sweep must span prompt lengths at least this far apart for an intercept to mean anything.
MIN_SPAN = 2.0


@dataclass(frozen=True)
class FixedPart:
    """The fixed part of TTFT across one sweep of prompt lengths (one depth and endpoint)."""

    fixed_s: float  # the intercept of TTFT against uncached prompt tokens
    threshold_s: float  # what it had to pass: FIXED_MIN_S, FIXED_SIGMAS standard errors
    engine_prefill_tps: float | None  # the slope's inverse (None: TTFT did not grow with the prompt)
    headers_s: float | None  # response headers' time (median) of the shortest prompt's case
    cases: tuple[str, ...]  # the single-stream cases fitted

    @property
    def found(self) -> bool:
        held = self.headers_s is None or self.headers_s >= HEADERS_SHARE * self.fixed_s
        return self.fixed_s > self.threshold_s and held

    def why(self) -> Unavailable:
        engine = f"; the engine prefills at {self.engine_prefill_tps:,.0f} t/s" if self.engine_prefill_tps else ""
        return Unavailable(
            FIXED_LATENCY,
            f"TTFT holds a fixed {self.fixed_s * 1000:,.0f} ms before the engine (the intercept of TTFT "
            f"against prompt length){engine}",
        )


def _single_stream(case: CaseResult) -> bool:
    return case.kind == "sweep" and case.concurrency == 1 and case.rate is None and case.depth_mode != "cached"


def groups(cases: Sequence[CaseResult]) -> list[list[CaseResult]]:
    """The sweep cases (any load) by prompt family: depth, depth mode and endpoint."""
    found: dict[tuple, list[CaseResult]] = {}
    for case in cases:
        if case.kind == "sweep" and case.depth_mode != "cached":
            found.setdefault((case.depth, case.depth_mode, case.endpoint), []).append(case)
    return list(found.values())


def _points(case: CaseResult) -> list[tuple[float, float]]:
    points = []
    for row in case.measured_ok():
        ttft = row.metrics.get("ttft_s")
        prompt = row.prompt_tokens if row.prompt_tokens is not None else case.pp + case.depth
        if ttft is not None:
            points.append((float(prompt - (row.cached_tokens or 0)), float(ttft)))
    return points


def fixed_part(group: Sequence[CaseResult]) -> FixedPart | None:
    """The fit over the group's single-stream cases, or None where they cannot show one (fewer
    than two prompt lengths MIN_SPAN apart, too few requests, TTFT withheld)."""
    single = [c for c in group if _single_stream(c) and c.summary.get("ttft_s") is not None]
    points = [p for c in single for p in _points(c)]
    xs = np.array([x for x, _ in points])
    if len(points) < 4 or xs.min() <= 0 or xs.max() < MIN_SPAN * xs.min():
        return None
    ys = np.array([y for _, y in points])
    design = np.column_stack([np.ones_like(xs), xs])
    (intercept, slope), *_ = np.linalg.lstsq(design, ys, rcond=None)
    residual = ys - design @ np.array([intercept, slope])
    variance = float(residual @ residual) / max(1, len(points) - 2)
    se = math.sqrt(variance * float(np.linalg.inv(design.T @ design)[0, 0]))
    shortest = min(single, key=lambda c: c.pp)
    headers = [r.headers_s for r in shortest.measured_ok() if r.headers_s is not None]
    return FixedPart(
        fixed_s=float(intercept),
        threshold_s=max(FIXED_MIN_S, FIXED_SIGMAS * se),
        engine_prefill_tps=1.0 / float(slope) if slope > 0 else None,
        headers_s=stats.median(headers) if headers else None,
        cases=tuple(c.label for c in single),
    )


def withhold_fixed_latency(cases: Sequence[CaseResult]) -> None:
    """Each sweep family whose single-stream TTFT has a fixed part loses its TTFT-based prefill
    rate (every load of it: the fixed part is in front of every request)."""
    for group in groups(cases):
        part = fixed_part(group)
        if part is not None and part.found:
            for case in group:
                if case.summary.get("prefill_tps") is not None:  # not already withheld for another cause
                    case.withhold(("prefill_tps",), part.why())
