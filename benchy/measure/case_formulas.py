"""Case formulas for loaded cases (--concurrency, --rate): rates over a case's measured requests."""

from __future__ import annotations

from collections.abc import Callable

from benchy.measure.request_formulas import completion_tokens
from benchy.measure.unavailable import (
    CLOSED_LOOP,
    CUT_SHORT,
    NO_PROMPT_TOKENS,
    NO_SUCCESS,
    TOO_FEW_SENDS,
    ZERO_WALL_TIME,
    Unavailable,
)
from benchy.records.plan import Tagged


def send_lag_s(rec: Tagged) -> float | Unavailable:
    if rec.scheduled_mono_s is None:
        return Unavailable(CLOSED_LOOP, "closed loop: a request is sent when a slot frees, not on a schedule")
    return rec.sent_mono_s - rec.scheduled_mono_s


def _success_window(records: list[Tagged]) -> tuple[list[Tagged], float] | Unavailable:
    """The successful requests and the case's wall time: from the first send to the last end of
    any request, failed ones included. The server was busy with a failure too; a window that
    stopped at the last success would leave out the time a late failure held it."""
    done = [r for r in records if r.ok and r.end_s is not None]
    if not done:
        return Unavailable(NO_SUCCESS, "no request succeeded")
    ended = [r for r in records if r.end_s is not None]
    start = min(r.sent_mono_s for r in ended)
    end = max(r.sent_mono_s + (r.end_s or 0.0) for r in ended)
    if end <= start:
        return Unavailable(ZERO_WALL_TIME, "zero wall time")
    return done, end - start


def aggregate_output_tps(records: list[Tagged], tokens: Callable[[Tagged], int] | None = None) -> float | Unavailable:
    """All completion tokens of successful requests ÷ (last end − first send), over the case's
    measured requests: the throughput a loaded server delivers. `tokens`: each request's count
    where the records no longer hold their streams (default: completion_tokens)."""
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    count = tokens or completion_tokens
    return sum(count(r) for r in done) / seconds


def input_tps(records: list[Tagged]) -> float | Unavailable:
    """All prompt tokens of the successful requests, as the server's usage counted them ÷
    (last end − first send): the input a pooling endpoint (embeddings) got through."""
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    if any(r.prompt_tokens is None for r in done):
        return Unavailable(NO_PROMPT_TOKENS, "a successful request's usage had no prompt_tokens")
    return sum(r.prompt_tokens or 0 for r in done) / seconds


def input_rate(records: list[Tagged]) -> float | Unavailable:
    """The inputs of the successful requests (a batch's each embedding input, a rerank's each
    document, as the body benchy sent held them) ÷ (last end − first send): the items a pooling
    endpoint got through, which requests/s hides when a request carries several."""
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    return sum(r.inputs or 1 for r in done) / seconds


def cut_short(measured: int, planned: int | None) -> Unavailable | None:
    """A case the run stopped inside: its rates cover the ramp-up and miss the rest, so they
    understate what the server delivers over a whole case (a SIGINT at 11 of 12 requests
    showed half the case's t/s). Per-request figures stay, qualified by case_cut_short."""
    if not planned or measured >= planned:
        return None
    return Unavailable(
        CUT_SHORT,
        f"the case was cut short ({measured} of {planned} requests): a rate over part of a case is not the case's rate",
    )


def achieved_rate(records: list[Tagged]) -> float | Unavailable:
    sends = sorted(r.sent_mono_s for r in records)
    if len(sends) < 2 or sends[-1] <= sends[0]:
        return Unavailable(TOO_FEW_SENDS, "fewer than two requests sent")
    return (len(sends) - 1) / (sends[-1] - sends[0])


def request_rate(records: list[Tagged]) -> float | Unavailable:
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    return len(done) / seconds
