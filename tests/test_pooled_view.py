"""What a pooling run shows (--endpoint embeddings): its batch where tg would stand, only the
columns such an endpoint has in every report, and no request sent alone before a loaded case
(it has no TTFT for one to be a baseline of). Judged on a real run against `benchy sim`."""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from pathlib import Path

import pytest

from tests.conftest import SimSince, run_benchy_here, shared_sim

sim_fixture = shared_sim("--prefill-tps", "20000", "--max-running", "4")
STREAM_WORDS = ("TTFT", "ITL", "decode", "prefill", "e2e t/s", "aggregate")


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


def run_pooled(sim, tmp_path, *args: str) -> tuple[str, Path]:
    """`benchy run --endpoint embeddings ARGS` with its reports: (what the terminal printed, its folder)."""
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-o", str(out), "--endpoint", "embeddings", *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, out


def test_a_pooling_run_shows_only_the_figures_it_has(sim, tmp_path):
    terminal, out = run_pooled(sim, tmp_path, *"--pp 64 -c 1 3 --runs 3 --batch 2".split())
    results = json.loads((out / "results.json").read_text())
    labels = [c["label"] for c in results["cases"]]
    assert labels == ["pp64 b2 embeddings", "pp64 b2 c3 embeddings"]  # the batch where tg stood
    for case in results["cases"]:  # the reasons stay in results.json
        assert case["unavailable_codes"]["ttft_s"] == "pooled" and case["input_tps"] is not None
    report = (out / "report.md").read_text()
    for text in (terminal, report):
        lines = text.splitlines()
        head = next(i for i, line in enumerate(lines) if "latency ms p50 / p90 / p99" in line)
        table = "\n".join(lines[head : head + 2 + len(labels)])
        assert "req/s" in lines[head] and "input t/s" in lines[head] and "errors" in lines[head]
        assert not any(word in lines[head] for word in STREAM_WORDS), lines[head]
        assert "n/a" not in table and all(label in table for label in labels)
        loaded = next(line for line in lines[head + 2 :] if "total latency ms" in line)  # Latency under load
        assert not any(word in loaded for word in STREAM_WORDS), loaded
    assert "| test | total latency p50 / p90 / p99 ms |" in report  # spread and tails: latency alone
    assert "| test | window s | requests | total latency whole | total latency steady |" in report
    assert "e2e t/s = completion tokens" not in report  # the results' head speaks of a pooling endpoint
    html = (out / "report.html").read_text()
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", html)
    table = heads[: heads.index("errors") + 1]
    assert table == ["test", "n", "latency ms p50 / p90 / p99", "req/s", "inputs/s", "input t/s", "errors"]
    assert heads[len(table) : len(table) + 3] == ["test", "n", "total latency ms p50 / p90 / p99"]  # under load
    names = set(re.findall(r'"name": ?"([^"]*)"', html))  # the figures' series name no output length
    assert "pp64 p50" in names and not any(re.search(r"\btg\d", n) for n in names), names
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text())))
    assert {r["metric"] for r in rows} == {"e2e_s"} and {r["label"] for r in rows} == set(labels)
    for row, case in zip(rows, results["cases"], strict=True):  # the case's pooling figures, as results.json
        assert float(row["input_tps"]) == case["input_tps"] and float(row["input_rate"]) == case["input_rate"]


def test_tg_does_not_part_pooling_cases(sim, tmp_path):
    """--tg means nothing to a pooling request: two of them are one case, not a clash."""
    _, out = run_pooled(sim, tmp_path, *"--pp 64 --tg 8 16 --runs 2 -q --no-report".split())
    results = json.loads((out / "results.json").read_text())
    assert [c["label"] for c in results["cases"]] == ["pp64 b1 embeddings"]


def test_no_request_is_sent_alone_before_a_loaded_pooling_case(sim, tmp_path):
    """Alone requests give a TTFT baseline; a pooling case has no TTFT, so none is sent: every
    request the simulator saw is one of the case's (warmup or measured), each with its batch."""
    _, out = run_pooled(sim, tmp_path, *"--pp 64 -c 3 --runs 2 --warmup 1 --batch 2 -q --no-report".split())
    [case] = json.loads((out / "results.json").read_text())["cases"]
    sent = {r["request_id"] for r in case["requests"]}
    truth = [t for t in sim.truth() if t["request_id"] in sent]
    assert not any(r.get("alone") for r in case["requests"])
    assert len(truth) == len(case["requests"]) == 3 * 2 + 1  # measured and the warmup, nothing alone
    assert all(t["input_tokens"] == [64, 64] for t in truth)
