"""Issue 51 item 2, for the checks of server.py, hardware.py, drift.py, drift_across.py and
saturation.py: each trap is one class (checks/check.py) whose `detect` finds and whose `words`
words, so what a check found is typed before it is said. Read from the registry itself, so a
function registered again in one of these modules fails here."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing

from benchy.checks import (
    drift,
    drift_across,
    hardware,
    saturation,
    server,
    warnings,  # noqa: F401  (registers every check, in order)
)
from benchy.checks import registry as checks_registry
from benchy.checks.check import Check, ManyCheck, RunLevelCheck

MODULES = (server, hardware, drift, drift_across, saturation)
NAMES = {module.__name__ for module in MODULES}
SHAPES = (Check, ManyCheck, RunLevelCheck)


def _module_of(registered: object) -> str:
    """The module that defines a registered check: an instance's class's, or a function's own."""
    return str(getattr(registered, "__module__", "") if inspect.isfunction(registered) else type(registered).__module__)


def _ours(registered: typing.Iterable[object]) -> list[object]:
    return [c for c in registered if _module_of(c) in NAMES]


def test_every_check_of_these_modules_is_registered_as_a_check_class() -> None:
    run_level, case_level = _ours(checks_registry._RUN_CHECKS), _ours(checks_registry._CASE_CHECKS)
    # every module registers something: the test cannot pass by finding none of them
    assert {_module_of(c) for c in (*run_level, *case_level)} == NAMES
    functions = [
        f"{_module_of(c)}.{getattr(c, '__name__', c)}" for c in (*run_level, *case_level) if not isinstance(c, SHAPES)
    ]
    assert functions == [], f"registered as functions, not Check classes: {functions}"
    assert all(isinstance(c, RunLevelCheck) for c in run_level)
    assert all(isinstance(c, (Check, ManyCheck)) for c in case_level)


def test_each_check_s_registered_name_is_its_instance() -> None:
    """warnings.py registers them by their old names: each name is the module's instance."""
    for module in MODULES:
        for name, value in vars(module).items():
            if isinstance(value, SHAPES):
                assert type(value).__module__ == module.__name__ and not name.startswith("_"), name
                assert value.severity == value.code.rule.severity


def _found_type(cls: type) -> type:
    """The `Found` a check class was declared with (Check[Found] and its kin)."""
    (found,) = [typing.get_args(base)[0] for base in cls.__orig_bases__ if typing.get_origin(base) in SHAPES]  # type: ignore[attr-defined]
    assert isinstance(found, type)
    return found


def test_what_each_check_finds_is_a_frozen_dataclass() -> None:
    classes = {type(c) for c in (*_ours(checks_registry._RUN_CHECKS), *_ours(checks_registry._CASE_CHECKS))}
    assert len(classes) >= 13  # server 5, hardware 5, drift 1, drift_across 1, saturation 2 (queueing's is not ours)
    for cls in classes:
        found = _found_type(cls)
        assert dataclasses.is_dataclass(found) and found.__dataclass_params__.frozen, (cls.__name__, found)  # type: ignore[attr-defined]


def test_detect_formats_no_words() -> None:
    """`detect` returns figures; only `words` makes strings of them (no f-string, no format)."""
    for module in MODULES:
        tree = ast.parse(inspect.getsource(module))
        detects = [
            node
            for cls in tree.body
            if isinstance(cls, ast.ClassDef)
            for node in cls.body
            if isinstance(node, ast.FunctionDef) and node.name == "detect"
        ]
        assert detects, module.__name__
        for fn in detects:
            formatted = [
                n
                for n in ast.walk(fn)
                if isinstance(n, ast.JoinedStr)
                or (isinstance(n, ast.Attribute) and n.attr in ("format", "join"))
                or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod))
            ]
            assert not formatted, f"{module.__name__}: a detect formats words (line {formatted[0].lineno})"
