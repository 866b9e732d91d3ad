"""What keeps long runs cheap changes no saved figure (issue 26): results.json written a request at
a time reads back as the run it saved, the fast readers read what the path-naming reader reads
(and a bad value is still named by its path), and the bootstrap in bounded batches gives the
interval of one draw. The targets themselves (RSS, report time, CPU) live in
benchmarks/bench_scale.py, not here."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from scipy import stats as sps

from benchy import jsontypes
from benchy.measure import stats
from benchy.results import files as results_files
from benchy.results.types import RunResult
from tests.conftest import REPO_ROOT

SHIPPED = sorted((REPO_ROOT / "reports").glob("*/results.json"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_the_fast_reader_reads_what_the_naming_reader_reads(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    fast = results_files.read(path)
    slow = jsontypes._from_json_naming(RunResult, data)
    assert fast.to_dict() == slow.to_dict()
    assert sum(len(c.requests) for c in fast.cases) == sum(len(c["requests"]) for c in data["cases"])


@pytest.mark.parametrize("path", SHIPPED[:2], ids=lambda p: p.parent.name)
def test_results_saved_a_request_at_a_time_read_back_the_same(path, tmp_path):
    run = results_files.read(path)
    saved = results_files.save(run, tmp_path)
    assert json.loads(saved.read_text(encoding="utf-8")) == json.loads(json.dumps(run.to_dict()))
    assert results_files.read(saved).to_dict() == run.to_dict()


def test_a_bad_value_deep_in_a_request_is_still_named_by_its_path(tmp_path):
    data = json.loads(SHIPPED[0].read_text(encoding="utf-8"))
    bad = copy.deepcopy(data)
    bad["cases"][0]["requests"][1]["metrics"]["ttft_s"] = "fast"
    (tmp_path / "results.json").write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(results_files.ResultsError, match=r"cases\[0\]\.requests\[1\]\.metrics\.ttft_s"):
        results_files.read(tmp_path / "results.json")


SAMPLES = {
    "lognormal 5": np.random.default_rng(5).lognormal(size=5),
    "lognormal 400": np.random.default_rng(400).lognormal(size=400),
    "lognormal 9000": np.random.default_rng(9000).lognormal(size=9000),
    "three values": np.array([0.1, 0.2, 0.7]),
    "ties (rounded ms)": np.round(np.random.default_rng(1).exponential(size=300), 2),
    "few distinct": np.random.default_rng(2).integers(0, 4, size=51).astype(float),
    "tiny and huge": np.random.default_rng(3).normal(size=512) * 1e-6 + 1e6,
}


@pytest.mark.parametrize("name", SAMPLES)
def test_the_bootstrap_is_scipys_interval_of_one_draw_bit_for_bit(name):
    """benchy draws the bootstrap with numpy alone (no scipy import in a run): the interval must
    be exactly scipy.stats.bootstrap's, drawn at once, for the same seed."""
    values = SAMPLES[name]
    whole = sps.bootstrap(
        (values,),
        np.median,
        confidence_level=0.95,
        n_resamples=stats.BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(stats.BOOTSTRAP_SEED),
    ).confidence_interval
    assert stats.median_ci95(values) == [float(whole.low), float(whole.high)]
