"""`benchy probe-cache`: does the server cache prompt prefixes, and how much does that save?

For each prompt length, N requests share one prefix (the first pays for prefill, the rest may
be served from cache) and N have unique prefixes (their own nonce first). They are sent one at a
time and interleaved (shared, unique, shared, unique, …) so that drift hits both alike, each
with a few output tokens. TTFT is request_formulas.ttft_s. The verdict per length rests on one-sided
Welch t-tests on log TTFT, repeats (shared after the first) against unique:
  detected      repeats are faster (p < ALPHA) and the median speed-up is at least MIN_SPEEDUP
  not_detected  the speed-up is significantly below MIN_SPEEDUP (p < ALPHA)
  cache_hit_no_gain  not detected by timing, yet the server reports most of every repeat's
                prompt cached: the cache works but something outside prefill (llama.cpp's
                host-RAM prompt cache copying slots, queueing) takes the time it saves
  partial_hits  some repeats were served from cache and the others were not significantly
                faster than unique prefixes (a one-sided Welch test, as for detected;
                bimodal): a hit fraction and the gain on hits, not one blurred
                speed-up; the likely cause is a router spreading requests over replicas that
                each hold their own cache (no cache affinity), or eviction between repeats
  inconclusive  neither; or fewer than 2 TTFTs a side; or the Mann–Whitney U rank test (used
                where n lets it reach ALPHA) disagrees; or the server's cached_tokens
                contradict a detected speed-up
Every prompt starts with a nonce of this probe, so its shared prefix cannot serve a later run.

--capacity: how much the cache really holds for reuse. A pass sends K distinct prefixes of
the same length once each, then each again in the same order, so that every one is re-used only
after all the others were sent: an LRU cache that holds the K of them hits on every re-use, one
that does not hits on none. K doubles from 1 until fewer than CAPACITY_HIT_SHARE of the re-uses
hit, then bisects between the last K that fitted and the first that did not. The cliff is
reported in prompt tokens (K × the prefix's server-counted length, what all prefixes share, the
chat template as the first sends found it cached, counted once) as the midpoint of that
bracket, ± half its width, beside what the server says its KV cache holds (server/capacity.py).
A hit is the server's cached_tokens (≥ SERVED_SHARE of the prompt) where it reports them for
every re-use, else a re-use TTFT TIMING_HIT_SPEEDUP× faster than the same prefix's first send.

The package's rooms: runner.py sends and writes the bundle (bundle.py: probe-manifest.json
beside requests.jsonl); analyze.py makes probe.json's ProbeResult (results/probe.py) from that
bundle, for the live probe and `benchy rebuild` alike; verdict.py holds the tests; figures.py
names every figure (PROBE_METRICS) and the statistic that makes it.
"""

from __future__ import annotations

from pathlib import Path

from benchy.probe.analyze import (
    CAPACITY_HIT_SHARE,
    analyze,
    capacity_point,
    capacity_result,
    first_errors,
    length_entry,
)
from benchy.probe.bundle import REQUESTS, ProbeBundleError, is_probe_folder, read_manifest
from benchy.probe.figures import PROBE_METRICS
from benchy.probe.runner import (
    CAPACITY_MAX_PASSES,
    CAPACITY_PRECISION,
    CONTEXT_MARGIN,
    DEFAULT_LENGTHS,
    ProbeSettings,
    ProbeTooLong,
    capacity_prefix_limit,
    capped_lengths,
    run_probe,
)
from benchy.probe.verdict import (
    ALPHA,
    MIN_SPEEDUP,
    SERVED_SHARE,
    TIMING_HIT_SPEEDUP,
    VERDICTS,
    Verdict,
    _timing_verdict,
    decide,
    repeat_hits,
)
from benchy.records import read_records
from benchy.records.plan import Tagged
from benchy.results.probe import ProbeResult
from benchy.results.types import PROBE_SCHEMA

SCHEMA = PROBE_SCHEMA  # results.py names every saved schema


def rebuild(directory: Path) -> ProbeResult:
    """probe.json's content made again from a probe folder's bundle alone (probe-manifest.json
    and requests.jsonl); ProbeBundleError (one line) when the folder has none."""
    return analyze(read_manifest(directory), read_records(Path(directory) / REQUESTS, kind=Tagged))


def rebuild_folder(directory: Path, report: bool = True) -> Path | None:
    """`benchy rebuild` of a probe folder: probe.json (and its report) made again from the
    bundle; returns probe.json's path, or None when `directory` is not a probe folder."""
    from benchy.report import probe_report
    from benchy.results import probe as probe_file

    if not is_probe_folder(directory):
        return None
    result = rebuild(directory)
    if report:
        return probe_report.write(result, Path(directory))[0]
    return probe_file.save(result, Path(directory))


__all__ = [
    "ALPHA",
    "CAPACITY_HIT_SHARE",
    "CAPACITY_MAX_PASSES",
    "CAPACITY_PRECISION",
    "CONTEXT_MARGIN",
    "DEFAULT_LENGTHS",
    "MIN_SPEEDUP",
    "PROBE_METRICS",
    "SCHEMA",
    "SERVED_SHARE",
    "TIMING_HIT_SPEEDUP",
    "VERDICTS",
    "ProbeBundleError",
    "ProbeSettings",
    "ProbeTooLong",
    "Verdict",
    "_timing_verdict",
    "capacity_point",
    "capacity_prefix_limit",
    "capacity_result",
    "capped_lengths",
    "decide",
    "first_errors",
    "is_probe_folder",
    "length_entry",
    "rebuild",
    "rebuild_folder",
    "repeat_hits",
    "run_probe",
]
