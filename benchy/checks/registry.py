"""The one check mechanism: every check, in each topic module of checks/ alike, is an
instance of a class of checks/check.py (detect, then words) registered here, yielding typed CheckWarnings with their figures
(its code's class of details, results/verdicts/details.py) and Evidence(observed, threshold,
unit), made by Warning_ (results/verdicts/make.py); `check(run)` runs them all, in the order
they were registered (checks/warnings.py registers every check in its place: call check
through it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from benchy.results.types import CaseResult, CheckWarning, RunResult, scanned
from benchy.results.verdicts.codes import (  # noqa: F401  (the codes and severities are checks' words: re-exported)
    ERROR,
    INFO,
    SEVERITY_ORDER,
    WARNING,
    Code,
)
from benchy.results.verdicts.make import warning as Warning_  # noqa: F401, N812  (the name checks have always used)
from benchy.results.view import RunView

# What checks import from here besides what it defines (mypy --strict: re-exported on purpose).
__all__ = ["ERROR", "INFO", "SEVERITY_ORDER", "WARNING", "Code", "Warning_"]
__all__ += ["CaseCheck", "RunCheck", "case_check", "run_check", "check"]

CaseCheck = Callable[[CaseResult, RunView], Iterable[CheckWarning]]
RunCheck = Callable[[RunView], Iterable[CheckWarning]]
_CASE_CHECKS: list[CaseCheck] = []
_RUN_CHECKS: list[RunCheck] = []


def case_check(fn: CaseCheck) -> CaseCheck:
    _CASE_CHECKS.append(fn)
    return fn


def run_check(fn: RunCheck) -> RunCheck:
    """A check across cases (e.g. a TTFT trend across output lengths)."""
    _RUN_CHECKS.append(fn)
    return fn


def check(run: RunView | RunResult) -> list[CheckWarning]:
    """Every warning about `run`, errors first: a run's view before its RunResult exists (the
    analysis), or a made or saved RunResult (checked again: its own warnings are not read)."""
    if isinstance(run, RunResult):
        run = RunView.of(run)
    if any(case.scan is None for case in run.cases):  # made by hand: each case's rows read once for all
        run = replace(run, cases=[scanned(case) for case in run.cases])
    found = [w for run_level in _RUN_CHECKS for w in run_level(run)]
    found += [w for case in run.cases for case_level in _CASE_CHECKS for w in case_level(case, run)]
    return sorted(found, key=lambda w: SEVERITY_ORDER.index(w.severity))
