"""Whether a case's /metrics scrapes are of one counter series, and a counter's increase over
them as Prometheus' rate() counts it.

Why: a counter that falls was reset (the server restarted: a pod behind a stable address, a
crashed worker); the difference of the case's first and last scrapes then counts only part of
the case, or nothing, silently. rate() adds the value after each fall as the increase since the
reset; what the old process counted after the last scrape before it died is lost to everyone,
and the server view says how many resets it spans.

Behind one address several processes or replicas without shared metrics (API servers scaled
out, pods behind a Service, an L4 balancer) answer a scrape each for themselves: the values
fall and come back between scrapes, or a process label changes. No difference of two scrapes
is then the case's count, and the server view says what it covers instead of adding up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# Labels that name the process or machine that answered: one value per scrape, several between
# scrapes when several processes answer.
IDENTITY_LABELS = ("pid", "process", "instance", "pod", "hostname")
# A fall that the series climbs back over within this many scrapes is another process' value,
# not a reset: a restarted server does not redo all it had counted since it started in seconds.
RETURN_SCRAPES = 3


class Scrape(Protocol):
    @property
    def values(self) -> dict[str, float]: ...

    @property
    def identity(self) -> frozenset[tuple[str, str]]: ...


@dataclass(frozen=True)
class Series:
    """What the scrapes of a case are: `resets` falls of its counters (the most any counter
    showed), or `several`: why they are of several processes (None: one series)."""

    resets: int = 0
    several: str | None = None


def increase(values: Sequence[float]) -> tuple[float, int]:
    """(the increase over the values, the resets in it), as rate() counts: a fall is a reset,
    after which the value itself is the increase since."""
    total, resets = 0.0, 0
    for before, after in zip(values, values[1:], strict=False):
        if after < before:
            resets += 1
            total += after
        else:
            total += after - before
    return total, resets


def judge(scrapes: Sequence[Scrape], names: Sequence[str], cut: bool = True) -> Series:
    """One series (with its resets) or several processes, from the counters `names`. `cut`:
    the client saw requests cut or refused meanwhile. A restart cuts the requests in flight and
    refuses the next: counters that fell while none was are no restart of this server, whatever
    the values (a tiny model's server back in 0.3 s counted 927 tokens where the old one had
    1,371; two servers behind nginx answer 6,912 and 6,400)."""
    identities = {s.identity for s in scrapes if s.identity}
    if len(identities) > 1:
        labels = sorted({label for identity in identities for label, _ in identity})
        return Series(several=f"the scrapes name {len(identities)} different {'/'.join(labels)} labels")
    resets = 0
    for name in names:
        values = [s.values[name] for s in scrapes if name in s.values]
        falls, returns = _falls_and_returns(values)
        if falls >= 2 and returns:
            return Series(
                several=f"{name} fell {_times(falls)} between {len(values)} scrapes and came back "
                f"{_times(returns)} within {RETURN_SCRAPES} scrapes"
            )
        if falls and not cut:
            return Series(
                several=f"{name} fell {_times(falls)} between {len(values)} scrapes while no request was cut or "
                "refused, as a restart would"
            )
        resets = max(resets, falls)
    return Series(resets=resets)


def _falls_and_returns(values: Sequence[float]) -> tuple[int, int]:
    falls = returns = 0
    for i in range(1, len(values)):
        if values[i] < values[i - 1]:
            falls += 1
            returns += any(v >= values[i - 1] for v in values[i + 1 : i + 1 + RETURN_SCRAPES])
    return falls, returns


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
