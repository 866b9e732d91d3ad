"""A fixed latency in front of the engine: the part of TTFT that no prompt length explains.

Why: a gateway with pre-call guardrails, an API manager, a content filter or a long network
path adds the same time before the engine sees each request. TTFT holds it and is right (a
user waits it), but a prefill rate taken from TTFT counts it as prefill: 250 ms in front of an
engine that prefills 4,000 t/s prints 1,100 t/s at 512 tokens and 3,400 at 8,192.

Prefill time grows with the prompt; a fixed part does not. Two witnesses, from the single-stream
cases of one prompt family (depth, endpoint):

  headers    most servers (llama.cpp, vLLM) send their response headers as soon as they take
             the request, before prefill. Where the longest prompt's first token came well
             after its headers (GAP_SHARE of its TTFT: this server answers before its prefill
             ends) and its headers came no later than the shortest prompt's (HEADERS_GROWTH: a
             server that works on the prompt before it answers moves them with the prompt),
             the headers' time is what passed before the server took the request, and
             an engine's own fixed time (a first decode step) is not in it: the fixed part (a gateway
             that holds the request holds its headers too; so does a long path). It needs one
             prompt length only, and no prefill model.
  intercept  where the headers come with the first token (the server, or a proxy, holds them),
             TTFT against the uncached prompt tokens is a line whose intercept is the fixed part
             (plus a decode step and the round trip). It must pass FIXED_SIGMAS standard errors,
             and the headers must not have come before HEADERS_SHARE of it: an engine that
             answers at once and then spends a fixed time of its own (a first decode step, a big
             model's forward pass) is no gateway. Prefill that grows faster than linearly
             (attention) bends the line up and lowers the intercept: it errs toward no finding.

A fixed part past FIXED_MIN_S withholds the family's TTFT-based prefill rates (decide.py); the
engine's rate is the longest prompt's uncached tokens over its TTFT less the fixed part.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchy.measure import stats
from benchy.measure.unavailable import FIXED_LATENCY, Unavailable
from benchy.results.figures import CaseView
from benchy.results.view import RunView

# An intercept below this is a decode step and HTTP, not a gateway.
FIXED_MIN_S = 0.05
# The intercept must pass this many of its standard errors (the points' scatter about the line).
FIXED_SIGMAS = 3.0
# The headers must come this late, as a share of the fixed part, for it to lie before the engine.
HEADERS_SHARE = 0.5
# The sweep must span prompt lengths at least this far apart for an intercept to mean anything.
MIN_SPAN = 2.0
MIN_HEADERS = 3  # requests whose headers were timed, for their median to be a witness
# The server answers before its prefill ends where the longest prompt's first token came this long
# (and this share of its TTFT) after its headers; a server that holds its headers until the first
# token sends them a few ms before it.
GAP_MIN_S = 0.02
GAP_SHARE = 0.2
# The headers of the longest prompt may come this much later than the shortest's (and GAP_MIN_S)
# and still be a fixed part: a gateway's hold varies a little, prompt work grows with the prompt.
HEADERS_GROWTH = 1.25


@dataclass(frozen=True)
class FixedPart:
    """The fixed part of TTFT in one family of sweep cases (one depth and endpoint)."""

    fixed_s: float  # the headers' time where they came before any prefill could end, else the intercept
    source: str  # "headers" or "intercept"
    threshold_s: float  # what it had to pass: FIXED_MIN_S (the intercept: FIXED_SIGMAS standard errors too)
    intercept_s: float | None  # TTFT against uncached prompt tokens at zero (None: one prompt length)
    engine_prefill_tps: float | None  # the longest prompt's uncached tokens over TTFT − the fixed part
    headers_s: float | None  # response headers' time (median) of the shortest prompt's case
    cases: tuple[str, ...]  # the single-stream cases it rests on
    lengths: int = 2  # distinct prompt lengths among them: with one, the headers cannot show they stay put

    @property
    def unsure_cause(self) -> bool:
        """Headers at one prompt length: a hold in front of the server and the server's own work on
        the prompt before it answers look alike (both withhold a TTFT-based prefill rate)."""
        return self.source == "headers" and self.lengths < 2

    @property
    def found(self) -> bool:
        if self.source == "headers":
            return self.fixed_s > self.threshold_s
        held = self.headers_s is None or self.headers_s >= HEADERS_SHARE * self.fixed_s
        return self.fixed_s > self.threshold_s and held

    def why(self) -> Unavailable:
        engine = f"; the engine prefills at {self.engine_prefill_tps:,.0f} t/s" if self.engine_prefill_tps else ""
        where = "before the server answers" if self.unsure_cause else "before the engine"  # one length: cause unknown
        return Unavailable(
            FIXED_LATENCY,
            f"TTFT holds a fixed {self.fixed_s * 1000:,.0f} ms {where} ({self.evidence()}){engine}",
        )

    def evidence(self) -> str:
        if self.unsure_cause:
            return "the response headers' time, before any prefill, at one prompt length"
        if self.source == "headers":
            return "the response headers' time, which no prompt length moves"
        return "the intercept of TTFT against prompt length"


def _single_stream(case: CaseView) -> bool:
    return case.kind == "sweep" and case.concurrency == 1 and case.rate is None and case.depth_mode != "cached"


def groups(cases: Sequence[CaseView]) -> list[list[CaseView]]:
    """The sweep cases (any load) by prompt family: depth, depth mode and endpoint."""
    found: dict[tuple[Any, ...], list[CaseView]] = {}
    for case in cases:
        if case.kind == "sweep" and case.depth_mode != "cached":
            found.setdefault((case.depth, case.depth_mode, case.endpoint), []).append(case)
    return list(found.values())


def _points(case: CaseView) -> list[tuple[float, float]]:
    points = []
    for row in case.measured_ok():
        ttft = row.metrics.get("ttft_s")
        prompt = row.prompt_tokens if row.prompt_tokens is not None else case.pp + case.depth
        if ttft is not None:
            points.append((float(prompt - (row.cached_tokens or 0)), float(ttft)))
    return points


def fixed_part(group: Sequence[CaseView]) -> FixedPart | None:
    """The group's fixed part, from its single-stream cases: the headers' time where the
    server answers before its prefill ends (the longest prompt's first token came well after its
    headers), else the intercept of TTFT against uncached tokens (two prompt lengths MIN_SPAN
    apart at least); None where neither can be read."""
    single = [c for c in group if _single_stream(c) and c.summary.get("ttft_s") is not None]
    if not single:
        return None
    shortest, longest = min(single, key=lambda c: c.pp), max(single, key=lambda c: c.pp)
    headers = {c.label: _headers(c) for c in single}
    shown = headers[shortest.label]
    intercept, se = _intercept([p for c in single for p in _points(c)])
    late = headers[longest.label]
    ttft = longest.median("ttft_s")
    answered_first = late is not None and ttft is not None and ttft - late >= max(GAP_MIN_S, GAP_SHARE * ttft)
    if all(h is not None for h in headers.values()) and answered_first and not _moved(shown, late):
        fixed = min(h for h in headers.values() if h is not None)
        source, threshold = "headers", FIXED_MIN_S
    elif intercept is not None:
        fixed, source, threshold = intercept, "intercept", max(FIXED_MIN_S, FIXED_SIGMAS * se)
    else:
        return None
    return FixedPart(
        fixed_s=fixed,
        source=source,
        threshold_s=threshold,
        intercept_s=intercept,
        engine_prefill_tps=_engine_rate(longest, fixed),
        headers_s=shown,
        cases=tuple(c.label for c in single),
        lengths=len({c.pp for c in single}),
    )


def _moved(shortest: float | None, longest: float | None) -> bool:
    """The headers came later for the longer prompt (beyond HEADERS_GROWTH and GAP_MIN_S): what
    passed before them is the server's own work on the prompt (llama.cpp with its host-RAM
    prompt cache on the H200: 76 ms at 512 tokens, 0.98 s at 8,192), not a fixed part."""
    if shortest is None or longest is None:
        return False
    return longest > shortest * HEADERS_GROWTH + GAP_MIN_S


def _headers(case: CaseView) -> float | None:
    """The median time to the response headers, over at least MIN_HEADERS requests."""
    times = [r.headers_s for r in case.measured_ok() if r.headers_s is not None]
    return stats.median(times) if len(times) >= MIN_HEADERS else None


def _intercept(points: list[tuple[float, float]]) -> tuple[float | None, float]:
    """TTFT at zero uncached tokens by least squares, and its standard error."""
    xs = np.array([x for x, _ in points])
    if len(points) < 4 or xs.min() <= 0 or xs.max() < MIN_SPAN * xs.min():
        return None, math.inf
    ys = np.array([y for _, y in points])
    design = np.column_stack([np.ones_like(xs), xs])
    (intercept, slope), *_ = np.linalg.lstsq(design, ys, rcond=None)
    residual = ys - design @ np.array([intercept, slope])
    variance = float(residual @ residual) / max(1, len(points) - 2)
    return float(intercept), math.sqrt(variance * float(np.linalg.inv(design.T @ design)[0, 0]))


def _engine_rate(case: CaseView, fixed_s: float) -> float | None:
    """The engine's prefill rate at the case's prompt: uncached tokens over TTFT less the fixed part."""
    rates = [x / (y - fixed_s) for x, y in _points(case) if y > fixed_s]
    return stats.median(rates) if rates else None


@dataclass(frozen=True)
class Found:
    """A fixed part found in one sweep family: what the analysis decides once (find), the
    builder withholds by and the checks put in words (fixed_latency, ttft_not_prefill)."""

    part: FixedPart
    family: tuple[str, ...]  # every case of the family, at any load: the part is in front of each


def find(cases: Sequence[CaseView]) -> tuple[Found, ...]:
    """The fixed parts found, one per sweep family that has one (past FIXED_MIN_S)."""
    found = []
    for group in groups(cases):
        part = fixed_part(group)
        if part is not None and part.found:
            found.append(Found(part, tuple(c.label for c in group)))
    return tuple(found)


def found_in(run: RunView) -> tuple[Found, ...]:
    """The analysis's finding (run.fixed_latency); results read from disk carry none, and are
    judged again from the rows they saved, with the same function."""
    return run.fixed_latency if run.fixed_latency is not None else find(run.cases)


def found_for(case: CaseView, found: Sequence[Found]) -> FixedPart | None:
    """The fixed part found in `case`'s family, if one was."""
    return next((f.part for f in found if case.label in f.family), None)


def withhold_fixed_latency(cases: Sequence[CaseView], found: Sequence[Found]) -> dict[str, Unavailable]:
    """Each sweep family whose single-stream TTFT has a fixed part loses its TTFT-based prefill
    rate (every load of it: the fixed part is in front of every request): why, by label."""
    withheld = {}
    for case in cases:
        part = found_for(case, found)
        if part is not None and case.summary.get("prefill_tps") is not None:  # not withheld for another cause
            withheld[case.label] = part.why()
    return withheld
