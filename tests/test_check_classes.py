"""Issue 51 item 2: every check is a class (checks/check.py) whose `detect` finds and whose
`words` words, over every module of checks/ at once (test_house holds that each registered
check is such an instance).

What a check detects is a frozen record of figures, found without a word formatted, and
a real run's saved warnings are exactly the words of what each check detected. The three
traps whose findings decide them in the analysis (results/findings.py: sse_buffering's
stream and trend parts, prefill_holds_queueing) are held to the same: their detection is the
finding's `found_in`, their words its `words`.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import pkgutil
import statistics
import types
import typing
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path

import benchy.checks
from benchy import outcome
from benchy.checks import outputs, warnings
from benchy.checks.check import Check, ManyCheck, RunLevelCheck
from benchy.results.types import CaseResult, CheckWarning, RunResult
from benchy.results.view import RunView
from tests.conftest import REPO_ROOT, run_benchy_here

SHAPES = (Check, ManyCheck, RunLevelCheck)
REGISTERED = (*warnings.RUN_CHECKS, *warnings.CASE_CHECKS)
MODULES = tuple(import_module(f"benchy.checks.{m.name}") for m in pkgutil.iter_modules(benchy.checks.__path__))
# The detecting halves of the checks whose findings decide them (results/findings.py).
FINDINGS = "benchy.results.findings"
LOAD = ("--pp", "64", "--tg", "32", "--runs", "12")


def _found_types(cls: type) -> tuple[object, ...]:
    """The `Found` a check class was declared with (Check[Found] and its kin), a union's members apart."""
    (found,) = [typing.get_args(b)[0] for b in getattr(cls, "__orig_bases__", ()) if typing.get_origin(b) in SHAPES]
    return typing.get_args(found) if isinstance(found, types.UnionType) else (found,)


def _not_frozen_records(classes: typing.Iterable[type]) -> list[str]:
    """Each check class whose Found is not a frozen dataclass of figures: a plain class, a
    mutable record, or a CheckWarning (words passed through as what was found)."""
    bad = []
    for cls in classes:
        for found in _found_types(cls):
            frozen = isinstance(found, type) and dataclasses.is_dataclass(found)
            frozen = frozen and found.__dataclass_params__.frozen
            if not frozen or found is CheckWarning:
                bad.append(f"{cls.__name__}: {getattr(found, '__name__', found)}")
    return bad


def test_what_every_check_detects_is_a_frozen_record():
    """Check[Found]'s Found, read off each registered check's class, is a frozen dataclass (or
    a union of them): what was found cannot be written into on its way to the words, and is
    figures, not a warning made in `detect`."""

    class Passed(Check[CheckWarning]):  # a check that finds its words (the traps' old shape)
        pass

    @dataclasses.dataclass
    class Loose:
        n: int

    class Mutable(RunLevelCheck[outputs.Empty | Loose]):
        pass

    assert _not_frozen_records([Passed, Mutable]) == ["Passed: CheckWarning", "Mutable: Loose"]
    assert len(REGISTERED) > 40 and _not_frozen_records(type(c) for c in REGISTERED) == []


def _detections(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef]]:
    """Each detecting method of a module: a class's `detect`, a finding's `found_in`."""
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name in ("detect", "found_in"):
                    yield f"{cls.name}.{fn.name}", fn


def _formatting(tree: ast.Module) -> list[str]:
    """The detecting methods that format a string: an f-string, .format, .join or %."""
    return [
        name
        for name, fn in _detections(tree)
        if any(
            isinstance(n, ast.JoinedStr)
            or (isinstance(n, ast.Attribute) and n.attr in ("format", "join"))
            or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod))
            for n in ast.walk(fn)
        )
    ]


def _source(module: str) -> ast.Module:
    return ast.parse((REPO_ROOT / Path(*module.split("."))).with_suffix(".py").read_text(encoding="utf-8"))


def test_no_detection_formats_words():
    """`detect` (and a finding's `found_in`) returns figures; only `words` makes strings of them."""
    worded = "class Worded:\n    def detect(self, case, run):\n        return f'{case} found'\n"
    joined = "class Joined:\n    def found_in(self, case):\n        return ', '.join(case)\n"
    assert _formatting(ast.parse(worded + joined)) == ["Worded.detect", "Joined.found_in"]
    detecting = {m.__name__: [name for name, _ in _detections(_source(m.__name__))] for m in MODULES}
    assert sum(map(len, detecting.values())) >= len({type(c) for c in REGISTERED})  # the rule holds of each
    found_in = ["Queued.found_in", "BufferedTrend.found_in", "BufferedStreams.found_in"]
    assert [name for name, _ in _detections(_source(FINDINGS))] == found_in
    assert {module: _formatting(_source(module)) for module in (*detecting, FINDINGS)} == dict.fromkeys(
        (*detecting, FINDINGS), []
    )


def test_no_check_module_words_a_warning_outside_a_check_class():
    """A function beside the classes that returns a warning would find and word in one body:
    only the registry's runner (registry.check) returns warnings, those the checks made."""
    wording = [
        f"{module.__name__}.{name}"
        for module in MODULES
        for name, fn in inspect.getmembers(module, inspect.isfunction)
        if fn.__module__ == module.__name__ and "CheckWarning" in str(fn.__annotations__.get("return"))
    ]
    assert wording == ["benchy.checks.registry.check"]


def test_every_registered_check_is_a_public_instance_of_its_class_s_module():
    """checks/warnings.py registers each check by a name: an instance its own module names."""
    for check in REGISTERED:
        home = import_module(type(check).__module__)
        assert [n for n, v in vars(home).items() if v is check and not n.startswith("_")], type(check)


def test_a_real_run_s_warnings_are_the_words_of_what_each_check_detected(start_sim, tmp_path):
    """A sim run that fails some requests with HTTP 500, empties others (content: null) and ends
    the rest before the length asked: the output checks' detection, taken again from the saved
    results, is what the sim's truth log says happened; every check's detection is the same
    when taken twice (pure); and the saved warnings of each code are exactly its checks' words
    of what they detected, in the order they are registered."""
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

    worded: dict[str, list[dict]] = {}
    for check in REGISTERED:  # run-level checks first, as registry.check runs them
        found = _found(check, case, view)
        assert found == _found(check, case, view), check  # pure: the same finding again
        said = [check.words(view if isinstance(check, RunLevelCheck) else case, f) for f in found]
        worded.setdefault(check.code.value, []).extend(w.to_dict() for w in said)
    assert {"request_errors", "empty_output", "output_length_mismatch"} <= {c for c, w in worded.items() if w}
    assert {code: [w for w in saved["warnings"] if w["code"] == code] for code in worded} == worded


def _found(check: object, case: CaseResult, view: RunView) -> list[object]:
    """What a check of any kind detected, as a list."""
    if isinstance(check, RunLevelCheck):
        return list(check.detect(view))
    if isinstance(check, ManyCheck):
        return list(check.detect(case, view))
    assert isinstance(check, Check)
    found = check.detect(case, view)
    return [] if found is None else [found]
