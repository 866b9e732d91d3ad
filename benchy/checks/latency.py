"""A fixed latency in front of the engine (results/latency.py finds it; results/build.py
withholds the TTFT-based prefill rate): one warning per sweep family, with the fixed part, the
engine's own prefill rate and the response headers' time."""

from __future__ import annotations

from collections.abc import Iterable

from benchy.results import findings, latency
from benchy.results.types import CheckWarning
from benchy.results.view import RunView


def served_by_llamacpp(run: RunView) -> bool:
    """The server is llama.cpp by its identity (server/identity.py says how it knows)."""
    ident = run.setup.server
    return ident is not None and ident.llamacpp


def fixed_latency(run: RunView) -> Iterable[CheckWarning]:
    """Each fixed part the analysis found, in the words of the finding that withheld its rate."""
    for found in latency.found_in(run):
        yield findings.FIXED_PART.warning_of(found, served_by_llamacpp(run))


RUN_CHECKS = (fixed_latency,)
