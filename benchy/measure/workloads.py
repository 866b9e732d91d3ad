"""A workload case's own figures, from its measured records: what the prefix cache was worth.

  reuse       prompt tokens an ideal cache would have served (each record's
              expected_cached_tokens) beside what the server reported (cached_tokens), and
              both as hit rates of all prompt tokens
  turns       multi-turn: per turn index, medians of TTFT, prefill rate of the new tokens
              (prefill_tps = uncached tokens / TTFT), new tokens, cached tokens reported and
              expected (the history), e2e
  eviction    the first request (in send order) whose reported reuse fell short of what was
              expected by more than the server's cache granularity, after reuse had worked;
              with its turn, the requests then in flight and the history held
  no_reuse    reuse was expected but never reported (the cache is off, or not reporting)
  partial     some requests reused what they should have and others not, again and again (not
              the hits-then-misses of eviction: at least half of them, and 3, full hits before the
              first miss, whether or not hits came back), or none reused all of it but some reused part:
              the fraction of each, and the pattern where one shows. A conversation's turn that
              reused the history of the turn d before, not of the last one, again and again
              with the same d, is a router rotating over d replicas that each hold their own
              cache; misses that all came after idle gaps longer than any gap before a hit
              (by a margin) are a cache lifetime expiring (hosted prompt caches, LMCache TTLs),
              not routing; hits on a fraction f of requests, with neither, is one spreading
              them over about 1/f replicas at random
  leakage     requests that report more cached tokens than could be shared: beyond
              prompt − unique_tokens, where the unique part is nonce-led or new
  ttft_gain   shared prefix: TTFT against the case with the same lengths and nothing shared
              (ttft_gains over the run's cases, put in by the builder)

Granularity: servers count cached tokens in blocks (vLLM 16, TensorRT-LLM up to 64) or tokens
(llama.cpp). It is read from the reported figures (the greatest common divisor of the non-zero
cached counts, at most 256), so rounding to a block is never taken for eviction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from benchy import jsontypes
from benchy.measure import registry
from benchy.measure.miss_causes import (
    EXPIRY_MIN_MISSES,
    IdleTimes,
    idle_split,
    past_lifetime,
    start_reuse,
    steady_turn_lag,
)
from benchy.measure.registry import PerRequest
from benchy.measure.turn_formulas import NONE_OK, TurnSample
from benchy.measure.unavailable import NO_TOOL_CALL, Unavailable
from benchy.measure.window_formulas import NO_MEDIAN, NOTHING
from benchy.records.plan import Tagged

# the plan's own saved form of a workload's settings (re-exported: the report reads it from here)
from benchy.workloads.spec import ThinkSpec as ThinkSpec
from benchy.workloads.spec import WorkloadSpec as WorkloadSpec

MAX_GRANULARITY = 256
TOKEN_TOLERANCE = 0.01  # token-granular servers: a shortfall up to 1% of the history is noise
LEAK_TOLERANCE = 0.02  # unique parts are counted locally × scale: allow 2% of them


class _Saved:
    def to_dict(self) -> dict[str, Any]:
        saved: dict[str, Any] = jsontypes.to_json(self)
        return saved


@dataclass(frozen=True)
class Reuse(_Saved):
    """Prompt tokens an ideal cache would have served beside those the server reported cached,
    over the successful requests where both are known."""

    requests: int = 0
    unreported: int = 0  # successful requests without a cached_tokens figure
    prompt_tokens: int = 0
    expected_tokens: int = 0
    reported_tokens: int = 0
    expected_hit_rate: float | None = None
    reported_hit_rate: float | None = None


@dataclass(frozen=True)
class Eviction(_Saved):
    """The first request whose reuse fell short, and how far the shortfall went."""

    request_id: str
    turn: int | None
    conversation: int | None
    after_s: float  # since the case's first send
    in_flight: int
    held_tokens: int  # prompt tokens of each conversation's latest request (or every request) so far
    expected_tokens: int
    reported_tokens: int
    requests: int  # requests that fell short
    of_requests: int  # requests expected to reuse something
    lost_tokens: int


@dataclass(frozen=True)
class PartialReuse(_Saved):
    """Reuse on some requests only (see the module docstring): counts, tokens and the pattern."""

    requests: int  # requests expected to reuse something
    hit_requests: int  # reused all of it
    partial_requests: int  # reused some of it
    missed_requests: int  # reused none of it (beyond what every prompt shares)
    hit_fraction: float
    expected_tokens: int
    reported_tokens: int
    replicas: int | None = None  # the replicas the pattern points to, when one shows
    pattern: str | None = None  # that pattern in words
    turn_lag: int | None = None  # multi-turn: the steady distance to the turn whose history was reused
    cause: str | None = None  # "rotation" | "expiry" | "routing": what the pattern points to
    # Idle time before a request (since the end of the last one that left what it should reuse):
    # the shortest before a miss and the longest before a hit, where known
    miss_idle_min_s: float | None = None
    hit_idle_max_s: float | None = None


@dataclass(frozen=True)
class NoReuse(_Saved):
    """No request reused what it should have. Where each came after an idle gap, the shortest
    (`miss_idle_min_s`); where the server showed that its cache works, the longest gap before a
    request it served the prompts' shared start to (`hit_idle_max_s`: the chat template, reused
    between requests sent close together) and the shortest quiet after which even that start was
    lost (`lost_idle_min_s`). `cause` "expiry" when both set the misses apart (see no_reuse);
    None when the evidence cannot tell a cache that is off from one that expires."""

    requests: int
    expected_tokens: int
    miss_idle_min_s: float | None = None
    hit_idle_max_s: float | None = None
    lost_idle_min_s: float | None = None
    start_hits: int | None = None  # requests the server reported the shared start cached for
    cause: str | None = None  # "expiry": what the idle gaps point to, when they do


@dataclass(frozen=True)
class Leakage(_Saved):
    requests: int
    of_requests: int
    max_excess_tokens: float
    request_id: str
    turn: int | None = None


@dataclass(frozen=True)
class TtftGain(_Saved):
    """Shared prefix: median TTFT against the same lengths with nothing shared."""

    baseline: str | None = None
    baseline_ttft_s: float | None = None
    ttft_s: float | None = None
    speedup: float | None = None  # baseline TTFT ÷ TTFT
    ttft_saved: float | None = None  # 1 − TTFT ÷ baseline TTFT


@dataclass(frozen=True)
class TurnRow(_Saved):
    """Multi-turn: medians over one turn index's successful requests."""

    turn: int
    n_ok: int
    n_failed: int
    ttft_s: float | None = None
    ttftc_s: float | None = None  # (results 1.26) time to first tool call, where every answer called
    prefill_tps: float | None = None
    e2e_s: float | None = None
    prompt_tokens: float | None = None
    new_tokens: float | None = None
    cached_tokens: float | None = None
    expected_cached_tokens: float | None = None
    cold_ttft_s: float | None = None  # --cold-baseline: the same length with nothing shared
    ttft_gain: float | None = None  # cold_ttft_s ÷ ttft_s
    unavailable: dict[str, str] = field(default_factory=dict)  # metric → why this turn has no figure


@dataclass(frozen=True)
class WorkloadFigures(_Saved):
    """A workload case's own figures (see the module docstring)."""

    kind: str
    spec: WorkloadSpec = field(default_factory=WorkloadSpec)
    reuse: Reuse = field(default_factory=Reuse)
    granularity_tokens: int = 1
    eviction: Eviction | None = None
    no_reuse: NoReuse | None = None
    partial_reuse: PartialReuse | None = None
    leakage: Leakage | None = None
    ttft_gain: TtftGain | None = None
    turns: list[TurnRow] = field(default_factory=list)
    conversations_cut: int | None = None


def case_figures(
    kind: str,
    spec: WorkloadSpec,
    measured: list[Tagged],
    controls: Sequence[Tagged] = (),
    values: PerRequest | None = None,
    ahead: Sequence[Tagged] = (),
) -> WorkloadFigures:
    """Figures of one workload case from its measured requests (failed included: they are
    counted, never used for reuse) and its cold controls (multi-turn --cold-baseline: same
    lengths, nothing shared; judged for leakage, and set beside each turn's TTFT). `values`:
    each request's metrics as the builder computed them, with the case's verdicts (a request
    missing from it is computed here, by its own evidence). `ahead`: the case's warmups (a shared
    prefix sent ahead, a conversation's opening): when they ended starts the idle time of the
    first requests that reuse them."""
    ok = [r for r in measured if r.ok]
    granularity = cache_granularity(ok)
    judged = reuse_verdicts(ok, granularity)
    short = [r for r, fine in judged if not fine]
    partial = partial_reuse(ok, judged, granularity, [r for r in ahead if r.ok])
    missed_all = partial is None and bool(short) and len(short) == len(judged)  # else some hit: eviction
    turns = kind == "multi_turn"
    return WorkloadFigures(
        kind,
        spec,
        reuse(ok),
        granularity,
        eviction=eviction(ok, short, len(judged)) if partial is None and short and not missed_all else None,
        no_reuse=no_reuse(ok, short, [r for r in ahead if r.ok]) if missed_all else None,
        partial_reuse=partial,
        leakage=leakage(ok + [r for r in controls if r.ok]),
        turns=turn_figures(measured, controls, values) if turns else [],
        conversations_cut=conversations_cut(measured, spec.turns) if turns else None,
    )


def cache_granularity(records: Iterable[Tagged]) -> int:
    """The greatest common divisor of the non-zero cached counts (1 when none), at most 256."""
    values = [r.cached_tokens or 0 for r in records if r.cached_tokens]
    return min(math.gcd(*values), MAX_GRANULARITY) if values else 1


def reuse(ok: list[Tagged]) -> Reuse:
    """Expected and reported reuse over the requests where both are known."""
    known = [r for r in ok if r.expected_cached_tokens is not None and r.cached_tokens is not None and r.prompt_tokens]
    prompt = sum(r.prompt_tokens or 0 for r in known)
    expected = sum(_expected(r) for r in known)
    reported = sum(r.cached_tokens or 0 for r in known)
    return Reuse(
        requests=len(known),
        unreported=sum(1 for r in ok if r.cached_tokens is None),
        prompt_tokens=prompt,
        expected_tokens=expected,
        reported_tokens=reported,
        expected_hit_rate=expected / prompt if prompt else None,
        reported_hit_rate=reported / prompt if prompt else None,
    )


def _expected(rec: Tagged) -> int:
    return rec.expected_cached_tokens or 0


def _shortfall(rec: Tagged) -> int:
    """Expected cached tokens the server did not report as cached."""
    return _expected(rec) - (rec.cached_tokens or 0)


def _tolerance(rec: Tagged, granularity: int) -> float:
    if granularity > 1:
        return granularity  # a block-granular count rounds down by less than one block
    return max(1.0, TOKEN_TOLERANCE * _expected(rec))


def reuse_verdicts(ok: list[Tagged], granularity: int) -> list[tuple[Tagged, bool]]:
    """(request, reused what was expected) for every request expected to reuse something."""
    return [
        (r, _shortfall(r) < _tolerance(r, granularity))
        for r in sorted(ok, key=lambda r: r.sent_mono_s)
        if r.expected_cached_tokens and r.cached_tokens is not None
    ]


INTERMITTENT_SHARE = 0.25  # hits among the requests after the first miss: partial, not eviction
# ...unless reuse had worked for this many requests in a row first: a router without affinity
# misses from the start, a cache that filled up misses once the histories outgrew it, and hits
# again when a conversation ends and frees room (the truth log's cache_lost_tokens shows it)
EVICTION_LEAD_MIN, EVICTION_LEAD_SHARE = 3, 0.5


def baseline_cached(ok: list[Tagged]) -> float:
    """The most a request with nothing to reuse reported cached (the chat template's blocks)."""
    cold = [r.cached_tokens for r in ok if not r.expected_cached_tokens and r.cached_tokens is not None]
    return float(max(cold)) if cold else 0.0


def partial_reuse(
    ok: list[Tagged],
    judged: list[tuple[Tagged, bool]],
    granularity: int,
    ahead: Sequence[Tagged] = (),
) -> PartialReuse | None:
    """The partial-reuse finding, or None when reuse was all or nothing, or hits then misses
    (eviction's) that no cache lifetime explains: misses that all came after longer idle gaps
    than any hit are expiry, whatever their order."""
    base = baseline_cached(ok)
    short = [r for r, fine in judged if not fine]
    some = [r for r in short if (r.cached_tokens or 0) > base]
    hits = len(judged) - len(short)
    if not short or (not hits and not some):
        return None
    idle = idle_split([*ahead, *ok], judged)
    expired = idle is not None and past_lifetime(*idle)
    first_miss = next(i for i, (_, fine) in enumerate(judged) if not fine)
    after = [fine for _, fine in judged[first_miss + 1 :]]
    if not expired and hits and (not after or sum(after) < INTERMITTENT_SHARE * len(after)):
        return None  # reuse worked, then (mostly) stopped: eviction's finding
    if not expired and first_miss >= max(EVICTION_LEAD_MIN, EVICTION_LEAD_SHARE * len(judged)):
        return None  # reuse worked for most, then fell short: eviction, even if it came back later
    fraction = hits / len(judged)
    lag = steady_turn_lag(ok, some, granularity)
    replicas, cause, pattern = _reuse_pattern(fraction, lag, idle if expired else None)
    return PartialReuse(
        requests=len(judged),
        hit_requests=hits,
        partial_requests=len(some),
        missed_requests=len(short) - len(some),
        hit_fraction=fraction,
        expected_tokens=sum(_expected(r) for r, _ in judged),
        reported_tokens=sum(r.cached_tokens or 0 for r, _ in judged),
        replicas=replicas,
        pattern=pattern,
        turn_lag=lag if cause == "rotation" else None,
        cause=cause,
        miss_idle_min_s=idle[0] if idle is not None else None,
        hit_idle_max_s=idle[1] if idle is not None else None,
    )


def _reuse_pattern(
    fraction: float, lag: int | None, expired: tuple[float, float] | None
) -> tuple[int | None, str | None, str | None]:
    """(replicas, cause, pattern in words) of partial reuse, where one shows: a steady turn lag
    (rotation), misses only after longer idle gaps than any hit (`expired`: expiry), or a hit
    fraction of about one in N (routing)."""
    if lag is not None and lag >= 2:
        return (
            lag,
            "rotation",
            f"the turns that reused part of their history reused the turn {lag} before, not the last one: "
            f"requests rotate over {lag} replicas (round robin), each with its own cache",
        )
    if expired is not None:
        return (
            None,
            "expiry",
            f"every miss came after at least {expired[0]:.2f} s idle, every hit after at most {expired[1]:.2f} s: "
            "the server's cache lets entries expire after a lifetime between the two, not routing",
        )
    if 0 < fraction <= 0.75:
        replicas = max(2, round(1 / fraction))
        return (
            replicas,
            "routing",
            f"{fraction:.0%} of requests found their history: consistent with routing over about "
            f"{replicas} replicas without cache affinity, each with its own cache",
        )
    return None, None, None


def no_reuse(ok: list[Tagged], short: list[Tagged], ahead: Sequence[Tagged] = ()) -> NoReuse:
    """Every request missed what it should have reused. With no hit to compare with, the cause
    is weighed on what else shows the cache at work: the start every prompt shares (the chat
    template) reported cached when a request followed another closely, and lost after a quiet as
    long as the history's misses waited. Both together, with every miss after a longer gap than
    any such hit, point to a cache lifetime (expiry); a server that reported nothing cached at
    all may simply have its cache off, and the finding says it cannot tell the two apart."""
    requests, expected = len(short), sum(_expected(r) for r in short)
    sent = sorted([*ahead, *ok], key=lambda r: r.sent_mono_s)
    idle = IdleTimes(sent)
    gaps = [gap for r in short if (gap := idle.before(r)) is not None]
    if len(gaps) < EXPIRY_MIN_MISSES:
        return NoReuse(requests, expected)
    start = start_reuse(sent)
    if start is None:
        return NoReuse(requests, expected, miss_idle_min_s=min(gaps))
    hits, hit_max, lost_min = start
    expiry = lost_min is not None and all(past_lifetime(gap, hit_max) for gap in (min(gaps), lost_min))
    return NoReuse(
        requests,
        expected,
        miss_idle_min_s=min(gaps),
        hit_idle_max_s=hit_max,
        lost_idle_min_s=lost_min,
        start_hits=hits,
        cause="expiry" if expiry else None,
    )


def eviction(ok: list[Tagged], short: list[Tagged], judged: int) -> Eviction:
    """Where reuse first fell short: that request's turn (multi-turn), how far into the case,
    how many requests were in flight, and how many history tokens the conversations held."""
    first = short[0]
    start = min(r.sent_mono_s for r in ok)
    t = first.sent_mono_s
    in_flight = sum(1 for r in ok if r.sent_mono_s <= t < r.sent_mono_s + (r.end_s or 0.0))
    return Eviction(
        request_id=first.request_id,
        turn=first.turn,
        conversation=first.conversation,
        after_s=t - start,
        in_flight=in_flight,
        held_tokens=_held_tokens(ok, t),
        expected_tokens=_expected(first),
        reported_tokens=first.cached_tokens or 0,
        requests=len(short),
        of_requests=judged,
        lost_tokens=sum(_shortfall(r) for r in short),
    )


def _held_tokens(ok: list[Tagged], t: float) -> int:
    """Prompt tokens of the latest request of each conversation (or of every request, outside
    a conversation) sent before t: what a cache would have had to hold to serve all of them."""
    latest: dict[int | str, Tagged] = {}
    for r in ok:
        if r.sent_mono_s < t and r.prompt_tokens:
            key = r.conversation if r.conversation is not None else r.request_id
            if key not in latest or latest[key].sent_mono_s < r.sent_mono_s:
                latest[key] = r
    return sum(r.prompt_tokens or 0 for r in latest.values())


def leakage(ok: list[Tagged]) -> Leakage | None:
    """Requests that report more cached tokens than prompt − unique: something no request of
    this run sent before (another conversation's text, a broken nonce) was served from cache."""
    leaks = []
    for r in ok:
        if r.unique_tokens is None or r.cached_tokens is None or r.prompt_tokens is None:
            continue
        shareable = r.prompt_tokens - r.unique_tokens
        excess = r.cached_tokens - shareable
        if excess > max(1.0, LEAK_TOLERANCE * r.unique_tokens):
            leaks.append((r, excess))
    if not leaks:
        return None
    first = min(leaks, key=lambda item: item[0].sent_mono_s)[0]
    return Leakage(len(leaks), len(ok), max(excess for _, excess in leaks), first.request_id, first.turn)


TURN_METRICS = ("ttft_s", "ttftc_s", "prefill_tps", "e2e_s")
_TURN_FIGURES = tuple(m for m in registry.of_level(registry.TURN))


def turn_figures(
    measured: list[Tagged], controls: Iterable[Tagged] = (), values: PerRequest | None = None
) -> list[TurnRow]:
    """Per turn index: requests, failures, and the registry's TURN metrics over the successful
    ones (medians; a per-request metric only where every one of them has it, with the reason
    where not); with cold controls, their median TTFT and the turn's gain against it."""
    values = values if values is not None else {}
    cold = [r for r in controls if r.ok]
    out = []
    for index in sorted({r.turn for r in measured if r.turn is not None}):
        at = [r for r in measured if r.turn == index]
        ok = [r for r in at if r.ok]
        sample = TurnSample(
            ok=ok,
            values=[values.get(r.request_id) or registry.request_metrics(r) for r in ok],
            cold_ttft=[
                (values.get(r.request_id) or registry.request_metrics(r))["ttft_s"] for r in cold if r.turn == index
            ],
        )
        found = registry.compute(registry.TURN, sample, {})
        figures = {m.key: found[m.name] for m in _TURN_FIGURES}
        out.append(
            TurnRow(
                turn=index,
                n_ok=len(ok),
                n_failed=len(at) - len(ok),
                **{key: None if isinstance(v, Unavailable) else v for key, v in figures.items()},
                unavailable={
                    key: v.message
                    for key in TURN_METRICS
                    if isinstance(v := figures[key], Unavailable) and v is not NONE_OK and v.code != NO_TOOL_CALL
                },
            )
        )
    return out


def withhold_turns(figures: WorkloadFigures, withheld: dict[str, str]) -> WorkloadFigures:
    """The figures with no turn showing a figure its case withholds (a buffered stream, a TTFT
    trend): the builder calls this with the case's reasons once the case is final. New rows:
    the figures given stay as they were."""
    return replace(figures, turns=[_turn_withheld(row, withheld) for row in figures.turns])


def _turn_withheld(row: TurnRow, withheld: dict[str, str]) -> TurnRow:
    gone = {name: withheld[name] for name in TURN_METRICS if name in withheld}
    if not gone:
        return row
    cleared: dict[str, None] = dict.fromkeys(gone)
    if "ttft_s" in gone:
        cleared["ttft_gain"] = None  # a gain over a TTFT not shown
    return replace(row, **cleared, unavailable={**row.unavailable, **gone})  # type: ignore[arg-type]


def conversations_cut(measured: list[Tagged], turns: int | None) -> int:
    """Conversations that ended early: a failed turn ends its conversation."""
    return len({r.conversation for r in measured if not r.ok and r.conversation is not None and r.turn != turns})


class _HasMedian(Protocol):
    @property
    def median(self) -> float: ...


class GainCase(Protocol):
    """What ttft_gains reads of a case (results.CaseResult, which measure/ does not import)."""

    @property
    def label(self) -> str: ...
    @property
    def pp(self) -> int: ...
    @property
    def tg(self) -> int: ...
    @property
    def depth(self) -> int: ...
    @property
    def concurrency(self) -> int | None: ...
    @property
    def endpoint(self) -> str | None: ...
    @property
    def workload(self) -> WorkloadFigures | None: ...
    @property
    def summary(self) -> Mapping[str, _HasMedian | None]: ...


def _known(value: float | None) -> float | Unavailable:
    """A median as a metric's value; none is Unavailable."""
    return value if value is not None else NO_MEDIAN


def ttft_gains(cases: Sequence[GainCase]) -> dict[str, TtftGain]:
    """Shared prefix: each shared case's TTFT gain (by label) against the case with the same
    total prompt, output, concurrency and endpoint and nothing shared (fraction 0). `cases`:
    the run's cases as judged; the builder puts each gain in its case's workload figures."""
    baselines = {_gain_key(c): c for c in cases if _shared_fraction(c) == 0.0}
    gains = {}
    for case in cases:
        if not _shared_fraction(case):
            continue
        base = baselines.get(_gain_key(case))
        baseline_ttft, ttft = _ttft(base), _ttft(case)
        given = {"gain_baseline_ttft_s": _known(baseline_ttft), "gain_ttft_s": _known(ttft)}
        values = registry.compute(registry.GAIN, NOTHING, given)
        speedup, saved = values["ttft_speedup"], values["ttft_saved"]
        gains[case.label] = TtftGain(
            baseline=base.label if base else None,
            baseline_ttft_s=baseline_ttft,
            ttft_s=ttft,
            speedup=None if isinstance(speedup, Unavailable) else speedup,
            ttft_saved=None if isinstance(saved, Unavailable) else saved,
        )
    return gains


def _shared_fraction(case: GainCase) -> float | None:
    if case.workload is None or case.workload.kind != "shared_prefix":
        return None
    return case.workload.spec.fraction


def _gain_key(case: GainCase) -> tuple[int, int, int | None, str | None]:
    return (case.pp + (case.depth or 0), case.tg, case.concurrency, case.endpoint)


def _ttft(case: GainCase | None) -> float | None:
    summary = case.summary.get("ttft_s") if case is not None else None
    return summary.median if summary is not None else None
