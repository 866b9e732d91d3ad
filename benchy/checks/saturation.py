"""The saturation note: requests of a case still in flight when its drain ran out (--duration,
then --drain; load/drain.py) were cut by benchy. They are no server failure (request_errors
leaves them out), but they say the server did not keep up with the load it was offered: the
figures of the requests that finished are those of a saturated server, and its queue is not
in them. And the knee of a rate sweep (results/knee.py): the highest rate the server kept up with."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.checks.check import Check, RunLevelCheck
from benchy.checks.registry import Code, Warning_
from benchy.measure.classify import DRAIN_CUT
from benchy.results.knee import KEPT_UP, Knee, knees
from benchy.results.types import CaseResult, CheckWarning, Evidence
from benchy.results.verdicts.details import RequestCount
from benchy.results.view import RunView


@dataclass(frozen=True)
class Cut:
    """Requests the drain cut, of those sent; those that finished; the drain applied, s (None: unknown)."""

    cut: int
    sent: int
    finished: int
    drain_s: float | None


class SaturatedCheck(Check[Cut]):
    code = Code.SATURATED

    def detect(self, case: CaseResult, run: RunView) -> Cut | None:
        cut = case.errors.get(DRAIN_CUT, 0)
        if not cut:
            return None
        load = run.setup.load
        # drain_s: the drain applied (load/drain.py); absent from a 1.26 file: then --duration was its default
        drain = None if load is None else load.drain_s if load.drain_s is not None else load.duration_s
        return Cut(cut, case.n_ok + case.n_failed, case.n_ok, drain)

    def words(self, case: CaseResult, found: Cut) -> CheckWarning:
        after = f"{found.drain_s:g} s after" if found.drain_s is not None else "after"
        return Warning_(
            Code.SATURATED,
            self.severity,
            case.label,
            f"The server was saturated: {found.cut} of {found.sent} requests were still in flight "
            f"{after} the case's --duration ended and were cut (--drain); they count as cut, not as "
            f"failed, and statistics cover the {found.finished} that finished.",
            "The offered load is above what the server sustains: lower --rate or --concurrency "
            "(a sweep finds where latency turns), or give a longer --drain to wait for the queue.",
            details=RequestCount(requests=found.cut),
        )


saturated = SaturatedCheck()  # registered by this name (checks/warnings.py)


def _at(case: CaseResult) -> str:
    """A rate case's figures in words: what completed, what failed, its median TTFT."""
    done = f"completed {case.request_rate:.2f}/s" if case.request_rate is not None else "no completion rate"
    cut = case.errors.get(DRAIN_CUT, 0)
    failed = f", {case.n_failed - cut} failed" if case.n_failed > cut else ""
    failed += f", {cut} of {case.n_ok + case.n_failed} cut by the drain" if cut else ""
    ttft = case.median("ttft_s")
    return done + failed + (f", TTFT p50 {ttft * 1000:,.0f} ms" if ttft is not None else "")


@dataclass(frozen=True)
class SweepKnee:
    """A rate sweep's shape (every case parameter but the rate) and its knee (results/knee.py)."""

    shape: str
    knee: Knee


class RateKneeCheck(RunLevelCheck[SweepKnee]):
    """Each rate sweep's knee, named in one line."""

    code = Code.RATE_KNEE

    def detect(self, run: RunView) -> Sequence[SweepKnee]:
        return [SweepKnee(shape, knee) for shape, knee in knees(run).items()]

    def words(self, run: RunView, found: SweepKnee) -> CheckWarning:
        k = found.knee
        if k.kept_up is not None and k.fell_behind is not None:
            said = (
                f"the server kept up to {k.kept_up.rate:g} requests/s ({_at(k.kept_up)}); at "
                f"{k.fell_behind.rate:g} requests/s it fell behind ({_at(k.fell_behind)})"
            )
            knee = k.kept_up.rate
        elif k.fell_behind is not None:
            said = f"the server fell behind already at the lowest rate, {k.fell_behind.rate:g}/s ({_at(k.fell_behind)})"
            knee = None
        else:
            assert k.kept_up is not None
            said = (
                f"the server kept up with every rate, up to {k.kept_up.rate:g}/s ({_at(k.kept_up)}): its knee is higher"
            )
            knee = None
        return Warning_(
            Code.RATE_KNEE,
            self.severity,
            None,
            f"Knee of {found.shape}: {said}.",
            f"Kept up: requests completed at {KEPT_UP:.0%} of the asked rate or more and none failed. Size a "
            "deployment below the knee; sweep finer around it for a closer figure.",
            evidence=(Evidence("knee_rate", knee, None, "requests/s"),),
        )


rate_knee = RateKneeCheck()  # registered by this name (checks/warnings.py)
