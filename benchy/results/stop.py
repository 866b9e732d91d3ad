"""The server's own stop, judged from a case's silence (measure/silence.py; issue 52): one rule
and one wording, read by the checks (ttft_outside_server, ttft_not_prefill) and by the queueing
finding's words (results/findings.py), which may not import checks/.

Why here: a stopped server holds the requests sent meanwhile, so every figure that counts their
wait (TTFT beyond the server's own prompt time, TTFT beyond the same prompt sent alone) holds
the stop; each finding that sees such a wait must name the stop by the same evidence, or one
says "queueing" where the other says "the server stopped".
"""

from __future__ import annotations

from benchy.measure.silence import Silence
from benchy.results.types import CaseResult

# A silence on every stream mid-answer says something when it lasts this many of the case's
# median inter-token gaps; it is the server's when benchy's loop lagged less than this share of
# it (and a request sent during it waited unread), benchy's own when its loop lagged more.
SILENT_ITLS, AWAKE_SHARE = 10.0, 0.5

STOP_HINT = (
    "Look at the server's logs and its process around that moment (a GC pause, a synchronous step, "
    "an engine stall); its prompt time and latency figures leave that wait out."
)


def long_silence(case: CaseResult) -> Silence | None:
    """The case's silence on every stream mid-answer, where it says something: many inter-token
    gaps long. Whose it was (benchy's or the server's) is judged by its caller."""
    silence, itl = case.silence, case.median("itl_s")
    if silence is None or itl is None or silence.silence_s < SILENT_ITLS * itl:
        return None
    return silence


def loop_peak_s(case: CaseResult) -> float:
    """benchy's event loop's worst lag in the case, s."""
    return (case.client.loop_lag_ms_max or 0.0) / 1000 if case.client else 0.0


def server_stop(case: CaseResult) -> Silence | None:
    """The case's silence where it is the server's stop: every stream mid-answer silent for
    many inter-token gaps, benchy's loop awake through it (it lagged less than AWAKE_SHARE of
    it), and a request sent meanwhile that got its headers only after it (it waited unread)."""
    silence = long_silence(case)
    if silence is None or not silence.unread or loop_peak_s(case) >= AWAKE_SHARE * silence.silence_s:
        return None
    return silence


def stop_holding(case: CaseResult, n: int) -> Silence | None:
    """The server's stop where it held at least half of the `n` requests a median is of (those
    sent during it: it held every one), so the median is one of them. `sent`, not `unread`:
    llama.cpp answers the headers of those that find a slot free at the resume inside it."""
    stop = server_stop(case)
    return stop if stop is not None and 2 * held(stop) >= n else None


def stop_cause(stop: Silence, n: int, excess_s: float, rest: str) -> str:
    """A median's excess of `excess_s` with the stop in it: the stop alone where it lasts the
    excess; else the stop, then `rest` (the other cause) for what passes beyond it (the backlog
    it left queues for slots, a cache copy): never a wait the stop cannot explain laid on it."""
    beyond = excess_s - stop.silence_s
    words = stop_words(stop, n)
    return words if beyond <= 0 else f"{words}; the {beyond * 1000:,.0f} ms beyond it: {rest}"


def held(stop: Silence) -> int:
    """The requests the stop held: those sent during it (a file before 1.29 has only `unread`)."""
    return max(stop.sent, stop.unread)


def stop_words(stop: Silence, n: int) -> str:
    """The stop as a cause, in the words every finding that names it uses."""
    return (
        f"the server stopped: for {stop.silence_s * 1000:,.0f} ms no stream mid-answer ({stop.streams}) received "
        f"anything while benchy's loop was awake, and {held(stop)} of these {n} requests were sent meanwhile, "
        f"{stop.unread} of them answered only after it (case.silence); the server's own times start when it "
        "takes them up"
    )
