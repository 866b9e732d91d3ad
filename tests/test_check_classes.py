"""Issue 51 item 2: the checks written as classes (checks/check.py) detect apart from their words.

A check class's `detect` is a pure function of a case (or the run) returning a frozen record of
what it found, and `words` makes the warning of it; the modules converted so far register only
such instances, and a real run's saved warnings are exactly those words of those findings.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import statistics
from importlib import import_module
from typing import get_args

from benchy import outcome
from benchy.checks import outputs, warnings
from benchy.checks.check import Check, ManyCheck, RunLevelCheck
from benchy.results.types import CaseResult, RunResult
from benchy.results.view import RunView
from tests.conftest import run_benchy_here

# The topic modules of checks/ whose checks are classes; the rest are converted in turn.
CLASSED = ("steady", "outputs", "tokens", "prompts", "sanity", "client", "client_bound")
CASE_KINDS = (Check, ManyCheck)
LOAD = ("--pp", "64", "--tg", "32", "--runs", "12")


def _registered(checks: tuple[object, ...], module: str) -> list[object]:
    return [c for c in checks if getattr(c, "__module__", None) == f"benchy.checks.{module}"]


def _classed_checks() -> list[object]:
    return [c for m in CLASSED for c in _registered((*warnings.RUN_CHECKS, *warnings.CASE_CHECKS), m)]


def test_the_classed_modules_register_check_instances_and_keep_no_check_function():
    """Every check these modules register is an instance of its kind (a case's Check or
    ManyCheck, a run's RunLevelCheck), and no function yielding warnings is left beside them."""
    for module in CLASSED:
        case_level = _registered(warnings.CASE_CHECKS, module)
        run_level = _registered(warnings.RUN_CHECKS, module)
        assert case_level or run_level, f"checks/{module}.py registers no check"
        assert [c for c in case_level if not isinstance(c, CASE_KINDS)] == [], module
        assert [c for c in run_level if not isinstance(c, RunLevelCheck)] == [], module
        functions = [
            name
            for name, fn in inspect.getmembers(import_module(f"benchy.checks.{module}"), inspect.isfunction)
            if fn.__module__ == f"benchy.checks.{module}" and "CheckWarning" in str(fn.__annotations__.get("return"))
        ]
        assert functions == [], f"checks/{module}.py still words warnings in functions: {functions}"


def test_each_check_class_finds_a_frozen_record():
    """What `detect` returns is a frozen dataclass: a finding that cannot be written into on its
    way to the words (Check[Found]'s Found, read off the class)."""
    for check in _classed_checks():
        base = next(b for b in type(check).__orig_bases__ if getattr(b, "__origin__", None))
        (found,) = get_args(base)
        assert dataclasses.is_dataclass(found) and found.__dataclass_params__.frozen, (type(check), found)


def test_a_real_run_s_warnings_are_the_words_of_what_each_check_detected(start_sim, tmp_path):
    """A sim run that fails some requests with HTTP 500, empties others (content: null) and ends
    the rest before the length asked: each classed check's detection, taken again from the
    saved results, is what the sim's truth log says happened, is the same when taken twice
    (pure), and the saved warnings of its code are exactly its words of it."""
    sim = start_sim(
        *("--fault", "http500:0.25", "--fault", "null_content:0.25", "--seed", "3"),
        *("--ignore-ignore-eos", "--natural-min", "4", "--natural-max", "10", "--prefill-tps", "50000"),
    )
    out = tmp_path / "run"
    ran = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), *LOAD)
    assert ran.returncode == outcome.EXIT_CHECK_FAILED, ran.stderr  # the failures are errors
    saved = json.loads((out / "results.json").read_text())
    run = RunResult.from_dict(saved)
    view = RunView.of(run)
    (case,) = run.cases
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    measured = [truth[r.request_id] for r in case.requests if not r.warmup]
    faults = [t.get("fault") for t in measured]
    assert faults.count("http500") and faults.count("null_content"), faults  # seeded: both occur

    errors = outputs.request_errors.detect(case, view)
    assert errors is not None and errors.errors == {"http_500": faults.count("http500")}
    empty = outputs.empty_output.detect(case, view)
    assert empty is not None and empty.requests == faults.count("null_content")
    short = outputs.output_length_mismatch.detect(case, view)
    made = [t["completion_tokens"] for t in measured if t.get("fault") is None]
    assert short is not None and short.requests == len(made) and short.delivered == int(statistics.median(made))
    assert (short.least, short.most) == (min(made), max(made)) and max(made) < 32
    assert short.finish_reasons == {"stop"}  # each ended at its natural length, by the sim's EOS

    said = [w.to_dict() for w in run.warnings]
    for check in _classed_checks():
        found, label = _found(check, case, view), None if isinstance(check, RunLevelCheck) else case.label
        assert found == _found(check, case, view), check  # pure: the same finding again
        words = [check.words(view if label is None else case, f).to_dict() for f in found]
        assert [w for w in said if w["code"] == check.code.value and w["case"] == label] == words, check


def _found(check: object, case: CaseResult, view: RunView) -> list[object]:
    """What a check of any kind detected, as a list."""
    if isinstance(check, RunLevelCheck):
        return list(check.detect(view))
    if isinstance(check, ManyCheck):
        return list(check.detect(case, view))
    assert isinstance(check, Check)
    found = check.detect(case, view)
    return [] if found is None else [found]
