"""A one-line progress display on stderr; silent when stderr is not a terminal or --quiet."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total_requests: int, enabled: bool | None = None) -> None:
        self.total = max(1, total_requests)
        self.done = 0
        self.case = ""
        self.started = time.monotonic()
        self.enabled = sys.stderr.isatty() if enabled is None else enabled

    def start_case(self, label: str) -> None:
        self.case = label
        self._draw()

    def request_done(self) -> None:
        self.done += 1
        self._draw()

    def finish(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()

    def _draw(self) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        width = 24
        filled = int(width * self.done / self.total)
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(
            f"\r\033[K[{bar}] {self.done}/{self.total} {self.case}  {elapsed:5.1f}s elapsed, ETA {eta:5.1f}s"
        )
        sys.stderr.flush()
