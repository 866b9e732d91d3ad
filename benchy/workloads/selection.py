"""What the command line asks to measure (CaseSelection, and WorkloadSelection for the
cache-aware workloads' flags): plain data that scenario.select_cases and dataset_cases.apply
turn into cases. A module of its own so that both can name it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

from benchy.workloads.case import ScenarioError


@dataclass(frozen=True)
class WorkloadSelection:
    """The flags of the cache-aware workloads (benchy/workloads): --turns (with --first-tokens,
    --think-time, --keep-reasoning), --shared-prefix (with --groups) or --trace (with --speed)."""

    turns: int | None = None
    first_tokens: int | None = None
    think_time: str | None = None
    keep_reasoning: bool = False
    cold_baseline: bool = False
    shared_prefix: tuple[float, ...] = ()
    groups: int | None = None
    trace: str | None = None
    speed: float | None = None
    max_gap: float | None = None  # --max-gap (an agent trace's idle gaps capped)
    subagents: int | None = None  # --subagents (child agents forked each turn)

    def chosen(self) -> list[str]:
        given = (("--turns", self.turns), ("--shared-prefix", self.shared_prefix), ("--trace", self.trace))
        return [flag for flag, value in given if value]

    def check(self) -> None:
        """ScenarioError for flags that disagree (one workload at a time, each option with its own)."""
        chosen = self.chosen()
        if len(chosen) > 1:
            raise ScenarioError(f"{chosen[0]} and {chosen[1]} cannot be combined: each is its own workload")
        needs = (
            ("--first-tokens", self.first_tokens, self.turns, "--turns"),
            ("--think-time", self.think_time, self.turns, "--turns"),
            ("--keep-reasoning", self.keep_reasoning, self.turns, "--turns"),
            ("--cold-baseline", self.cold_baseline, self.turns, "--turns"),
            ("--subagents", self.subagents, self.turns, "--turns"),
            ("--groups", self.groups, self.shared_prefix, "--shared-prefix"),
            ("--speed", self.speed, self.trace, "--trace"),
            ("--max-gap", self.max_gap is not None, self.trace, "--trace"),
        )
        for flag, value, owner, owner_flag in needs:
            if value and not owner:
                raise ScenarioError(f"{flag} needs {owner_flag}")


@dataclass(frozen=True)
class CaseSelection:
    """What the command line asks to measure: scenarios, sweep flags and arrival rates."""

    scenarios: tuple[str, ...] = ()  # --scenario: shipped names or .toml files
    pp: tuple[int, ...] = ()
    tg: tuple[int, ...] = ()
    concurrency: tuple[int, ...] = ()
    depth: tuple[int, ...] = ()
    depth_mode: str | None = None  # None: cold, or each scenario's own
    rate: tuple[float, ...] = ()  # --rate: open-loop cases in place of the closed-loop ones
    workload: WorkloadSelection = WorkloadSelection()  # --turns, --shared-prefix, --trace
