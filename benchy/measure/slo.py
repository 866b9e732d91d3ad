"""Service-level objectives: `--slo` parsing, whether a request meets them, goodput."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from benchy.measure.case_formulas import _success_window
from benchy.measure.registry import METRICS, SLO_METRICS, request_metrics
from benchy.measure.unavailable import NO_REQUEST, SLO_UNJUDGED, Unavailable
from benchy.records.plan import Tagged


def meets_slo(values: dict[str, float | Unavailable], slo: dict[str, float]) -> bool | Unavailable:
    """Whether one request's metrics meet every SLO; Unavailable when one cannot be judged."""
    for metric, limit in slo.items():
        value = values[metric]
        if isinstance(value, Unavailable):
            return value
        if (value < limit) if METRICS[metric].higher_is_better else (value > limit):
            return False
    return True


Values = Callable[[Tagged], dict[str, "float | Unavailable"]]  # a request's metrics


def _good_requests(
    records: list[Tagged],
    slo: dict[str, float],
    buffered: Unavailable | Literal[False] | None,
    values: Values | None = None,
) -> int | Unavailable:
    good = 0
    for rec in records:
        if not rec.ok:
            continue
        verdict = meets_slo(values(rec) if values else request_metrics(rec, buffered), slo)
        if isinstance(verdict, Unavailable):
            return Unavailable(SLO_UNJUDGED, f"cannot judge the SLO: {verdict.message}")
        good += verdict
    return good


def goodput_figures(
    records: list[Tagged],
    slo: dict[str, float],
    buffered: Unavailable | Literal[False] | None = None,
    values: Values | None = None,
) -> tuple[float | Unavailable, float | Unavailable]:
    """(goodput, goodput_rate), the requests that met every SLO counted once for both.
    goodput: the fraction of the measured requests that succeeded and met every SLO;
    goodput_rate: those requests ÷ (last end − first send) of the case, 0 when none met them.
    `buffered`: the case's verdict (results/findings.BufferedStreams), so each request is judged on the figures
    its case reports; `values`: each request's metrics already made with that verdict."""
    if not records:
        none = Unavailable(NO_REQUEST, "no request was measured")
        return none, none
    good = _good_requests(records, slo, buffered, values)
    if isinstance(good, Unavailable):
        return good, good
    if good == 0:
        return 0.0, good
    window = _success_window(records)
    return good / len(records), window if isinstance(window, Unavailable) else good / window[1]


def goodput(
    records: list[Tagged],
    slo: dict[str, float],
    buffered: Unavailable | Literal[False] | None = None,
    values: Values | None = None,
) -> float | Unavailable:
    """The fraction of goodput_figures."""
    return goodput_figures(records, slo, buffered, values)[0]


def goodput_rate(
    records: list[Tagged],
    slo: dict[str, float],
    buffered: Unavailable | Literal[False] | None = None,
    values: Values | None = None,
) -> float | Unavailable:
    """The rate of goodput_figures."""
    return goodput_figures(records, slo, buffered, values)[1]


def parse_slo(text: str) -> dict[str, float]:
    """`ttft=2s,e2e_tps=20` → {"ttft_s": 2.0, "e2e_tps": 20.0}; times take s or ms (default s).
    Raises ValueError with a one-line message."""
    slo: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in SLO_METRICS:
            raise ValueError(f"--slo {part!r}: expected NAME=VALUE with NAME one of {', '.join(SLO_METRICS)}")
        metric = SLO_METRICS[name]
        value = value.strip()
        scale = 1.0
        if metric.is_time and value.endswith("ms"):
            value, scale = value[:-2], 0.001
        elif metric.is_time and value.endswith("s"):
            value = value[:-1]
        try:
            number = float(value) * scale
        except ValueError:
            raise ValueError(f"--slo {part!r}: {value!r} is not a number") from None
        if not 0 < number < float("inf"):
            raise ValueError(f"--slo {part!r}: the threshold must be positive")
        slo[metric.name] = number
    if not slo:
        raise ValueError("--slo: give at least one NAME=VALUE, e.g. ttft=2s,e2e_tps=20")
    return slo
