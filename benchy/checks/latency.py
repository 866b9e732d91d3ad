"""A fixed latency in front of the engine (results/latency.py finds it; results/build.py
withholds the TTFT-based prefill rate): one warning per sweep family, with the fixed part, the
engine's own prefill rate and the response headers' time."""

from __future__ import annotations

from collections.abc import Sequence

from benchy.checks.check import RunLevelCheck
from benchy.checks.registry import Code
from benchy.results import findings, latency
from benchy.results.types import CheckWarning
from benchy.results.view import RunView


def served_by_llamacpp(run: RunView) -> bool:
    """The server is llama.cpp by its identity (server/identity.py says how it knows)."""
    ident = run.setup.server
    return ident is not None and ident.llamacpp


class FixedLatency(RunLevelCheck[latency.Found]):
    """Each fixed part the analysis found (results/latency.py), in the words of the finding that
    withheld its rate (results/findings.py FIXED_PART)."""

    code = Code.FIXED_LATENCY

    def detect(self, run: RunView) -> Sequence[latency.Found]:
        return latency.found_in(run)

    def words(self, run: RunView, found: latency.Found) -> CheckWarning:
        return findings.FIXED_PART.words(found, served_by_llamacpp(run))


fixed_latency = FixedLatency()  # registered by this name (checks/warnings.py)
RUN_CHECKS = (fixed_latency,)
