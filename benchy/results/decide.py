"""Decide, then build: the run's verdicts on its cases' figures, before any result exists.

Each case comes measured (results/figures.CaseFigures, with its own buffering verdict). Each
finding of the registry (results/findings.py DECIDED) decides in turn, on the figures as the
ones before it left them (a verdict is a new CaseFigures value, never a write); results/build.py
then makes each CaseResult once from its figures and verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.measure.workloads import TtftGain, ttft_gains
from benchy.results import latency
from benchy.results.figures import CaseFigures
from benchy.results.findings import DECIDED


@dataclass(frozen=True)
class Decided:
    """The run's cases under their verdicts, and what the analysis decided across them."""

    cases: list[CaseFigures]
    fixed_latency: tuple[latency.Found, ...]  # for the checks to word (RunResult.fixed_latency)
    gains: dict[str, TtftGain]  # a shared-prefix case's TTFT gain, by label


def decide(figures: Sequence[CaseFigures]) -> Decided:
    """Every finding's verdicts, in the registry's order, then the shared-prefix gains on the
    TTFTs as finally shown."""
    cases = list(figures)
    fixed: tuple[latency.Found, ...] = ()
    for finding in DECIDED:
        decision = finding.decide(cases)
        cases = finding.judged(cases, decision)
        fixed = decision.fixed_latency or fixed
    return Decided(cases, fixed, ttft_gains(cases))
