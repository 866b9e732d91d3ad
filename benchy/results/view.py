"""What the checks read of a run: everything a RunResult holds but its warnings.

Why: the warnings are decided from the run's figures, so the value they are decided from cannot
already hold them. The analysis makes this view (results/build.run_view), the checks read it
(checks/registry.check), and the RunResult is then constructed once, from the view and its
warnings (`result`): no result is made and then made again with them. Saved results are read
back into a view too (`of`), so that compare and report check them by the same functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from benchy.results.types import CaseResult, CheckWarning, NotMeasured, RunResult, Setup, Stopped


@dataclass(frozen=True)
class RunView:
    """A run's figures and verdicts, read-only, before its warnings exist."""

    setup: Setup = field(default_factory=Setup)
    cases: list[CaseResult] = field(default_factory=list)
    partial: bool = False
    stopped: Stopped | None = None
    not_measured: list[NotMeasured] = field(default_factory=list)
    benchy_version: str | None = None
    prompt_nonce: bool | None = None
    # results/latency.find's finding, decided once by the analysis (None: read from disk, judged
    # again from the saved rows by latency.found_in)
    fixed_latency: tuple[Any, ...] | None = None

    @classmethod
    def of(cls, run: RunResult) -> RunView:
        """A made or saved run's view: its warnings left out, as they are what checks decide."""
        return cls(**{f.name: getattr(run, f.name) for f in fields(cls)})

    def result(self, warnings: list[CheckWarning]) -> RunResult:
        """The run's one RunResult: this view's values, with the warnings checked on it."""
        return RunResult(**{f.name: getattr(self, f.name) for f in fields(self)}, warnings=warnings)
