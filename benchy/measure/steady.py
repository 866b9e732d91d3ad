"""A closed loop's steady state: the span where every stream was busy, found by rule from the
sends alone. A closed loop of c streams sends c requests at once, and each stream sends its next
request when its last one ends; so all c are in flight from the c-th send (before it, the
ramp-up) until the first request to end after the last send: that stream sends nothing more, nor
does any after it (the drain). A request belongs to the window when it was sent and ended inside it."""

from __future__ import annotations

import numpy as np

STEADY_METRICS = ("ttft_s", "itl_s", "e2e_s")  # latencies a ramp or a drain can move


def window(sends: np.ndarray, ends: np.ndarray, streams: int) -> tuple[float, float] | None:
    """(start, end) on one clock: the `streams`-th send, and the first end at or after the last
    send (`ends`: those of the requests that ended); None when the loop has one stream or sent
    too few requests to fill every stream and resend."""
    if streams < 2 or sends.size <= streams:
        return None
    ordered = np.sort(sends)
    start, last = float(ordered[streams - 1]), float(ordered[-1])
    after = ends[ends >= last]
    end = float(after.min()) if after.size else last
    return (start, end) if end > start else None


def inside(sends: np.ndarray, ends: np.ndarray, span: tuple[float, float]) -> np.ndarray:
    """Which requests (sent at `sends`, ended at `ends`, one clock) lie wholly in the span."""
    return (sends >= span[0]) & (ends <= span[1])


MATERIAL_SHIFT = 0.05  # of the steady median: a shift smaller than this changes no reading


def moved(
    whole_median: float, whole_ci: list[float] | None, steady_median: float, steady_ci: list[float] | None
) -> bool:
    """Whether the whole run's median moved from the steady state's enough to say: beyond noise
    and by at least MATERIAL_SHIFT. A near-deterministic server gives intervals so tight that
    6 ms in 35 s lies outside them; that is no ramp-up a reader needs to hear of."""
    if not beyond_noise(whole_ci, steady_ci):
        return False
    return abs(whole_median - steady_median) >= MATERIAL_SHIFT * abs(steady_median)


def beyond_noise(whole_ci: list[float] | None, steady_ci: list[float] | None) -> bool:
    """Whether two medians differ beyond noise: their bootstrap 95% intervals do not overlap."""
    if not whole_ci or not steady_ci:
        return False
    return whole_ci[1] < steady_ci[0] or steady_ci[1] < whole_ci[0]
