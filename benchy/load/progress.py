"""Progress on stderr, drawn by tqdm: a bar on a terminal, a plain line every few seconds
elsewhere (a CI log must not stay silent for minutes), nothing under --quiet.

One bar per case, not one for the run: requests of different cases take very different times
(pp8192 against pp512), so an ETA averaged over the whole run was wrong by a factor of 3 or 4,
while within one case the requests are alike and tqdm's ETA holds. The case's place in the run
("[2/6]") says how far the run is. A closed loop bounded only by --duration has no request
count: it counts requests with no total and no ETA, and says how long the case runs. Once a
case's --duration is up, its line says it is draining (load/drain.py): a wait for the requests
in flight, not a hang.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from tqdm import tqdm

TERMINAL_REFRESH_S = 0.5  # a bar on a terminal: redrawn at most this often, and at least
PLAIN_LINE_EVERY_S = 5.0  # a log file or pipe: one line this often while a case runs


class Progress:
    def __init__(self, n_cases: int, enabled: bool | None = None) -> None:
        """`n_cases` 0: not known ahead (a probe's capacity passes): each reads "[2] …"."""
        self.n_cases = n_cases
        self.case_no = 0
        self.terminal = sys.stderr.isatty()
        self.enabled = enabled is not False  # None: on, as a bar or as plain lines
        self.bar: tqdm | None = None
        self._ticker: _Ticker | None = None
        self._drains_at: float | None = None  # monotonic time the case's --duration is up
        self._drain_s = 0.0

    def start_case(self, label: str, requests: int | None, duration_s: float | None = None) -> None:
        """A new bar for a case of `requests` measured requests (warmups are not counted);
        None: as many as fit in `duration_s` seconds."""
        self._close_bar()
        self.case_no += 1
        self._drains_at = None
        if not self.enabled:
            return
        desc = f"[{self.case_no}/{self.n_cases}] {label}" if self.n_cases else f"[{self.case_no}] {label}"
        if requests is None and duration_s is not None:
            desc += f" (for {duration_s:g} s)"
        self.bar = tqdm(
            total=requests,
            desc=desc,
            unit="req",
            file=sys.stderr if self.terminal else _PlainLines(sys.stderr),
            mininterval=TERMINAL_REFRESH_S if self.terminal else float("inf"),
            **_size(self.terminal),
            ascii=not self.terminal,
            bar_format=None if self.terminal else _plain_format(requests),
            leave=not self.terminal,  # a log keeps each case's last line; a terminal keeps the table clean
        )
        self._ticker = _Ticker(self.bar, TERMINAL_REFRESH_S if self.terminal else PLAIN_LINE_EVERY_S, self._tick)

    def measuring(self, duration_s: float | None, drain_s: float) -> None:
        """The case's measured requests start now: with --duration, its line will say when the
        sending stops and the drain (at most drain_s) begins."""
        if duration_s is not None:
            self._drains_at, self._drain_s = time.monotonic() + duration_s, drain_s

    def _tick(self, bar: tqdm) -> None:
        if self._drains_at is not None and time.monotonic() >= self._drains_at:
            self._drains_at = None
            bar.set_description(f"{bar.desc} (draining, at most {self._drain_s:g} s)", refresh=False)

    def note(self, text: str) -> None:
        """One line about what happens before the cases (calibration), where progress shows."""
        if self.enabled:
            tqdm.write(text, file=sys.stderr)

    def request_done(self, warmup: bool = False) -> None:
        """A request ended: a measured one counts (`--requests 200` reads 200, not 201); a
        warmup's end only redraws, its line saying the case is warming up until the first
        measured request."""
        if self.bar is None:
            return
        if warmup:
            if not self.bar.n:
                self.bar.set_postfix_str("warming up", refresh=False)
            return
        if not self.bar.n:
            self.bar.set_postfix_str("", refresh=False)
        self.bar.update(1)

    def finish(self) -> None:
        self._close_bar()

    def _close_bar(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _plain_format(requests: int | None) -> str:
    """A log line: "[2/6] pp512 tg128: 12/31 requests (39%) [00:14<00:22, 1.17s/req]"."""
    if requests is None:
        return "{desc}: {n_fmt} requests [{elapsed}, {rate_fmt}{postfix}]"
    return "{desc}: {n_fmt}/{total_fmt} requests ({percentage:.0f}%) [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


def _size(terminal: bool) -> dict[str, Any]:
    """tqdm follows a terminal's size, but draws nothing on one that reports 0×0 (a bare
    pseudo-terminal): a fixed size there."""
    try:
        known = terminal and os.get_terminal_size(sys.stderr.fileno()).columns > 0
    except (OSError, ValueError):
        known = False
    return {"dynamic_ncols": True} if known else {"ncols": 100, "nrows": 20}


class _Ticker:
    """Redraws a bar every `interval_s` from a daemon thread, so that elapsed time and the
    plain log lines keep coming while long requests are in flight (tqdm redraws only when
    something is counted)."""

    def __init__(self, bar: tqdm, interval_s: float, on_tick: Callable[[tqdm], None] = lambda bar: None) -> None:
        self._bar = bar
        self._interval_s = interval_s
        self._on_tick = on_tick
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="benchy-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self._on_tick(self._bar)
            self._bar.refresh()  # takes tqdm's own lock

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


class _PlainLines:
    """tqdm's output made into whole lines: it redraws in place with a carriage return, which a
    log file shows as one ever-growing line."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last = ""

    def write(self, text: str) -> None:
        line = text.replace("\r", "").rstrip()
        if line and line != self._last:  # a bar closed unchanged is not news
            self._stream.write(line + "\n")
            self._last = line

    def flush(self) -> None:
        self._stream.flush()
