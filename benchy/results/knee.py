"""The knee of a rate sweep: the highest request rate the server kept up with, and the next one,
where it fell behind. Read from saved results only (a case's asked rate, the rate its requests
completed at, its failures and its TTFT), for `checks/saturation.py` to say in one line.

Why these two tests: an open loop above what a server sustains still "completes" requests at
about its capacity, so a throughput figure alone looks fine; what gives the saturation away is
completions falling short of arrivals (the queue grows) and requests the drain had to cut. A
rate is kept up with when its requests completed at KEPT_UP of the asked rate or more and none
failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchy.results.types import CaseResult
from benchy.results.view import RunView

KEPT_UP = 0.9  # completions at 90% of the asked rate or more: the server kept up
MIN_RATES = 3  # a knee needs a sweep: fewer rates are two points, not a curve


@dataclass(frozen=True)
class Knee:
    kept_up: CaseResult | None  # the highest rate kept up with (None: not even the lowest)
    fell_behind: CaseResult | None  # the next rate up (None: every rate was kept up with)


def kept_up(case: CaseResult) -> bool:
    return bool(case.rate and case.request_rate is not None and not case.n_failed) and (
        case.request_rate or 0.0
    ) >= KEPT_UP * (case.rate or 0.0)


def knees(run: RunView) -> dict[str, Knee]:
    """Each rate sweep's knee, by the sweep's shape (every case parameter but the rate)."""
    sweeps: dict[str, list[CaseResult]] = {}
    for case in run.cases:
        if case.rate is not None and case.kind == "sweep":
            head, _, tail = case.label.rpartition(f" r{case.rate:g}")  # tail: the endpoint, if not chat
            shape = head + tail
            sweeps.setdefault(shape, []).append(case)
    found = {}
    for shape, cases in sweeps.items():
        cases.sort(key=lambda c: c.rate or 0.0)
        if len(cases) < MIN_RATES:
            continue
        first_behind = next((i for i, c in enumerate(cases) if not kept_up(c)), None)
        if first_behind is None:
            found[shape] = Knee(cases[-1], None)
        else:
            found[shape] = Knee(cases[first_behind - 1] if first_behind else None, cases[first_behind])
    return found
