"""Formulas of one turn index of a multi-turn case: medians over its successful requests. Like
the other formulas, each takes what it reads (a TurnSample) and the values of the metrics it
depends on; the registry calls them in its order (its TURN level)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from benchy.measure import stats
from benchy.measure.unavailable import NO_SUCCESS, Unavailable
from benchy.measure.window_formulas import NO_MEDIAN
from benchy.records.plan import Tagged


@dataclass(frozen=True)
class TurnSample:
    """One turn index: its successful requests, each one's metrics (computed once per request),
    and the TTFT of each cold control sent at that turn (--cold-baseline)."""

    ok: Sequence[Tagged]
    values: Sequence[Mapping[str, float | Unavailable]]
    cold_ttft: Sequence[float | Unavailable]


TurnFormula = Callable[[TurnSample], "float | Unavailable"]
NONE_OK = Unavailable(NO_SUCCESS, "no request of the turn succeeded")


def metric_median(name: str) -> TurnFormula:
    """The median of a per-request metric, only where every request has it (as a case's
    summary: the measurable subset would hide the rest); else the first request's reason."""

    def of_requests(turn: TurnSample) -> float | Unavailable:
        found = [v[name] for v in turn.values]
        missing = next((v for v in found if isinstance(v, Unavailable)), None)
        if missing is not None:
            return missing
        return stats.median([v for v in found if not isinstance(v, Unavailable)]) if found else NONE_OK

    return of_requests


def _median(values: Sequence[float | None]) -> float | Unavailable:
    kept = [v for v in values if v is not None]
    return stats.median(kept) if kept else NO_MEDIAN


def prompt_tokens(turn: TurnSample) -> float | Unavailable:
    return _median([r.prompt_tokens for r in turn.ok])


def new_tokens(turn: TurnSample) -> float | Unavailable:
    return _median(
        [
            r.prompt_tokens - r.cached_tokens
            for r in turn.ok
            if r.prompt_tokens is not None and r.cached_tokens is not None
        ]
    )


def cached_tokens(turn: TurnSample) -> float | Unavailable:
    return _median([r.cached_tokens for r in turn.ok])


def expected_cached_tokens(turn: TurnSample) -> float | Unavailable:
    return _median([r.expected_cached_tokens for r in turn.ok])


def cold_ttft_s(turn: TurnSample) -> float | Unavailable:
    return _median([v for v in turn.cold_ttft if not isinstance(v, Unavailable)])
