"""The saturation note: requests of a case still in flight when its drain ran out (--duration,
then --drain; load/drain.py) were cut by benchy. They are no server failure (request_errors
leaves them out), but they say the server did not keep up with the load it was offered: the
figures of the requests that finished are those of a saturated server, and its queue is not
in them."""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.registry import WARNING, Code, Warning_
from benchy.measure.classify import DRAIN_CUT
from benchy.results.types import CaseResult, CheckWarning, RunResult
from benchy.results.verdicts.details import RequestCount


def saturated(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    cut = case.errors.get(DRAIN_CUT, 0)
    if not cut:
        return
    load = run.setup.load
    drain = None if load is None else load.drain_s if load.drain_s is not None else load.duration_s
    after = f"{drain:g} s after" if drain is not None else "after"
    yield Warning_(
        Code.SATURATED,
        WARNING,
        case.label,
        f"The server was saturated: {cut} of {case.n_ok + case.n_failed} requests were still in flight "
        f"{after} the case's --duration ended and were cut (--drain); they count as cut, not as "
        f"failed, and statistics cover the {case.n_ok} that finished.",
        "The offered load is above what the server sustains: lower --rate or --concurrency "
        "(a sweep finds where latency turns), or give a longer --drain to wait for the queue.",
        details=RequestCount(requests=cut),
    )
