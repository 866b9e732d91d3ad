"""One case's window on the server's /metrics: a snapshot at its open, gauges sampled while it
runs, a snapshot at its close, and the server's figures for it (metrics.case_metrics).

Why apart from metrics.py: the scraping and parsing there are pure figures of two scrapes; this
is the timing of a case's scrapes, which the run drives.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchy.server.metrics import (
    EngineNames,
    MetricsScraper,
    ScrapeError,
    ServerCaseMetrics,
    Snapshot,
    case_metrics,
    found_names,
    parse,
)

GAUGE_INTERVAL_S = 1.0
MAX_GAUGE_SAMPLES = 3600  # an hour at one a second: memory stays bounded on long cases
SETTLE_TIMEOUT_S = 1.0  # how long to wait for the server to count a case's last requests
# At a case's close, scrapes until two in a row agree (one idle process answers alike; several
# behind one address answer each for itself, so the scrapes between are judged too), at most:
MAX_CONFIRMING = 8


class Window:
    """One case's scrapes: a snapshot at `open()`, gauges sampled every `interval_s`, a snapshot
    at `close()`. `expected_requests` (set before close) lets the last snapshot wait, briefly,
    until the server has counted every finished request. `result` is the ServerCaseMetrics, or
    a str: why there is none."""

    def __init__(self, scraper: MetricsScraper, interval_s: float = GAUGE_INTERVAL_S) -> None:
        self.scraper = scraper
        self.interval_s = interval_s
        self.expected_requests = 0
        self.cut = False  # requests were cut or refused during the case: the counters may have been reset
        self.before: Snapshot | None = None
        self.texts: list[tuple[float, str]] = []  # gauge lines only, parsed after the case
        # scrapes back to back at open and close, judged with the others for several processes
        # behind the address (series.py): one idle process answers them alike
        self.confirming: list[Snapshot] = []
        self.result: ServerCaseMetrics | str = "the case ended before its measured requests began"
        self._sampler: asyncio.Future[Any] | None = None

    async def open(self) -> None:
        self.scraper.round_trips.clear()
        try:
            self.before = await self.scraper.scrape()
            self.confirming.append(await self.scraper.scrape())
        except ScrapeError as exc:
            self.result = f"no snapshot before the case: {exc}"
            return
        self._sampler = asyncio.ensure_future(self.sample_gauges(self.interval_s))

    def abort(self) -> None:
        """Stops sampling without a last snapshot (the case was cut short)."""
        if self._sampler is not None:
            self._sampler.cancel()
        if self.before is not None:
            self.result = "the case was cut short before its last snapshot"

    async def sample_gauges(self, interval_s: float) -> None:
        """Raw gauge lines once per interval; parsing waits until the case is over, so the
        client's event loop spends microseconds here, not milliseconds."""
        engine = self.scraper.engine
        if engine is None or self.before is None or interval_s <= 0:
            return
        # gauges, and the counters: a case's counts are added up over every scrape (series.py)
        wanted = tuple(n for names in engine.gauges.values() for n in names)
        wanted += tuple(n for names in engine.counters.values() for n in names)
        wanted += tuple(f"{n}_{end}" for names in engine.histograms.values() for n in names for end in ("count", "sum"))
        while len(self.texts) < MAX_GAUGE_SAMPLES:
            await asyncio.sleep(interval_s)
            try:
                text = await self.scraper.fetch_text()
            except ScrapeError:
                continue
            lines = [ln for ln in text.splitlines() if ln.startswith(wanted)]
            self.texts.append((time.perf_counter(), "\n".join(lines) + "\n"))

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            await asyncio.gather(self._sampler, return_exceptions=True)
        engine, before = self.scraper.engine, self.before
        if engine is None or before is None:
            return
        try:
            after = await self._settled_after(engine, before)
        except ScrapeError as exc:
            self.result = f"no snapshot after the case: {exc}"
            return
        gauges = []
        for t_s, text in self.texts:
            try:
                gauges.append(parse(text, t_s, self.scraper.model))
            except ScrapeError:
                continue
        rtt_s = min(self.scraper.round_trips, default=None)
        self.result = case_metrics(before, after, engine, gauges, self.cut, self.confirming, rtt_s)

    async def _settled_after(self, engine: EngineNames, before: Snapshot) -> Snapshot:
        """A server may count a request a moment after its last byte went out (vLLM records
        stats after it hands the output on): scrape again until it has counted them all (at most
        SETTLE_TIMEOUT_S), then until two scrapes in a row agree (at most MAX_CONFIRMING scrapes
        kept for the series' judgment)."""
        deadline = time.perf_counter() + SETTLE_TIMEOUT_S
        last: Snapshot | None = None
        while True:
            after = await self.scraper.scrape()
            counted = _requests_counted(before, after, engine)
            settled = counted is None or counted >= self.expected_requests
            if time.perf_counter() > deadline or (
                settled and last is not None and _counts(last, engine) == _counts(after, engine)
            ):
                return after
            if last is not None:
                self.confirming.append(last)
            last = after
            if settled and len(self.confirming) >= MAX_CONFIRMING:  # the cap never cuts the wait to settle
                return after
            await asyncio.sleep(0.05 if not settled else 0.005)


def _counts(snap: Snapshot, engine: EngineNames) -> list[float | None]:
    """The engine's counters in a scrape (what an idle process answers alike each time)."""
    found, _ = found_names(snap, engine)
    return [snap.values.get(found[f]) for f in engine.counters if f in found]


def _requests_counted(before: Snapshot, after: Snapshot, engine: EngineNames) -> float | None:
    if not engine.request_count:
        return None
    name = engine.histograms.get(engine.request_count, ("",))[0]
    count = f"{name}_count"
    return after.values[count] - before.values.get(count, 0.0) if count in after.values else None
