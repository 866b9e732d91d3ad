"""The queueing trap in one place: requests that wait for the server hold that wait in their
TTFT, so a prefill rate taken from TTFT counts it. Here are its thresholds, the decision the
analysis makes (results/decide.py asks `judge_alone` of each case and `judge_against_
concurrency_1` of the run: a Queueing for the case, and prefill_tps withheld with code `queued`), and
what the warnings read (the server's slots; queue_figures: the server's own queue time, from its
/metrics). No warning is made here: the findings that judge queueing word prefill_holds_queueing
(results/findings.py Queued), and checks/queueing.py words queue_dominates_ttft and reads files
before 1.9 for a queue; checks/ registers both in their places.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.measure import stats
from benchy.measure.unavailable import QUEUED, Unavailable
from benchy.results.figures import CaseView
from benchy.results.types import CaseResult, MetricSummary, Queueing
from benchy.results.verdicts.details import QueueDominatesTtft
from benchy.results.view import RunView

# TTFT under load counts as queued when its median passes the same prompt's alone median by
# more than the noise: half the alone TTFT (QUEUE_TTFT_GROWTH 1.5×), 20 ms, and the spread of
# the alone TTFTs themselves (a server whose TTFT wobbles that much alone proves nothing by it).
QUEUE_TTFT_GROWTH = 1.5
QUEUE_TTFT_MIN_S = 0.02
# The server's own queue time above this share of its TTFT, and this long, dominates it (a few
# ms of a tiny TTFT are scheduling noise, not saturation).
QUEUE_SHARE, QUEUE_MIN_S = 0.5, 0.01


def queue_threshold_s(alone: list[float]) -> float:
    """How far the loaded TTFT median may pass the alone median before it is queueing."""
    median = stats.median(alone)
    return max(QUEUE_TTFT_MIN_S, (QUEUE_TTFT_GROWTH - 1) * median, max(alone) - min(alone))


def load_words(kind: str, concurrency: int | None, rate: float | None) -> str:
    """The load a case put on the server, in words: 'at concurrency 4', 'at 2 requests/s',
    'with 4 conversations at once' (a TTFT under it is judged against the same prompt alone)."""
    if kind == "multi_turn":
        return f"with {concurrency} conversations at once (their first turns)"
    if kind == "trace":
        return "in the trace replay"
    if rate is not None:
        return f"at {rate:g} requests/s"
    return f"at concurrency {concurrency}"


@dataclass(frozen=True)
class LineJudgment:
    """Loaded TTFTs of many prompt lengths against the line the alone ones draw (a trace)."""

    excess_s: float  # median over the loaded requests of TTFT − the alone line at its uncached tokens
    threshold_s: float  # noise: QUEUE_TTFT_MIN_S, half the line's median TTFT, the alone residuals' spread
    why: Unavailable | None  # QUEUED when the excess passes the noise


def queued_against_line(loaded: list[tuple[float, float]], alone: list[tuple[float, float]]) -> LineJudgment:
    """(uncached prompt tokens, TTFT) of each loaded and each alone request: the alone TTFT
    at a request's length is read off the line through the alone points, so that requests of
    every length are judged by one rule."""
    intercept, slope = stats.line_through([x for x, _ in alone], [y for _, y in alone])
    residuals = [y - (intercept + slope * x) for x, y in alone]
    expected = [intercept + slope * x for x, _ in loaded]
    excess = stats.median([y - e for (_, y), e in zip(loaded, expected)])
    threshold = max(QUEUE_TTFT_MIN_S, (QUEUE_TTFT_GROWTH - 1) * stats.median(expected), max(residuals) - min(residuals))
    if excess <= threshold:
        return LineJudgment(excess, threshold, None)
    why = Unavailable(
        QUEUED,
        f"TTFT in the trace replay passes what the same prompt lengths take alone by {excess * 1000:,.0f} ms "
        "(median): requests waited for the server, so a prefill rate from TTFT would count the wait",
    )
    return LineJudgment(excess, threshold, why)


# What a queueing judgment compared, in words.
BASIS_WORDS = {"ttft_s": "TTFT", "ttft_gap_s": "TTFT beyond the server's own prompt time"}


def queued(loaded_median_s: float, alone: list[float], load: str, basis: str = "ttft_s") -> Unavailable | None:
    """Unavailable(QUEUED) for the prefill rate of a loaded case whose TTFT median passes the
    alone TTFTs (same prompt, nothing else in flight) by more than the noise, else None.
    `load`: load_words of the case; `basis`: what the values are (BASIS_WORDS)."""
    alone_median = stats.median(alone)
    if loaded_median_s - alone_median <= queue_threshold_s(alone):
        return None
    return Unavailable(
        QUEUED,
        f"{BASIS_WORDS[basis]} {load} ({loaded_median_s * 1000:,.0f} ms, median) passes the same "
        f"prompt's alone ({alone_median * 1000:,.0f} ms) by {(loaded_median_s - alone_median) * 1000:,.0f} ms: "
        "requests waited for the server, so a prefill rate from TTFT would count the wait",
    )


@dataclass(frozen=True)
class QueueVerdict:
    """A loaded case judged against the same prompt with nothing else in flight."""

    queueing: Queueing
    why: Unavailable | None  # QUEUED: the prefill rate is withheld, it would count the wait


def judge_alone(
    case: CaseView, alone_ttft_s: list[float], alone_points: list[tuple[float, float]]
) -> QueueVerdict | None:
    """A case against the requests load/alone.py sent alone before it: a trace (and a
    shared-prefix case with a context), whose requests differ in length, against the line its
    alone points draw (alone.on_a_line); any other case against the same prompt alone."""
    if alone_ttft_s and (case.kind == "trace" or (case.kind == "shared_prefix" and case.depth > 0)):
        return judge_trace_queueing(case, alone_points)
    if alone_ttft_s:
        return judge_queueing(case, alone_ttft_s, "alone", _same_shape_ttfts(case))
    return None


def judge_trace_queueing(case: CaseView, alone: list[tuple[float, float]]) -> QueueVerdict | None:
    """A trace's requests, each of its own length, against the line the alone requests of a
    short and a long prompt draw (queued_against_line): the uncached tokens a request
    prefilled say what it would take alone. A server that reports no cached tokens makes every
    request look longer, so the verdict errs toward no queueing."""
    loaded: list[tuple[float, float]] = [
        (r.prompt_tokens - (r.cached_tokens or 0), ttft)
        for r in case.measured_ok()
        if r.prompt_tokens is not None and (ttft := r.metrics.get("ttft_s")) is not None
    ]
    if case.summary.get("ttft_s") is None or not loaded or len(alone) < 2:
        return None
    judged = queued_against_line(loaded, alone)
    found = Queueing(
        source="alone",
        alone_ttft=MetricSummary.of([t for _, t in alone]),
        loaded_ttft_s=stats.median([t for _, t in loaded]),
        excess_s=judged.excess_s,
        threshold_s=judged.threshold_s,
        queued=judged.why is not None,
    )
    return QueueVerdict(found, judged.why)


def _same_shape_ttfts(case: CaseView) -> list[float]:
    """The measured TTFTs of the requests shaped as the alone ones (load/alone.py): a
    conversation's first turns, or every request of a sweep case."""
    if case.kind == "multi_turn":
        first = [r for r in case.measured_ok() if r.turn == 1 and not r.control]
        return [v for v in (r.metrics.get("ttft_s") for r in first) if v is not None]
    return case.measured_values("ttft_s")


def judge_queueing(
    case: CaseView, alone: list[float], source: str, loaded_ttfts: list[float], basis: str = "ttft_s"
) -> QueueVerdict | None:
    """The case's Queueing from the TTFTs of the same prompt with nothing else in flight against
    `loaded_ttfts` (the case's requests of that shape); a loaded TTFT past them by more than the
    noise (queued) withholds the prefill rate, which would count the wait. TTFT stays:
    it is what a user waits (checks qualify it)."""
    if case.summary.get("ttft_s") is None or not loaded_ttfts:  # buffered or failed: nothing to judge
        return None
    loaded = stats.median(loaded_ttfts)
    excess = loaded - MetricSummary.of(alone).median
    why = queued(loaded, alone, load_words(case.kind, case.concurrency, case.rate), basis)
    found = Queueing(
        source=source,
        alone_ttft=MetricSummary.of(alone),
        loaded_ttft_s=loaded,
        excess_s=excess,
        threshold_s=queue_threshold_s(alone),
        queued=why is not None,
        basis=basis,
    )
    return QueueVerdict(found, why)


def judge_against_concurrency_1(cases: Sequence[CaseView]) -> dict[str, QueueVerdict]:
    """A loaded sweep case (closed loop with several streams, or an open loop) with no alone
    requests of its own is judged against the run's closed-loop concurrency-1 case of the same
    prompt (load/alone.py sends none when there is one); by label."""
    found = {}
    for case in cases:
        loaded = (case.concurrency or 1) > 1 or case.rate is not None
        if case.queueing is not None or not loaded or case.kind != "sweep":
            continue
        base = next((c for c in cases if _single_stream(c) and _same_prompt(c, case)), None)
        alone = base.measured_values("ttft_s") if base is not None else []
        if base is None or not alone:
            continue
        loaded_ttfts = case.measured_values("ttft_s")
        alone_gaps, loaded_gaps = base.measured_values("ttft_gap_s"), case.measured_values("ttft_gap_s")
        if len(alone_gaps) == len(alone) and loaded_ttfts and len(loaded_gaps) == len(loaded_ttfts):
            # The server timed each prefill (llama.cpp): the wait is what TTFT holds beyond it, and
            # a prefill slowed by a busy host (a CPU server's own swings) is no noise to hide it.
            judged = judge_queueing(case, alone_gaps, base.label, loaded_gaps, "ttft_gap_s")
        else:
            judged = judge_queueing(case, alone, base.label, loaded_ttfts)
        if judged is not None:
            found[case.label] = judged
    return found


def _single_stream(case: CaseView) -> bool:
    return case.kind == "sweep" and case.concurrency == 1 and case.rate is None


def _same_prompt(a: CaseView, b: CaseView) -> bool:
    return (a.pp, a.depth, a.depth_mode, a.endpoint) == (b.pp, b.depth, b.depth_mode, b.endpoint)


# ------------------------------------------------------------------ what the warnings read


def server_slots(run: RunView) -> int | None:
    """The requests the server runs at once, where it says (llama.cpp's slots)."""
    slots = run.setup.server.slots if run.setup.server else None
    return slots if slots is not None and slots > 0 else None


def slots_text(slots: int) -> str:
    return f"{slots} slot" if slots == 1 else f"{slots} slots"


def queue_figures(case: CaseResult) -> QueueDominatesTtft | None:
    """The figures of a queue_dominates_ttft warning, or None."""
    server = case.server_figures()
    queue = server.histogram_mean("queue_s") if server else None
    ttft = server.histogram_mean("ttft_s") if server else None
    ttft = ttft if ttft is not None else case.mean("ttft_s")
    if server is None or queue is None or not ttft or queue <= max(QUEUE_SHARE * ttft, QUEUE_MIN_S):
        return None
    running = server.gauges.get("running")
    return QueueDominatesTtft(
        queue_s=queue,
        ttft_s=ttft,
        queue_share=queue / ttft,
        concurrency=case.concurrency,
        rate=case.rate,
        running_max=running.max if running else None,
    )
