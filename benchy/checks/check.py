"""The shape of a check as a class: its code, its detection and its words apart.

Why: a check function found a trap and worded it in one body, so what it found could only be
read in its message. A `Check` class detects (a pure function of the case and the run's
view, returning its typed finding or None) and words what it detected; calling it yields the
warning, so an instance registers where a check function does (checks/warnings.py), in the same
order, with the same output. checks/steady.py is the first written this way. A check that can
find several things in one case (one warning each) is a `ManyCheck`; one across cases, a
`RunLevelCheck`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import ClassVar, Generic, TypeVar

from benchy.results.types import CaseResult, CheckWarning
from benchy.results.verdicts.codes import Code
from benchy.results.view import RunView

Found = TypeVar("Found")


class Check(ABC, Generic[Found]):
    """One check of one case: `code`, `detect` and `words`."""

    code: ClassVar[Code]

    @property
    def severity(self) -> str:
        """Its code's rule's severity (verdicts/codes.py)."""
        return self.code.rule.severity

    @abstractmethod
    def detect(self, case: CaseResult, run: RunView) -> Found | None:
        """What the check found in the case (None: nothing to say); reads, never writes."""

    @abstractmethod
    def words(self, case: CaseResult, found: Found) -> CheckWarning:
        """The warning of what `detect` found."""

    def __call__(self, case: CaseResult, run: RunView) -> Iterator[CheckWarning]:
        found = self.detect(case, run)
        if found is not None:
            yield self.words(case, found)


class ManyCheck(ABC, Generic[Found]):
    """One check of one case that may find several things, one warning each."""

    code: ClassVar[Code]

    @property
    def severity(self) -> str:
        return self.code.rule.severity

    @abstractmethod
    def detect(self, case: CaseResult, run: RunView) -> Sequence[Found]:
        """What the check found in the case, in the order its warnings are given (empty: nothing)."""

    @abstractmethod
    def words(self, case: CaseResult, found: Found) -> CheckWarning:
        """The warning of one thing `detect` found."""

    def __call__(self, case: CaseResult, run: RunView) -> Iterator[CheckWarning]:
        for found in self.detect(case, run):
            yield self.words(case, found)


class RunLevelCheck(ABC, Generic[Found]):
    """One check across the run's cases (a trend over output lengths, a knee over rates)."""

    code: ClassVar[Code]

    @property
    def severity(self) -> str:
        return self.code.rule.severity

    @abstractmethod
    def detect(self, run: RunView) -> Sequence[Found]:
        """What the check found across the cases, in the order its warnings are given."""

    @abstractmethod
    def words(self, run: RunView, found: Found) -> CheckWarning:
        """The warning of one thing `detect` found."""

    def __call__(self, run: RunView) -> Iterator[CheckWarning]:
        for found in self.detect(run):
            yield self.words(run, found)
