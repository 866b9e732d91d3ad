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
  130 interrupted by Ctrl-C (what was measured is saved)
  143 terminated by SIGTERM (what was measured is saved)
`benchy capacity` (its answer is found, 0, or one of these; capacity.json is saved either way):
  7   even the lowest load fails the SLO: no capacity
  8   every load passed up to --max: the capacity is at least that
  9   benchy itself fell behind before a failing load was found: the capacity is at least the
      highest passing load (client_overloaded rounds are no evidence about the server)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchy.jsontypes import JsonObject

if TYPE_CHECKING:  # only read: the CLI imports this module before any result exists
    from benchy.results.capacity import CapacityResult
    from benchy.results.types import CaseResult, RunResult

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CHECK_FAILED = 3
EXIT_STRICT_WARNINGS = 4
EXIT_TOO_MANY_ERRORS = 5
EXIT_SERVER_GONE = 6
EXIT_CAPACITY_NONE = 7
EXIT_CAPACITY_AT_LIMIT = 8
EXIT_CAPACITY_CLIENT_LIMITED = 9
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as shells and service managers expect (130: Ctrl-C)

_EXIT_BY_STOP = {
    "SIGINT": EXIT_INTERRUPTED,
    "SIGTERM": EXIT_TERMINATED,
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


_EXIT_BY_ANSWER = {
    "found": EXIT_OK,
    "none_pass": EXIT_CAPACITY_NONE,
    "all_pass": EXIT_CAPACITY_AT_LIMIT,
    "client_limited": EXIT_CAPACITY_CLIENT_LIMITED,
}


def capacity_exit_code(result: CapacityResult) -> int:
    """A stopped search exits as a stopped run does; else the answer's kind decides."""
    if result.stopped is not None:
        return _EXIT_BY_STOP.get(result.stopped.by, EXIT_INTERRUPTED)
    if result.answer is None:
        return EXIT_INTERRUPTED
    return _EXIT_BY_ANSWER[result.answer.kind]


def probe_exit_code(result: JsonObject) -> int:
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
