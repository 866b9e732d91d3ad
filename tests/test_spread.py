"""Lengths that vary (issue 54, item 3): --pp-stddev / --tg-stddev draw each request's prompt
and output length from a normal around --pp / --tg; each is built and asked for exactly as
drawn and recorded as its target, judged against what `benchy sim` says it received and made."""

from __future__ import annotations

import json
import statistics

from tests.conftest import run_benchy_here


def _measured(sim, out, *args: str) -> list[dict]:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-o", str(out), "--quiet", "--no-report", *args)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    assert case["n_failed"] == 0
    return [r for r in case["requests"] if not r["warmup"]]


def test_each_request_gets_its_drawn_lengths_exactly(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "2000", "--prefill-tps", "500000", "--max-running", "64")
    args = ("--pp", "512", "--tg", "64", "--pp-stddev", "128", "--tg-stddev", "16", "-c", "8", "--requests", "80")
    measured = _measured(sim, tmp_path / "a", *args)
    truth = {t["request_id"]: t for t in sim.truth()}
    for r in measured:  # exact as drawn: the server got and made what the record says was asked
        t = truth[r["request_id"]]
        assert t["prompt_tokens_sent"] == r["target_prompt_tokens"] == r["prompt_tokens"]
        assert t["completion_tokens"] == r["target_output_tokens"] == r["completion_tokens"]
    prompts = [r["target_prompt_tokens"] for r in measured]
    outputs = [r["target_output_tokens"] for r in measured]
    # Normal around the means: 80 draws put the sample mean within ~4 standard errors and the
    # sample deviation within a third of the asked one.
    assert abs(statistics.mean(prompts) - 512) < 4 * 128 / 80**0.5
    assert abs(statistics.mean(outputs) - 64) < 4 * 16 / 80**0.5
    assert 128 * 2 / 3 < statistics.stdev(prompts) < 128 * 4 / 3
    assert 16 * 2 / 3 < statistics.stdev(outputs) < 16 * 4 / 3
    assert min(prompts) >= 256 and min(outputs) >= 1  # never below half of --pp

    # Seeded by --seed and the request's index alone: spread over two worker processes, the
    # same requests get the same lengths (as the server saw them).
    again = _measured(sim, tmp_path / "b", *args, "--workers", "2")
    truth = {t["request_id"]: t for t in sim.truth()}
    by_index = {r["index"]: truth[r["request_id"]]["prompt_tokens_sent"] for r in again}
    assert by_index == {r["index"]: r["target_prompt_tokens"] for r in measured}


def test_fixed_lengths_stay_fixed_and_workloads_refuse_a_spread(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "2000", "--prefill-tps", "500000")
    measured = _measured(sim, tmp_path / "a", "--pp", "300", "--tg", "20", "--requests", "5")
    assert {(r["target_prompt_tokens"], r["target_output_tokens"]) for r in measured} == {(300, 20)}
    proc = run_benchy_here("run", "--turns", "3", "--tg-stddev", "4")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--pp-stddev and --tg-stddev vary --pp/--tg sweeps only" in proc.stderr
