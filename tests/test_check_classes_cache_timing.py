"""Issue 51 item 2: a check module written as classes stays so. Every check such a module
registers is a Check, ManyCheck or RunLevelCheck instance (its detection apart from its words),
and no `detect` formats a string: what a check found is typed, its words are `words`'.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable
from pathlib import Path

from benchy.checks import registry
from benchy.checks import warnings as _registered  # noqa: F401  (registers every check)
from benchy.checks.check import Check, ManyCheck, RunLevelCheck
from tests.conftest import REPO_ROOT

# The check modules written as classes (add a module here once its checks are all classes).
CLASS_MODULES = {
    "benchy.checks.cache",
    "benchy.checks.latency",
    "benchy.checks.queueing",
    "benchy.checks.steady",
    "benchy.checks.timing",
}
SHAPES = (Check, ManyCheck, RunLevelCheck)


def _home(check: object) -> str:
    """The module a registered check was written in: a function's, or an instance's class's."""
    return str(getattr(check, "__module__", type(check).__module__))


def _not_classes(checks: Iterable[object]) -> list[str]:
    """The registered checks of CLASS_MODULES that are not of a check class's shape."""
    return [
        f"{_home(c)}.{getattr(c, '__name__', c)}"
        for c in checks
        if _home(c) in CLASS_MODULES and not isinstance(c, SHAPES)
    ]


def test_every_check_of_a_class_module_is_registered_as_a_class_instance():
    registered = [*registry._RUN_CHECKS, *registry._CASE_CHECKS]
    # A function of one of these modules registered beside them is found (the test can fail).
    from benchy.checks import cache

    def cache_function_check(case, run):  # a stray function, as if written in checks/cache.py
        return iter(())

    cache_function_check.__module__ = cache.__name__
    assert _not_classes([*registered, cache_function_check]) == ["benchy.checks.cache.cache_function_check"]
    assert _not_classes(registered) == []
    # Each module named registers checks (else the rule above would hold of nothing).
    assert {_home(c) for c in registered} >= CLASS_MODULES


def _formatting_detects(module: str, root: Path = REPO_ROOT) -> list[str]:
    """`Class.detect` methods of `module` whose body formats a string (an f-string or .format)."""
    path = root / (module.replace(".", "/") + ".py")
    found = []
    for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "detect":
                formats = any(
                    isinstance(n, ast.JoinedStr)
                    or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "format")
                    for n in ast.walk(fn)
                )
                if formats:
                    found.append(f"{module}.{cls.name}.detect")
    return found


def test_a_class_module_s_detect_returns_what_it_found_not_words(tmp_path):
    bad = tmp_path / "benchy" / "checks" / "worded.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("class Worded:\n    def detect(self, case, run):\n        return f'{case} found'\n")
    assert _formatting_detects("benchy.checks.worded", tmp_path) == ["benchy.checks.worded.Worded.detect"]
    for module in CLASS_MODULES:
        importlib.import_module(module)  # each is a module of the package
        assert _formatting_detects(module) == [], module
