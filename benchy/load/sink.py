"""Where each finished record goes while a run measures: the RecordSink.

Why a class: the run's record callback tallied the case, wrote the record, moved the progress
bar, counted failures and judged the error limits, all in one closure over the run's state.
Each of those is a step here, in the order that matters (counted as results.json counts it
before a limit is judged), and what the steps keep (the tallies, the failure counts, why the
run stopped) is the sink's own, typed. The sink keeps no record: once written, a record is
freed when its sender lets it go (send.py gives the client a fresh record, not the plan's).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from benchy.load import reconnect
from benchy.load.progress import Progress
from benchy.load.tally import CaseTally
from benchy.measure import classify
from benchy.records import RecordWriter, RequestRecord
from benchy.records.plan import Sent

MIN_REQUESTS_FOR_RATE = 10  # --max-error-rate is judged from this many finished requests on


@dataclass(frozen=True)
class ErrorLimits:
    """--max-errors, --max-error-rate and --max-connect-failures (0: never)."""

    max_errors: int | None = None
    max_error_rate: float | None = None
    max_connect_failures: int = 3
    reconnect_s: float = 10.0  # --reconnect-s: how long a server that went away gets to come back


@dataclass
class FailureCount:
    """The run's finished requests as results.json counts them, and the connect failures in a row."""

    done: int = 0
    failed: int = 0
    connect_in_a_row: int = 0
    last_connect_error: str | None = None
    gone_since: float | None = None  # perf_counter of the first of them (load/reconnect.py)

    def add(self, rec: RequestRecord) -> None:
        self.done += 1
        self.failed += (
            not classify.classify(rec).ok and rec.error_kind != classify.DRAIN_CUT
        )  # cut by benchy, not failed
        gone = reconnect.refused(rec)
        self.connect_in_a_row = self.connect_in_a_row + 1 if gone else 0
        if gone:
            self.last_connect_error = rec.error
            self.gone_since = self.gone_since or time.perf_counter()
        else:
            self.gone_since = None

    def passed(self, limits: ErrorLimits) -> dict[str, str] | None:
        """{by, reason} once --max-errors or --max-error-rate is passed (more errors than allowed,
        not as many), or once the server is gone: requests in a row that found nothing listening
        (or no route) mean every later one would fail alike, so sending them only lengthens a
        dead run (--max-connect-failures). None while the run may go on."""
        failed, done = self.failed, self.done
        limit, window = limits.max_connect_failures, limits.reconnect_s
        away_s = time.perf_counter() - self.gone_since if self.gone_since is not None else 0.0
        if limit and self.connect_in_a_row >= limit and away_s >= window:
            return {
                "by": "server-gone",
                "reason": f"the server is gone: {self.connect_in_a_row} requests in a row could not connect "
                f"over {away_s:.1f} s, and it did not come back within --reconnect-s {window:g} "
                f"({self.last_connect_error})",
            }
        if limits.max_errors is not None and failed > limits.max_errors:
            return {
                "by": "max-errors",
                "reason": f"{failed} requests failed, more than --max-errors {limits.max_errors}",
            }
        rate = limits.max_error_rate
        if rate is not None and done >= MIN_REQUESTS_FOR_RATE and failed > rate * done:
            return {
                "by": "max-error-rate",
                "reason": f"{failed} of {done} requests failed ({failed / done:.0%}), more than --max-error-rate {rate:g}",
            }
        return None


@dataclass
class RecordSink:
    """Takes each finished record (call it): tallies its case, writes it to requests.jsonl,
    moves the progress, counts it and, once an error limit is passed, sets `stop` and says why
    in `stopped`."""

    writer: RecordWriter
    progress: Progress
    limits: ErrorLimits = field(default_factory=ErrorLimits)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    tallies: dict[str, CaseTally] = field(default_factory=dict)  # case label → its finished requests
    failures: FailureCount = field(default_factory=FailureCount)
    stopped: dict[str, str] | None = None

    def open_case(self, label: str) -> CaseTally:
        """A fresh tally for a case about to start."""
        self.tallies[label] = CaseTally()
        return self.tallies[label]

    def sent(self, request: Sent) -> None:
        """A request as it leaves: its plan line (its tags), before its record."""
        self.writer.sent(request.record.request_id, request.tags)

    def __call__(self, rec: RequestRecord) -> None:
        tally = self.tallies.get(rec.case)
        if tally is None:  # a record of a case not opened (an alone request sent ahead of it)
            tally = self.open_case(rec.case)
        tally.add(rec)
        self.writer.write(rec)
        self.progress.request_done(rec.warmup)
        self.failures.add(rec)
        passed = None if self.stop.is_set() else self.failures.passed(self.limits)
        if passed:
            self.stopped = passed
            self.stop.set()
