"""Decide, then build: the run's verdicts on its cases' figures, before any result exists.

Each case comes measured (results/figures.CaseFigures, with its own buffering verdict). The
verdicts that read one case or several are decided here, each step on the figures as the steps
before it left them (a verdict is a new CaseFigures value, never a write); results/build.py
then makes each CaseResult once from its figures and verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchy.measure import classify, metrics, registry
from benchy.measure.unavailable import Unavailable
from benchy.measure.workloads import TtftGain, ttft_gains
from benchy.results import latency
from benchy.results.figures import CaseFigures, CaseView
from benchy.results.verdicts import queueing
from benchy.results.verdicts.queueing import QueueVerdict


@dataclass(frozen=True)
class Decided:
    """The run's cases under their verdicts, and what the analysis decided across them."""

    cases: list[CaseFigures]
    fixed_latency: tuple[latency.Found, ...]  # for the checks to word (RunResult.fixed_latency)
    gains: dict[str, TtftGain]  # a shared-prefix case's TTFT gain, by label


def decide(figures: Sequence[CaseFigures]) -> Decided:
    """Every verdict of the run, in the order each needs the ones before: a loaded case's
    queueing against its own alone requests; a TTFT trend (no queueing is judged on TTFTs it
    withholds); a loaded sweep case against concurrency 1; a fixed latency (a queued case keeps
    that cause); the shared-prefix gains, on TTFTs as finally shown."""
    cases = [_queued(f, queueing.judge_alone(f, f.alone_ttft_s, f.alone_points)) for f in figures]
    cases = _withheld(cases, buffered_trend(cases), registry.STREAM_TIMING_METRICS)
    against = queueing.judge_against_concurrency_1(cases)
    cases = [_queued(f, against.get(f.label)) for f in cases]
    fixed = latency.find(cases)
    cases = _withheld(cases, latency.withhold_fixed_latency(cases, fixed), ("prefill_tps",))
    return Decided(cases, fixed, ttft_gains(cases))


def _queued(case: CaseFigures, judged: QueueVerdict | None) -> CaseFigures:
    if judged is None:
        return case
    verdicts = replace(case.verdicts, queueing=judged.queueing)
    if judged.why is not None:
        verdicts = verdicts.withholding(("prefill_tps",), judged.why)
    return case.judged(verdicts)


def _withheld(cases: list[CaseFigures], why: Mapping[str, Unavailable], names: Sequence[str]) -> list[CaseFigures]:
    return [c.judged(c.verdicts.withholding(names, why[c.label])) if c.label in why else c for c in cases]


def buffered_trend(cases: Sequence[CaseView]) -> dict[str, Unavailable]:
    """Single-stream cases at one prompt whose TTFT grows with the output length (metrics.
    buffered_trend) lose their stream timings, unless usage shows one token per event: why, by label."""
    groups: dict[tuple[Any, ...], list[CaseView]] = {}
    for case in cases:
        if case.concurrency == 1 and case.summary.get("ttft_s") and case.summary.get("e2e_s"):
            groups.setdefault((case.pp, case.depth, case.depth_mode, case.endpoint), []).append(case)
    found: dict[str, Unavailable] = {}
    for group in groups.values():
        short, long = min(group, key=lambda c: c.tg), max(group, key=lambda c: c.tg)
        if short.tg == long.tg or (_streams_token_by_token(short) and _streams_token_by_token(long)):
            continue
        why = metrics.buffered_trend(_trend_point(short), _trend_point(long))
        if why is not None:
            found |= dict.fromkeys((case.label for case in group), why)
    return found


def _trend_point(case: CaseView) -> tuple[int, float, float]:
    return case.tg, case.summary["ttft_s"].median, case.summary["e2e_s"].median  # type: ignore[union-attr]


def _streams_token_by_token(case: CaseView) -> bool:
    """The server's own usage shows about one token per event: direct evidence of a live
    stream, which outweighs a TTFT trend (on a fast small model, load noise in TTFT can
    rival the whole decode time)."""
    facts = case.facts()
    per_event = case.median("tokens_per_event")
    return (
        bool(facts.n_ok)
        and facts.n_usage_reported == facts.n_ok  # every one carried usage
        and per_event is not None
        and per_event <= classify.LIVE_STREAM_TOKENS_PER_EVENT
    )
