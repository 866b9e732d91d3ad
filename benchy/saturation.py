"""A saturation sweep in one flag (`benchy run --saturation N`, issue 54): one stream, then the
highest throughput, then N request rates between, and the knee named (GuideLLM's sweep).

Why in phases: the rates worth asking for depend on the server. One stream alone gives the
rate a server sustains with no queue at all; many streams at once (a closed loop of
THROUGHPUT_STREAMS, or the largest -c given) give the most it completes. The open-loop rates
from the first to somewhat past the second (OVERSHOOT: a knee needs a rate it cannot sustain)
are then the run itself: its results.json, report and checks are those of a plain rate sweep,
and the knee is the rate_knee note every rate sweep gets (results/knee.py). The two probing
phases are saved beside it, in saturation-single/ and saturation-throughput/, as run folders of
their own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from benchy import run as run_mod
from benchy.load import arrivals
from benchy.load.plan import LoadSettings
from benchy.results.types import RunResult
from benchy.workloads.case import Case

THROUGHPUT_STREAMS = 32  # streams of the throughput phase when no -c above 1 is given
OVERSHOOT = 1.25  # the last rate asked: this much above the throughput phase's
PROBE_REQUESTS = 10  # measured requests of the single-stream phase (the throughput phase: 2 a stream)


class SaturationError(ValueError):
    """A sweep that cannot be run as asked; one line."""


def check(cases: list[Case]) -> Case:
    """The one case shape a saturation sweep runs: a plain --pp/--tg case, closed loop."""
    shapes = {(c.pp, c.tg, c.depth, c.depth_mode, c.pp_stddev, c.tg_stddev, c.endpoint) for c in cases}
    if len(shapes) != 1 or any(c.kind != "sweep" or c.dataset is not None or c.rate is not None for c in cases):
        raise SaturationError("--saturation runs one --pp and one --tg (a plain case), without --rate or a workload")
    return cases[0]


def rates_between(single: float, highest: float, n: int) -> list[float]:
    """n rates from one stream's rate to OVERSHOOT × the highest, evenly spaced, to 3 figures."""
    top = max(highest, single) * OVERSHOOT
    return sorted({float(f"{r:.3g}") for r in np.linspace(single, top, n)})


def execute(settings: run_mod.RunSettings, n: int) -> RunResult:
    """The two probing phases, then the rate sweep (returned, as run.execute returns it)."""
    case = check(settings.cases)
    streams = max([c.concurrency for c in settings.cases if c.concurrency > 1] or [THROUGHPUT_STREAMS])
    say = settings.announce or (lambda line: None)
    single = _phase(settings, dataclasses.replace(case, concurrency=1), PROBE_REQUESTS, "single")
    many = _phase(settings, dataclasses.replace(case, concurrency=streams), 2 * streams, "throughput")
    rates = rates_between(single, many, n)
    say(
        f"benchy: saturation: one stream {single:.2f} requests/s, {streams} streams {many:.2f}/s; "
        f"rates {', '.join(f'{r:g}' for r in rates)}"
    )
    cases = [dataclasses.replace(case, concurrency=1, rate=r) for r in rates]
    return run_mod.execute(dataclasses.replace(settings, cases=cases, load=sweep_load(settings.load, rates)))


def sweep_load(load: LoadSettings, rates: list[float]) -> LoadSettings:
    """The rate sweep's bounds: --duration as given; else every rate at least arrivals.SETTLE_S
    seconds of arrivals (by default each gets that; a --requests too few for the highest rate is
    raised to its count, so that no rate's window is over before its queue can show)."""
    if load.duration_s is not None or load.requests is None:
        return load
    return dataclasses.replace(load, requests=arrivals.settling_requests(max(rates), load.requests))


def _phase(settings: run_mod.RunSettings, case: Case, requests: int, name: str) -> float:
    """One probing phase's completed request rate; SaturationError when it has none."""
    load = dataclasses.replace(settings.load, requests=requests, duration_s=None, drain_s=None)
    where = settings.output_dir / f"saturation-{name}" if settings.output_dir is not None else None
    typed = run_mod.execute(dataclasses.replace(settings, cases=[case], load=load, output_dir=where))
    rate = typed.cases[0].request_rate if typed.cases else None
    if not rate:
        raise SaturationError(f"--saturation: the {name} phase ({case.label}) completed no request rate")
    return rate
