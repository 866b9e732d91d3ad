"""What a workload case is, before anything is sent: plain frozen data that a Case carries.

Kept free of the client and the load generator so that scenario.py can build and check these
from TOML or flags without importing anything heavy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchy.jsontypes import Saved


class WorkloadError(ValueError):
    """Bad workload input; the message is one line, fit for the user."""


THINK_KINDS = ("fixed", "exponential", "lognormal")
_THINK_ALIASES = {"fixed": "fixed", "exp": "exponential", "exponential": "exponential", "lognormal": "lognormal"}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*(ms|s)?\s*$", re.IGNORECASE)


def parse_seconds(text: str) -> float:
    """ "2", "2s", "500ms" → seconds."""
    match = _DURATION.match(text)
    if not match:
        raise WorkloadError(f"{text!r} is not a duration (e.g. 2, 2s, 500ms)")
    value = float(match.group(1))
    return value / 1000 if (match.group(2) or "s").lower() == "ms" else value


def _given(doc: str) -> Any:
    """A setting of one workload kind: left out of the file for the others."""
    return field(default=None, metadata={"doc": doc, "omit_none": True})


@dataclass(frozen=True)
class ThinkSpec(Saved):
    """Multi-turn think time (workloads/spec.ThinkTime): fixed, exponential or lognormal."""

    kind: str = "fixed"
    mean_s: float = 0.0
    sigma: float | None = None  # lognormal only


@dataclass(frozen=True)
class WorkloadSpec(Saved):
    """(1.12) A workload's settings as the case ran it (workloads/spec.py's spec()): multi-turn
    turns, think, first_tokens, keep_reasoning, cold_baseline; shared-prefix fraction, groups;
    trace path, speed, limit. Each kind sets its own.

    The one saved form of a workload's settings (results.json's case.workload.spec, capacity.json's
    setup.workload), made by each kind below from its own fields."""

    turns: int | None = _given("multi-turn: turns per conversation")
    think: ThinkSpec | None = _given("multi-turn: the pause before each next message")
    first_tokens: int | None = _given("multi-turn: the first message's tokens (null: pp)")
    keep_reasoning: bool | None = _given("multi-turn: earlier turns' reasoning sent back")
    cold_baseline: bool | None = _given("multi-turn: each turn's length again with nothing shared")
    fraction: float | None = _given("shared prefix: the share of the prompt shared")
    groups: int | None = _given("shared prefix: groups with a prefix of their own")
    path: str | None = _given("trace: the file replayed")
    speed: float | None = _given("trace: times faster than recorded")
    limit: int | None = _given("trace: only the first N requests")
    max_gap_s: float | None = _given("(1.26) trace: idle gaps capped at this many seconds (--max-gap)")
    subagents: int | None = _given("(1.26) multi-turn: child agents each turn forks (--subagents)")


@dataclass(frozen=True)
class ThinkTime:
    """The pause between an answer and the user's next message: fixed, or drawn (seeded) from
    an exponential or a lognormal distribution with mean `mean_s` (lognormal shape `sigma`)."""

    kind: str = "fixed"
    mean_s: float = 0.0
    sigma: float = 0.5

    @classmethod
    def parse(cls, spec: str | float | int) -> ThinkTime:
        """`2`, `2s`, `500ms` (fixed), `exp:2s` / `exponential:2`, `lognormal:2s` or
        `lognormal:2s:0.8` (mean, then sigma of the underlying normal)."""
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return cls._checked("fixed", float(spec), 0.5)
        if not isinstance(spec, str):
            raise WorkloadError(f"think time must be a number of seconds or a spec like exp:2s, got {spec!r}")
        parts = spec.split(":")
        kind = _THINK_ALIASES.get(parts[0].strip().lower()) if len(parts) > 1 else "fixed"
        if kind is None:
            raise WorkloadError(f"think time {spec!r}: unknown kind {parts[0]!r} (fixed, exp, lognormal)")
        values = parts[1:] if len(parts) > 1 else parts
        if len(values) > (2 if kind == "lognormal" else 1):
            raise WorkloadError(f"think time {spec!r}: too many parts")
        mean = parse_seconds(values[0])
        try:
            sigma = float(values[1]) if len(values) > 1 else 0.5
        except ValueError:
            raise WorkloadError(f"think time {spec!r}: sigma {values[1]!r} is not a number") from None
        return cls._checked(kind, mean, sigma)

    @classmethod
    def _checked(cls, kind: str, mean: float, sigma: float) -> ThinkTime:
        if not (math.isfinite(mean) and mean >= 0):
            raise WorkloadError(f"think time must be a finite number of seconds ≥ 0, got {mean!r}")
        if not (math.isfinite(sigma) and sigma > 0):
            raise WorkloadError(f"lognormal sigma must be positive, got {sigma!r}")
        return cls(kind, mean, sigma)

    def draws(self, seed: int) -> Iterator[float]:
        """An endless iterator of pauses (seconds), the same for the same seed."""
        rng = np.random.default_rng(seed)
        while True:
            if self.kind == "fixed" or self.mean_s == 0:
                yield self.mean_s
            elif self.kind == "exponential":
                yield float(rng.exponential(self.mean_s))
            else:  # lognormal with this mean: mu = ln(mean) - sigma^2 / 2
                yield float(rng.lognormal(math.log(self.mean_s) - self.sigma**2 / 2, self.sigma))

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"{self.mean_s:g} s"
        if self.kind == "exponential":
            return f"exponential, mean {self.mean_s:g} s"
        return f"lognormal, mean {self.mean_s:g} s, sigma {self.sigma:g}"

    def spec(self) -> ThinkSpec:
        return ThinkSpec(self.kind, self.mean_s, self.sigma if self.kind == "lognormal" else None)


@dataclass(frozen=True)
class MultiTurn:
    """U conversations (the case's concurrency) of `turns` turns; each user message is the case's
    pp tokens (the first one `first_tokens` when set), each answer the case's tg tokens."""

    kind = "multi_turn"
    turns: int = 4
    think: ThinkTime = ThinkTime()
    first_tokens: int | None = None
    keep_reasoning: bool = False  # send earlier turns' reasoning back (gpt-oss's format drops it)
    cold_baseline: bool = False  # after the conversations: each turn's length again, nothing shared
    subagents: int = 0  # --subagents: each turn but the last forks this many child agents (load/subagents.py)

    def label(self, pp: int, tg: int, concurrency: int) -> str:
        first = f" first {self.first_tokens}" if self.first_tokens else ""
        subs = f" sub{self.subagents}" if self.subagents else ""
        return f"multi-turn u{concurrency} x{self.turns}{subs} pp{pp}{first} tg{tg}"

    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(
            turns=self.turns,
            think=self.think.spec(),
            first_tokens=self.first_tokens,
            keep_reasoning=self.keep_reasoning,
            cold_baseline=self.cold_baseline,
            subagents=self.subagents or None,
        )


@dataclass(frozen=True)
class SharedPrefix:
    """`groups` groups, each with its own prefix of `prefix` tokens (the case's depth, sent
    ahead once per group), then a unique suffix (the case's pp) led by a nonce. fraction 0:
    the same total length with nothing shared, the baseline the others are set against."""

    kind = "shared_prefix"
    fraction: float = 0.0
    groups: int = 1

    def label(self, pp: int, tg: int, concurrency: int) -> str:
        c = f" c{concurrency}" if concurrency != 1 else ""
        return f"shared {self.fraction:.0%} of pp{pp} g{self.groups} tg{tg}{c}"

    def split(self, total: int) -> tuple[int, int]:
        """(prefix, suffix) tokens of a `total`-token prompt."""
        prefix = round(self.fraction * total)
        return prefix, total - prefix

    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(fraction=self.fraction, groups=self.groups)


@dataclass(frozen=True)
class TraceReplay:
    """A trace file replayed at its own times, `speed` times faster (2: twice the rate)."""

    kind = "trace"
    path: str = ""
    speed: float = 1.0
    limit: int | None = None  # replay only the first N requests
    max_gap_s: float | None = None  # --max-gap: an agent trace's idle gaps capped at this (None: its own)

    def label(self) -> str:
        name = self.path.replace("\\", "/").rsplit("/", 1)[-1]
        speed = f" x{self.speed:g}" if self.speed != 1 else ""
        return f"trace {name}{speed}"

    def spec(self) -> WorkloadSpec:
        return WorkloadSpec(path=self.path, speed=self.speed, limit=self.limit, max_gap_s=self.max_gap_s)


Workload = MultiTurn | SharedPrefix | TraceReplay
