"""What several checks find, typed: the shapes their `detect` returns where more than one
module needs the same one (checks/check.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Share:
    """`requests` of `of` requests of a case showed the trap (the "n of m requests" of a message)."""

    requests: int
    of: int


@dataclass(frozen=True)
class FirstOf(Share):
    """A share, with the first such request's own account (a sentence the facts kept)."""

    first: str
