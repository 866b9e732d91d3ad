"""A case label names its endpoint when it is not chat, the default (issue 54, item 5): runs
and compares of other APIs read `pp512 tg32 c4 completions`; a plain chat run keeps the
llama-bench label; compare still pairs one run's chat cases with another's completions ones."""

from __future__ import annotations

import dataclasses

import pytest

from benchy.report import compare
from benchy.results import files
from benchy.results.types import CheckWarning
from benchy.workloads.case import Case, with_endpoint
from benchy.workloads.dataset import DatasetSpec
from tests.conftest import SimSince, run_json, shared_sim

sim_for_labels = shared_sim("--instant")


@pytest.mark.parametrize(
    "case, label",
    [
        (Case(pp=512, tg=32, concurrency=4), "pp512 tg32 c4"),
        (Case(pp=512, tg=32, concurrency=4, endpoint="chat"), "pp512 tg32 c4"),
        (Case(pp=512, tg=32, concurrency=4, endpoint="completions"), "pp512 tg32 c4 completions"),
        (Case(pp=512, tg=32, rate=4, endpoint="messages"), "pp512 tg32 r4 messages"),
        (Case(pp=512, tg=32, depth=4096, endpoint="responses"), "pp512 tg32 @ d4096 responses"),
    ],
)
def test_a_label_names_an_endpoint_other_than_chat(case, label):
    assert case.label == label


def test_a_dataset_case_names_it_last():
    spec = DatasetSpec(path="chat.jsonl", mode="natural", entries=8)
    case = Case(pp=0, tg=0, concurrency=4, dataset=spec, endpoint="completions")
    assert case.label == "dataset chat.jsonl c4 completions"


def test_the_runs_endpoint_reaches_the_cases_that_name_none():
    cases = [Case(pp=64, tg=4), Case(pp=64, tg=4, endpoint="messages"), Case(pp=64, tg=4, endpoint="completions")]
    resolved = with_endpoint(cases, "completions")
    assert [c.label for c in resolved] == ["pp64 tg4 completions", "pp64 tg4 messages"]  # two alike: one
    assert [c.label for c in with_endpoint([Case(pp=64, tg=4)], "chat")] == ["pp64 tg4"]


def test_a_run_labels_its_cases_with_the_endpoint_the_server_saw(sim_for_labels, tmp_path):
    """Judged by the simulator's log: every request of a `… completions` case reached
    /v1/completions, and a chat run's labels stay as llama-bench writes them."""
    sim = SimSince(sim_for_labels)
    args = ("--pp", "64", "--tg", "4", "-c", "1", "2", "--runs", "2", "--warmup", "0")
    other = run_json(sim, tmp_path, "--endpoint", "completions", *args)
    assert [c["label"] for c in other["cases"]] == ["pp64 tg4 completions", "pp64 tg4 c2 completions"]
    ids = {r["request_id"] for c in other["cases"] for r in c["requests"]}
    assert ids and {t["endpoint"] for t in sim.truth() if t["request_id"] in ids} == {"completions"}
    chat = run_json(sim, tmp_path, *args)
    assert [c["label"] for c in chat["cases"]] == ["pp64 tg4", "pp64 tg4 c2"]


def test_compare_pairs_cases_across_endpoints_and_reads_each_runs_own_warnings(sim_for_labels, tmp_path):
    """The labels differ, the cases are the same shape: compare pairs them, says that the
    endpoints differ, and a warning on B's case (under B's label) qualifies B's figures."""
    sim = SimSince(sim_for_labels)
    args = ("--pp", "64", "--tg", "4", "--runs", "6", "--warmup", "0")
    a = files.read(_saved(run_json(sim, tmp_path, *args), tmp_path / "a"))
    b = files.read(_saved(run_json(sim, tmp_path, "--endpoint", "completions", *args), tmp_path / "b"))
    flagged = CheckWarning(code="client_overloaded", case="pp64 tg4 completions", metrics=["ttft_s"])
    b = dataclasses.replace(b, warnings=[*b.warnings, flagged])
    result = compare.compare(a, b, "a", "b")
    assert result.only_in_a == [] and result.only_in_b == []
    assert any("a measured the chat endpoint, b completions" in w for w in result.warnings)
    ttft = next(c for c in result.changes if c.metric == "ttft_s")
    assert ttft.case == "pp64 tg4" and any("(b)" in caveat for caveat in ttft.caveats)


def _saved(results: dict, where):
    where.mkdir()
    files.save(results, where)
    return where / "results.json"


def test_a_run_that_mixes_endpoints_measures_both_under_their_own_labels(sim_for_labels, tmp_path):
    """A scenario's completions case beside the same sizes on chat: once refused as two cases
    under one label, now two labels, each case's requests on its own API (the truth log)."""
    sim = SimSince(sim_for_labels)
    scenario = tmp_path / "other_api.toml"
    scenario.write_text('name = "other_api"\npp = 64\ntg = 4\nendpoint = "completions"\n')
    results = run_json(sim, tmp_path, "--scenario", str(scenario), "--pp", "64", "--tg", "4", "--runs", "2")
    truth = {t["request_id"]: t["endpoint"] for t in sim.truth()}
    seen = {c["label"]: {truth[r["request_id"]] for r in c["requests"]} for c in results["cases"]}
    assert seen == {"pp64 tg4 completions": {"completions"}, "pp64 tg4": {"chat"}}


def test_a_rate_knee_per_endpoint_keeps_the_endpoints_apart():
    """Two rate sweeps of one shape, on chat and on completions: two knees, each named with its
    endpoint (the rate is cut out of the label, the endpoint after it kept)."""
    from benchy.results.knee import knees
    from benchy.results.types import CaseResult, Setup
    from benchy.results.view import RunView

    def swept(endpoint: str, sustains: float) -> list[CaseResult]:
        made = []
        for rate in (1.0, 2.0, 4.0):
            label = Case(pp=64, tg=4, rate=rate, endpoint=endpoint).label
            done = min(rate, sustains)
            made.append(CaseResult(label=label, pp=64, tg=4, rate=rate, endpoint=endpoint, request_rate=done, n_ok=10))
        return made

    found = knees(RunView(setup=Setup(), cases=swept("chat", 2.0) + swept("completions", 1.0)))
    assert set(found) == {"pp64 tg4", "pp64 tg4 completions"}
    assert found["pp64 tg4"].kept_up is not None and found["pp64 tg4"].kept_up.rate == 2.0
    assert found["pp64 tg4 completions"].kept_up is not None and found["pp64 tg4 completions"].kept_up.rate == 1.0
