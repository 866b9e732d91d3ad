"""The analysis builds results in the form results.json reads back: for the suite's kinds of run
and the shipped reports/dgx-spark-sim, `built == RunResult.from_dict(built.to_dict())`, with
JSON's own types all the way down (lists, not tuples; Python floats, not numpy's). Why: the
report printed at the end of a run is made from the built result, with no round trip through
JSON, and must be the report `benchy report` makes from the file later.

Against `benchy sim` over real HTTP.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from benchy.analysis import analyze as analysis
from benchy.results.types import RunResult
from tests.conftest import REPO_ROOT, run_benchy_here, shared_sim

sim = shared_sim("--prefill-tps", "200000", "--decode-tps", "3000", "--max-running", "64", "--gpus", "2")

RUNS = {
    "sweep with warmup and an SLO": ("--pp", "64", "--tg", "8", "16", "-c", "1", "2", "--warmup", "1", "--slo", "e2e=5s"),
    "open loop": ("--pp", "64", "--tg", "8", "--rate", "40", "--requests", "8"),
    "multi-turn": ("--turns", "3", "-c", "2", "--pp", "48", "--tg", "8"),
    "shared prefix": ("--shared-prefix", "0.75", "--groups", "2", "--pp", "256", "--tg", "8", "-c", "2"),
    "no stream, cache reset": ("--pp", "64", "--tg", "8", "--requests", "3", "--no-stream", "--cache-reset"),
    "GPU metrics": ("--pp", "64", "--tg", "8", "--requests", "3", "--gpu-metrics", "{dcgm}"),
}  # fmt: skip


def mismatches(built: object, read: object, path: str = "run") -> list[str]:
    """Where `built` differs from `read` in value or in exact type (what `==` lets pass:
    1 == 1.0, numpy.float64(2) == 2.0), a path each."""
    if dataclasses.is_dataclass(built) and not isinstance(built, type):
        if not (isinstance(read, type(built)) or isinstance(built, type(read))):
            return [f"{path}: {type(built).__name__} against {type(read).__name__}"]
        return [
            m
            for f in dataclasses.fields(built)
            if f.name not in getattr(built, "_NOT_SAVED", ())  # what no file holds: the analysis's alone
            for m in mismatches(getattr(built, f.name), getattr(read, f.name), f"{path}.{f.name}")
        ]
    if isinstance(built, dict) and isinstance(read, dict):
        if set(built) != set(read):
            return [f"{path}: keys {sorted(set(built) ^ set(read))}"]
        return [m for k in built for m in mismatches(built[k], read[k], f"{path}[{k!r}]")]
    if isinstance(built, Sequence) and not isinstance(built, str) and isinstance(read, list):
        if type(built) is tuple:
            return [f"{path}: a tuple where the file reads a list"]
        if len(built) != len(read):
            return [f"{path}: {len(built)} items against {len(read)}"]
        return [m for i, (a, b) in enumerate(zip(built, read)) for m in mismatches(a, b, f"{path}[{i}]")]
    same_nan = isinstance(built, float) and isinstance(read, float) and built != built and read != read
    if type(built) is not type(read) or (built != read and not same_nan):
        return [f"{path}: {built!r} ({type(built).__name__}) against {read!r} ({type(read).__name__})"]
    return []  # fmt: skip


def assert_built_is_read_back_form(folder: Path) -> None:
    built = analysis.analyze(analysis.Bundle.read(folder))
    read = RunResult.from_dict(built.to_dict())
    assert mismatches(built, read) == []
    assert built == read
    assert built.cases and all(len(c.requests) > 0 for c in built.cases)


@pytest.mark.parametrize("flags", RUNS.values(), ids=RUNS.keys())
def test_a_runs_built_result_is_its_read_back_form(sim, tmp_path, flags):
    out = tmp_path / "run"
    dcgm = sim.base_url.removesuffix("/v1") + "/dcgm/metrics"
    flags = tuple(f.format(dcgm=dcgm) for f in flags)
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), *flags)
    assert proc.returncode in (0, 3), proc.stderr  # 3: the run's own warnings
    assert_built_is_read_back_form(out)


def test_the_shipped_reports_built_result_is_its_read_back_form(tmp_path):
    folder = tmp_path / "dgx-spark-sim"
    shutil.copytree(REPO_ROOT / "reports" / "dgx-spark-sim", folder)  # the analysis may spill rows beside it
    assert_built_is_read_back_form(folder)


def test_the_check_sees_a_tuple_and_a_numpy_float():
    """The comparison itself can fail on what `==` forgives."""
    import numpy as np

    assert mismatches({"a": (1, 2)}, {"a": [1, 2]}) == ["run['a']: a tuple where the file reads a list"]
    assert len(mismatches([np.float64(2.0)], [2.0])) == 1
    assert mismatches([1.5, None], [1.5, None]) == []
