"""How a run ended, from its results alone: the exit code, and in plain words what was and was
not measured. The CLI prints these; they read saved results, so a test (or `benchy report`) can
judge any results.json the same way.

Exit codes (docs/exit-codes.md holds the same table for users):
  0   every planned case was measured and no check failed
  1   an error before anything was measured (server unusable, bad input, output folder in use)
  2   bad usage (an unknown flag, a value out of range)
  3   a check failed hard: an impossible rate, a case that lost most of its requests
  4   warnings under --strict (notes of severity info never count)
  5   stopped by --max-errors / --max-error-rate (what was measured is saved)
  6   stopped because the server is gone: --max-connect-failures requests in a row could not
      connect (what was measured is saved)
  130 interrupted by Ctrl-C or SIGTERM (what was measured is saved)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only read: the CLI imports this module before any result exists
    from benchy.results.types import CaseResult, RunResult

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CHECK_FAILED = 3
EXIT_STRICT_WARNINGS = 4
EXIT_TOO_MANY_ERRORS = 5
EXIT_SERVER_GONE = 6
EXIT_INTERRUPTED = 130

_EXIT_BY_STOP = {
    "SIGINT": EXIT_INTERRUPTED,
    "SIGTERM": EXIT_INTERRUPTED,
    "max-errors": EXIT_TOO_MANY_ERRORS,
    "max-error-rate": EXIT_TOO_MANY_ERRORS,
    "server-gone": EXIT_SERVER_GONE,
}


def exit_code(results: RunResult, strict: bool = False) -> int:
    """A stop outranks a failed check, which outranks --strict warnings."""
    stopped_by = results.stopped.by if results.stopped else None
    if stopped_by in _EXIT_BY_STOP:
        return _EXIT_BY_STOP[stopped_by]
    if results.partial and not results.cases:
        return EXIT_INTERRUPTED
    if any(w.severity == "error" for w in results.warnings):
        return EXIT_CHECK_FAILED
    if strict and any(w.severity != "info" for w in results.warnings):
        return EXIT_STRICT_WARNINGS
    return EXIT_INTERRUPTED if results.partial else EXIT_OK


def probe_exit_code(result: dict) -> int:
    """A cache probe fails when some length got no answer at all: it has no verdict."""
    return EXIT_CHECK_FAILED if any(e["n_ok"] == 0 for e in result["lengths"]) else EXIT_OK


def measured_lines(results: RunResult) -> list[str]:
    """For a run that did not finish: each case measured (and whether it was cut short), each
    case not measured and why. Empty for a complete run."""
    if not results.partial:
        return []
    lines = [f"measured: {_measured(case)}" for case in results.cases]
    if not lines:
        lines.append("measured: nothing (no measured request finished)")
    lines += [f"not measured: {item.case} ({item.reason})" for item in results.not_measured]
    return lines


def _measured(case: CaseResult) -> str:
    done = case.n_ok + case.n_failed
    planned = case.planned_requests
    counts = f"{done} of {planned} requests" if planned else f"{done} requests"
    if case.n_ok == 0:
        failed = ", all failed: no figure" if done else ""
    else:
        failed = f", {case.n_failed} failed" if case.n_failed else ""
    cut = "; cut short" if planned and done < planned else ""
    return f"{case.label} ({counts}{failed}{cut})"
