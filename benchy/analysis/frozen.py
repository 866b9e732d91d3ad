"""The analysis's result, frozen once made: checks, reports and the CLI read it, none writes it.

Why: figures that a later stage changes in place (a withheld summary, a warning set after the
fact) make a report that no longer matches the saved file, and a rebuild that no longer matches
the run. The run and its cases are given a subclass of their own whose attribute writes raise
(FrozenResult); `dataclasses.replace` still makes a new, writable copy, as reading a saved
file does. The dicts inside are not wrapped (their JSON writer wants plain dicts): the house
test (tests/test_house.py) forbids writes into results outside the analysis in the code itself.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar

from benchy.results.types import CaseResult, RunResult

_FROZEN = "_frozen"


class FrozenResult(AttributeError):
    """A write into a result after the analysis made it."""


class _Frozen:
    __slots__ = ()
    _base: ClassVar[type]  # the result class it freezes
    __hash__ = None  # type: ignore[assignment]  # as the dataclass it stands for

    def __eq__(self, other: object) -> bool:
        """Equal to a writable result of the same fields (the dataclass's own __eq__ wants the same class)."""
        if not isinstance(other, self._base):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self._base))

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get(_FROZEN):
            raise FrozenResult(f"{type(self).__name__}.{name}: a result is not changed after the analysis made it")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenResult(f"{type(self).__name__}.{name}: a result is not changed after the analysis made it")


class FrozenRunResult(RunResult, _Frozen):
    """A RunResult that refuses writes (made by freeze)."""

    __slots__ = ()  # the layout of a RunResult: its class can be swapped
    _base = RunResult
    __eq__ = _Frozen.__eq__  # before the dataclass's, which wants the same class
    __hash__ = None


class FrozenCaseResult(CaseResult, _Frozen):
    """A CaseResult that refuses writes (made by freeze)."""

    __slots__ = ()
    _base = CaseResult
    __eq__ = _Frozen.__eq__
    __hash__ = None


def freeze(run: RunResult) -> RunResult:
    """`run` and its cases made read-only, in place; returns `run`."""
    for case in run.cases:
        case.__class__ = FrozenCaseResult
        case.__dict__[_FROZEN] = True
    run.__class__ = FrozenRunResult
    run.__dict__[_FROZEN] = True
    return run
