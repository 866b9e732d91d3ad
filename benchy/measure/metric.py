"""What a metric is: the `Metric` record, the levels a figure is kept at, the sources its
evidence comes from, and the kinds of figure (a time, a token rate, a share …) that fix its unit
and display. Its own module so that the metric tables (measure/registry.py: a case's own figures;
measure/beside.py: the figures kept beside them) can both be written in it, and the registry
can join them without either importing the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from benchy.measure import turn_formulas as turn
from benchy.measure.unavailable import Unavailable

REQUEST = "request"  # measured per request, summarized per case (median ± std …)
CASE = "case"  # one figure per case, from all its measured requests
# Figures kept beside a case's own (each in its own entry of results.json, under `stored_as`):
SERVER_WINDOW = "server_window"  # the server's /metrics over the case (server/metrics.py)
GPU_WINDOW = "gpu_window"  # the GPU's counters over the case (measure/gpu.py)
LOOP = "loop"  # benchy's event loop while the case's requests were in flight (load/monitor.py)
TURN = "turn"  # one turn index of a multi-turn case: medians over its requests (measure/workloads.py)
GAIN = "gain"  # a shared-prefix case against the same lengths with nothing shared (measure/workloads.py)
LEVELS = (REQUEST, CASE, SERVER_WINDOW, GPU_WINDOW, LOOP, TURN, GAIN)

# Where a metric's evidence comes from.
CLIENT: Final = "client"  # benchy's own clock and the stream it read
SERVER: Final = "server"  # the server's own account (timings, /metrics)
GPU: Final = "gpu"  # the GPU's counters sampled during the case
WORKLOAD: Final = "workload"  # the shape of the workload (turns of a conversation, a cache's reuse)
CLIENT_HEALTH: Final = "client_health"  # benchy's own health: send lag, event-loop lag
Source: TypeAlias = Literal["client", "server", "gpu", "workload", "client_health"]
SOURCES: tuple[Source, ...] = (CLIENT, SERVER, GPU, WORKLOAD, CLIENT_HEALTH)

# A request formula: (record, its reading, the values of `depends` in order) → value. Its
# arity follows `depends`, so it is typed by the call, not by a fixed signature.
RequestFormula: TypeAlias = Callable[..., "float | Unavailable"]
CaseFormula: TypeAlias = Callable[..., "float | Unavailable"]  # the case's measured records (, tokens)


@dataclass(frozen=True)
class Metric:
    """One metric: everything the table, CSV, compare, --slo and the glossary say about it."""

    name: str  # key in results.json
    title: str  # column and axis title, in display units ("TTFT ms")
    unit: str  # unit of the stored value ("s", "tokens/s", …)
    scale: float  # display value = stored value × scale
    decimals: int  # decimals shown in the table
    higher_is_better: bool
    definition: str  # the formula in one line (README table, report glossary)
    stream_timing: bool = False  # taken from event arrival times: withheld when the stream is buffered
    explanation: str = ""  # what it means, in words (report glossary)
    slo: str | None = None  # name in --slo (ttft=2s)
    late_only_worsens: bool = False  # a late client timestamp can only make it worse (a later
    # TTFT, a longer latency, a lower e2e rate): a value within its SLO holds even when benchy fell behind
    depends: tuple[str, ...] = ()  # the metrics it is computed from, their values passed to the
    # formula in this order: a metric withheld takes those computed from it along (with_dependents)
    reads: tuple[str, ...] = ()  # the record fields it reads (documentation; never a metric)
    level: str = REQUEST
    formula: RequestFormula | CaseFormula | None = None  # REQUEST level: (record, reading,
    # *depends' values); CASE level: the case's measured records → value | Unavailable;
    # None: computed with more than records (goodput: the SLO)
    source: Source = CLIENT
    stored_as: str = ""  # its key in the entry that holds it, where that is not `name`
    in_table: bool = False  # a column of the results table
    in_compare: bool = False  # compared by `benchy compare`
    glossary: bool = False  # explained in the report's "How to read this report"

    @property
    def key(self) -> str:
        """Its key in the results entry that holds it (results.json's case, its `server`,
        `gpu`, `client` or a turn row)."""
        return self.stored_as or self.name

    @property
    def summarized(self) -> bool:
        return self.level == REQUEST

    @property
    def is_time(self) -> bool:
        return self.unit == "s"


# Kinds of figure: how each is stored and shown.


def _time(name: str, title: str, **more: Any) -> Metric:
    """Stored in seconds, shown in ms; lower is better."""
    return Metric(name, title, unit="s", scale=1000.0, decimals=1, higher_is_better=False, **more)


def _token_rate(name: str, title: str, decimals: int = 1, **more: Any) -> Metric:
    return Metric(name, title, unit="tokens/s", scale=1.0, decimals=decimals, higher_is_better=True, **more)


def _stored_time(
    level: str, source: Source, key: str, title: str, formula: RequestFormula | CaseFormula, definition: str
) -> Metric:
    """A time of a level kept beside a case's own figures, named `{level}_{key}`, stored as `key`."""
    return _time(
        f"{level}_{key}", title, level=level, source=source, stored_as=key, formula=formula, definition=definition
    )


def _turn_median(key: str, title: str, words: str) -> Metric:
    """One turn index's median of a per-request time."""
    definition = f"the median {words} of one turn index's successful requests"
    return _stored_time(TURN, WORKLOAD, key, title, turn.metric_median(key), definition)


def _request_rate(name: str, title: str, **more: Any) -> Metric:
    return Metric(name, title, unit="requests/s", scale=1.0, decimals=2, higher_is_better=True, **more)


def _share(name: str, title: str, **more: Any) -> Metric:
    return Metric(name, title, unit="fraction", scale=100.0, decimals=0, **more)


def _count(name: str, title: str, **more: Any) -> Metric:
    return Metric(name, title, unit="tokens", scale=1.0, decimals=0, higher_is_better=False, **more)


def _ms(name: str, title: str, **more: Any) -> Metric:
    """Stored in milliseconds (benchy's own loop lag); lower is better."""
    return Metric(name, title, unit="ms", scale=1.0, decimals=3, higher_is_better=False, **more)
