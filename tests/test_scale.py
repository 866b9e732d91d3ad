"""What keeps long runs cheap changes no saved figure (issue 26): results.json written a request at
a time reads back as the run it saved, the fast readers read what the path-naming reader reads
(and a bad value is still named by its path), and the bootstrap in bounded batches gives the
interval of one draw. The targets themselves (RSS, report time, CPU) live in
benchmarks/bench_scale.py, not here."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from scipy import stats as sps

from benchy import jsontypes
from benchy.measure import registry, stats
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


@pytest.mark.parametrize("n", [20_000, 20_001, 4, 5])
def test_the_bootstrap_by_counting_draws_the_medians_of_np_median(n):
    """The resamples' medians found from each one's counts of the sorted values (stats.py) are
    np.median's of the same draws, bit for bit: even and odd lengths, ties, a long case's
    length (scipy's own bootstrap of 20,000 values is too slow for a test)."""
    for values in (
        np.random.default_rng(n).lognormal(size=n),
        np.round(np.random.default_rng(n).exponential(size=n), 1),
    ):
        (counted,) = stats._medians_by_counting_all([values], n, np.random.default_rng(stats.BOOTSTRAP_SEED))
        partitioned = stats._medians_by_partition(values, np.random.default_rng(stats.BOOTSTRAP_SEED))
        assert all(np.array_equal(a, b) for a, b in zip(counted, partitioned, strict=True))


def test_the_bootstraps_drawn_together_are_each_ones_own():
    """A case's metrics share their requests: their bootstraps draw the indices once
    (stats.summarize_all), and each summary is still the one its sample gives alone."""
    rng = np.random.default_rng(7)
    samples = [rng.lognormal(size=3001), rng.exponential(size=3001), np.round(rng.normal(size=3001), 1),
               rng.random(500), np.full(3001, 0.25), np.array([1.0, np.nan, 3.0]), rng.random(2)]  # fmt: skip
    together = stats.summarize_all(samples)
    alone = [stats.summarize(values) for values in samples]
    assert json.dumps(together) == json.dumps(alone)  # NaN-safe, bit for bit
    assert together[0]["ci95"] != together[1]["ci95"]


def _records_of(out):
    """The run's records from requests.jsonl, by case label, and the run's setup."""
    from benchy.records import read_records
    from benchy.records.plan import Tagged

    by_case: dict[str, list] = {}
    for rec in read_records(out / "requests.jsonl", kind=Tagged):
        by_case.setdefault(rec.case, []).append(rec)
    return by_case, results_files.read(out / "results.json")


def _built(saved, by_case, spill_dir=None):
    """The run built again from its records, as run.finish builds it (checks included)."""
    from benchy.checks import warnings as checks
    from benchy.results import build
    from benchy.workloads.case import Case

    cases = []
    for c in saved.cases:
        rows = build.CaseRows(spill_dir=spill_dir)
        for rec in by_case[c.label]:
            rows.add(rec)
        case = Case(pp=c.pp, tg=c.tg, concurrency=c.concurrency or 1)
        cases.append(build.case_figures(case, c.endpoint, c.runs, rows, saved.setup.load.slo, client=c.client))
    view = build.run_view(saved.setup, cases, saved.partial, None, saved.benchy_version)
    return view.result(checks.check(view))


@pytest.mark.parametrize("preset", ["instant", "proxy-buffered"])
def test_rows_spilled_to_disk_build_the_results_they_build_in_memory(start_sim, tmp_path, monkeypatch, preset):
    """A long case's rows go to a file (results/rows.py) and come back a line at a time: the
    case's figures, its requests as saved (with the case's buffering verdict and what the
    run withheld) and its warnings are those of the same records held in memory."""
    from benchy.results import rows as rows_mod
    from tests.conftest import run_benchy

    sim = start_sim("--preset", preset)
    out = tmp_path / "run"
    done = run_benchy(
        "run", "--base-url", sim.base_url, "--pp", "64", "--tg", "8", "-c", "1", "-c", "4", "--requests", "40",
        "--slo", "ttft=5s", "--output", str(out), "--quiet",
    )  # fmt: skip
    assert done.returncode in (0, 4), done.stderr
    by_case, saved = _records_of(out)
    monkeypatch.setattr(rows_mod, "IN_MEMORY", 10**9)
    held = _built(saved, by_case)
    monkeypatch.setattr(rows_mod, "IN_MEMORY", 5)
    spilled = _built(saved, by_case, spill_dir=tmp_path)
    assert all(isinstance(c.requests, rows_mod.Rows) and c.requests.spilled for c in spilled.cases)
    assert all(not c.requests.spilled for c in held.cases)  # type: ignore[attr-defined]
    assert spilled.to_dict() == held.to_dict()
    for a_case, b_case in zip(spilled.cases, held.cases):  # what the checks read, gathered in the build's pass
        assert a_case.facts() == b_case.facts() and a_case.facts().n_measured == len(b_case.measured_ok()) + sum(
            not r.warmup and not r.ok for r in b_case.requests
        )
        assert a_case.requests.lines() is not None  # type: ignore[attr-defined]  # changes written: saved by copy
    a, b = results_files.save(held, tmp_path / "held"), results_files.save(spilled, tmp_path / "spilled")
    assert a.read_bytes() == b.read_bytes()
    if preset == "proxy-buffered":  # the verdict reached every row read back from disk
        assert all(r.unavailable_codes.get("ttft_s") for c in spilled.cases for r in c.measured_ok())


def test_spilled_rows_are_written_once_and_copied_as_written(tmp_path):
    """Rows are append-only (issue 51): each row is written once, its verdicts already in it
    (results/build.py), so a spilled case's lines are copied (Rows.lines) as the rows would
    be written, and a row read back is the reader's own."""
    from benchy import records
    from benchy.results import rows as rows_mod
    from benchy.results.types import RequestResult

    run = results_files.read(SHIPPED[0])
    source = [r for c in run.cases for r in c.requests][:12]
    rows = rows_mod.Rows(tmp_path, in_memory=3, parse=RequestResult.of_own_line)
    for r in source:
        rows.append(copy.deepcopy(r))
    lines = rows.lines()
    assert rows.spilled and lines is not None
    read = list(rows)
    assert [line.decode() for line in lines] == [records.dumps(r.to_dict()) for r in read]
    assert read == source and len(rows) == len(source)
    read[0].metrics["e2e_s"] = None  # a row read back is the reader's own
    assert rows[0].metrics.get("e2e_s") == source[0].metrics.get("e2e_s") is not None


def test_the_live_tally_sees_each_request_as_its_row_does(tmp_path, monkeypatch):
    """The client's figures of a case (run.py) read each request's send and end times and its
    tokens from what the live run tallied as the records came (load/tally.py), not from the rows
    the analysis makes later: the same numbers as the rows', spilled or held."""
    from benchy.load.tally import CaseTally
    from benchy.records import read_records
    from benchy.records.plan import Tagged
    from benchy.results import build
    from benchy.results import rows as rows_mod

    records = list(read_records(SHIPPED[0].parent / "requests.jsonl", kind=Tagged))[:40]
    for in_memory in (10**9, 5):
        monkeypatch.setattr(rows_mod, "IN_MEMORY", in_memory)
        made, seen = build.CaseRows(spill_dir=tmp_path), CaseTally()
        for rec in records:
            made.add(rec)
            seen.add(rec)
        rows = list(made.rows)
        assert seen.spans() == [(r.sent_mono_s, r.sent_mono_s + (r.end_s or 0.0)) for r in rows]
        assert seen.client_tokens() == sum(r.completion_tokens or r.events for r in rows)
        assert len(seen) == len(rows) and made.rows.spilled == (in_memory == 5)


def test_a_saved_run_reads_back_a_request_a_line_without_holding_long_cases(tmp_path, monkeypatch):
    """results.json keeps a request a line: a long case's requests read back as rows on disk
    (indexed, not held), the same run as the whole file parsed at once, twice over; a file
    not laid out that way (an older writer's) is read whole."""
    from benchy.results import rows as rows_mod

    run = results_files.read(SHIPPED[0])
    longest = max(len(c.requests) for c in run.cases)
    saved = results_files.save(run, tmp_path)
    monkeypatch.setattr(rows_mod, "IN_MEMORY", longest - 1)
    lazy = results_files.read(saved)
    assert any(isinstance(c.requests, rows_mod.Rows) for c in lazy.cases)
    whole = results_files._read_whole(saved).to_dict()
    assert lazy.to_dict() == whole and lazy.to_dict() == whole  # iterating again reads again
    assert [len(c.measured_ok()) for c in lazy.cases] == [len(c["requests"]) - sum(
        r["warmup"] or r["status"] != "ok" for r in c["requests"]) for c in whole["cases"]]  # fmt: skip
    held = results_files._read_whole(saved)
    for a, b in zip(lazy.cases, held.cases):  # the figures the report reads, from its one pass
        assert a.columns().completion_tokens == b.columns().completion_tokens
        assert all(a.measured_values(m) == b.measured_values(m) for m in registry.REQUEST_METRICS)
    assert any(held.cases[0].measured_values(m) for m in registry.REQUEST_METRICS)
    (tmp_path / "indented.json").write_text(json.dumps(whole, indent=1), encoding="utf-8")
    old = results_files.read(tmp_path / "indented.json")
    assert all(isinstance(c.requests, list) for c in old.cases) and old.to_dict() == whole


def test_a_bad_request_in_a_long_case_read_from_disk_is_one_line(tmp_path):
    """A long case's requests are read when iterated, not when the file is opened: a bad value
    among them still ends `benchy report` with one line naming the file, not a traceback."""
    from tests.conftest import run_benchy, sim_env

    saved = results_files.save(results_files.read(SHIPPED[0]), tmp_path)
    lines = saved.read_text(encoding="utf-8").splitlines(keepends=True)
    row = next(i for i, line in enumerate(lines) if line.startswith("  {") and '"ttft_s":' in line)
    lines[row] = re.sub(r'"ttft_s":(null|[-0-9.e+]+)', '"ttft_s":"fast"', lines[row], count=1)
    saved.write_text("".join(lines), encoding="utf-8")
    done = run_benchy("report", str(saved), "--force", env={**sim_env(), "BENCHY_ROWS_IN_MEMORY": "1"})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(saved) in done.stderr, done.stderr


@pytest.mark.parametrize("rate", [None, 400.0], ids=["closed", "open"])
def test_a_long_case_builds_its_requests_a_window_ahead_of_the_sends(start_sim, monkeypatch, rate):
    """A case longer than its window (load/generator.py Ahead) never holds more than the window
    of built requests ahead of those sent, and still sends every planned request once, in
    order; a case within the window is built whole before its first send, as before."""
    from benchy import run as run_mod
    from benchy.client.client import Client
    from benchy.client.draft import Draft
    from benchy.client.settings import ClientSettings
    from benchy.load import generator
    from benchy.load.plan import LoadSettings
    from benchy.workloads.case import Case

    monkeypatch.setattr(generator, "PREBUILT", 1)  # the window: 4 per stream
    built: list[int] = []
    sent: list[int] = []
    ahead: list[int] = []  # built but not yet sent, as each measured request is built
    plain_planned, plain_stream = generator.planned, Client.stream

    def counting_planned(plan, rec, *args, **kwargs):
        if not rec.warmup:
            built.append(rec.index)
            ahead.append(len(built) - len(sent))
        return plain_planned(plan, rec, *args, **kwargs)

    async def counting_stream(self, rec, *args, **kwargs):
        planned = rec.planned if isinstance(rec, Draft) else rec  # the send loop hands the client a Draft
        if not planned.warmup and planned.index >= 0:
            sent.append(planned.index)
        return await plain_stream(self, rec, *args, **kwargs)

    monkeypatch.setattr(generator, "planned", counting_planned)
    monkeypatch.setattr(Client, "stream", counting_stream)
    sim = start_sim("--preset", "instant")
    n, streams = 40, 2

    def execute(requests: int):
        return run_mod.execute(
            run_mod.RunSettings(
                client=ClientSettings(base_url=sim.base_url),
                cases=[Case(pp=64, tg=4, concurrency=streams, rate=rate)],
                warmup=0,
                progress=False,
                load=LoadSettings(requests=requests, max_inflight=streams if rate else None, workers=1),
            )
        )

    results = execute(n)
    window = 4 * streams
    assert sent == built == list(range(n))  # each once, in order
    # A window ahead, never all of them: the window built, and at most one taken request a stream
    # on its way to its send (it may wait for a turn of a busy loop: load/turns.py).
    assert window <= max(ahead) <= window + streams
    (case,) = results.cases
    assert case.n_ok + case.n_failed == n
    truth_ids = {t.get("request_id") for t in sim.truth()}
    measured_ids = {r.request_id for r in case.requests if not r.warmup}
    assert len(measured_ids) == n and measured_ids <= truth_ids  # the server got each of them
    built.clear(), sent.clear(), ahead.clear()
    short = execute(window)
    assert ahead[-1] == window and sent == list(range(window))  # all built before the first send
    assert short.cases[0].n_ok + short.cases[0].n_failed == window
