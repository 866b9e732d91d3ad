"""The one check mechanism: every check, in checks/warnings.py and checks/server.py alike, is a
function of saved results registered here, yielding typed CheckWarnings with their figures
(WarningDetails) and Evidence(observed, threshold, unit); `check(run)` runs them all, in the
order they were registered (checks/warnings.py registers every check, checks/server.py's in
its place: call check through it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
    RunResult,
    WarningDetails,
    scans_held,
)
from benchy.results.verdicts.codes import (  # noqa: F401  (the codes and severities are checks' words: re-exported)
    ERROR,
    INFO,
    SEVERITY_ORDER,
    WARNING,
    Code,
)


def Warning_(  # noqa: N802  (the name checks have always used)
    code: Code,
    severity: str,
    case: str | None,
    message: str,
    hint: str,
    metrics: tuple[str, ...] = (),
    withheld: tuple[str, ...] = (),
    details: dict | WarningDetails | None = None,
    evidence: tuple[Evidence, ...] = (),
) -> CheckWarning:
    """A CheckWarning; `metrics` it qualifies (the table marks them), `withheld` the metrics
    results.py made unavailable for the reason it reports, `details` the figures behind the
    message (a dict is read strictly: a figure WarningDetails does not name is a field someone
    forgot), `evidence` the observed figure against its threshold. A code outside the closed
    set, or a severity its rule does not allow, is a programming error: ValueError."""
    if not isinstance(code, Code) or not code.allows(severity):
        raise ValueError(f"warning {code!r} of severity {severity!r}: not a Code, or not its rule's severity")
    figures: WarningDetails = (
        details if isinstance(details, WarningDetails) else WarningDetails.from_dict(details or {}, strict=True)
    )
    return CheckWarning(code, severity, case, message, hint, list(metrics), list(withheld), figures, list(evidence))


CaseCheck = Callable[[CaseResult, RunResult], Iterable[CheckWarning]]
RunCheck = Callable[[RunResult], Iterable[CheckWarning]]
_CASE_CHECKS: list[CaseCheck] = []
_RUN_CHECKS: list[RunCheck] = []


def case_check(fn: CaseCheck) -> CaseCheck:
    _CASE_CHECKS.append(fn)
    return fn


def run_check(fn: RunCheck) -> RunCheck:
    """A check across cases (e.g. a TTFT trend across output lengths)."""
    _RUN_CHECKS.append(fn)
    return fn


def check(run: RunResult) -> list[CheckWarning]:
    """Every warning about `run`, errors first. Reads `run`, never writes into it."""
    with scans_held():  # each case's rows read once for all the checks (results/facts.py)
        found = [w for run_level in _RUN_CHECKS for w in run_level(run)]
        found += [w for case in run.cases for case_level in _CASE_CHECKS for w in case_level(case, run)]
    return sorted(found, key=lambda w: SEVERITY_ORDER.index(w.severity))
