"""`benchy run` end to end, over real HTTP, against the simulator's ground-truth log."""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_benchy_here, truth_slack_s, warning_codes


def benchy(*args: str) -> subprocess.CompletedProcess:
    return run_benchy_here(*args)


def run_json(sim, tmp_path, *args: str) -> dict:
    out = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh folder per run: -o refuses one in use
    proc = benchy("run", "--base-url", sim.base_url, "--quiet", "--output", str(out), "--no-report", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


def measured(results: dict) -> list[tuple[dict, dict]]:
    return [(case, r) for case in results["cases"] for r in case["requests"] if not r["warmup"]]


def truth_by_request(sim) -> dict[str, dict]:
    return {t["request_id"]: t for t in sim.truth()}


def truth_ttft(t: dict) -> float:
    return t["first_token_event_s"] - t["arrival_s"]


def truth_end(t: dict) -> float:
    return max(e["t_s"] for e in t["events"])


def test_run_matches_ground_truth(start_sim, tmp_path):
    # Every figure is held to the truth within benchy's measured slack, which no rate changes:
    # the rates only set how long the 12 requests take (~5 s of simulated time).
    sim = start_sim("--prefill-tps", "8000", "--decode-tps", "400")
    results = run_json(sim, tmp_path, "--pp", "512", "2048", "--tg", "32", "128", "--runs", "3", "--warmup", "0")
    truth = truth_by_request(sim)
    assert [c["label"] for c in results["cases"]] == ["pp512 tg32", "pp512 tg128", "pp2048 tg32", "pp2048 tg128"]
    assert results["prompt_nonce"] is True and warning_codes(results, truth=truth) == set()
    # A busy simulator can fall so far behind that it writes a stream in bursts: benchy then rightly
    # withholds the case's stream timing (sse_buffering), which warning_codes lets pass only where
    # the truth shows those bursts.
    buffered = {
        c["label"]: any(w["code"] == "sse_buffering" and w["case"] == c["label"] for w in results["warnings"])
        for c in results["cases"]
    }
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_ok"] == 3 and len(reqs) == 3
        for r in reqs:
            t, m = truth[r["request_id"]], r["metrics"]
            slack = truth_slack_s(case, t)  # benchy's measured lateness plus the simulator's
            # Exact output length, prompt length within ±1% of the target as the server counts it.
            assert r["completion_tokens"] == case["tg"] == t["completion_tokens"]
            assert abs(r["prompt_tokens"] - case["pp"]) <= 0.01 * case["pp"]
            # Each figure's times are the server's, seen at most `slack` late at either end (a
            # busy simulator stamps late too: its arrival stamp after it got round to the request).
            assert abs(m["e2e_s"] - (truth_end(t) - t["arrival_s"])) <= slack
            if m["ttft_s"] is None:  # withheld: only where the simulator fell behind (above)
                assert buffered[case["label"]] and r["unavailable_codes"]["ttft_s"]
                continue
            assert abs(m["ttft_s"] - truth_ttft(t)) <= slack
            assert abs((t["prompt_tokens"] - t["cached_tokens"]) / m["prefill_tps"] - truth_ttft(t)) <= slack
            decode_span = (case["tg"] - 1) / m["decode_tps"]  # one token per event
            assert abs(decode_span - (truth_end(t) - t["first_token_event_s"])) <= 2 * slack
        for name in ("ttft_s", "e2e_s", "decode_tps", "prefill_tps") if not buffered[case["label"]] else ("e2e_s",):
            assert case["summary"][name]["median"] == statistics.median(r["metrics"][name] for r in reqs)


def test_every_request_starts_with_its_own_nonce(start_sim, tmp_path):
    sim = start_sim("--prefill-tps", "200000", "--decode-tps", "2000")
    results = run_json(sim, tmp_path, "--pp", "64", "--tg", "4", "--runs", "4", "-c", "1", "2")
    nonces = [r["nonce"] for case in results["cases"] for r in case["requests"]]
    assert len(nonces) == 4 + 8 + 2 and len(set(nonces)) == len(nonces) and all(nonces)


def test_back_to_back_runs_get_no_cache_hits_beyond_the_template(start_sim, tmp_path):
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "1000")
    first = run_json(sim, tmp_path, "--pp", "600", "--tg", "8", "--runs", "3")
    second = run_json(sim, tmp_path, "--pp", "600", "--tg", "8", "--runs", "3")
    template = second["setup"]["calibration"]["overhead_tokens"]
    truth = truth_by_request(sim)
    for results in (first, second):
        for _, r in measured(results):
            assert truth[r["request_id"]]["cached_tokens"] <= template
    # The cache is really on: without the nonce, repeats are served from it.
    repeated = run_json(sim, tmp_path, "--pp", "600", "--tg", "8", "--runs", "3", "--no-nonce")
    assert repeated["prompt_nonce"] is False
    assert all(truth_by_request(sim)[r["request_id"]]["cached_tokens"] > template for _, r in measured(repeated))
    assert any(w["code"] == "prefix_cache_hit" for w in repeated["warnings"])


def test_concurrency_keeps_n_in_flight(start_sim, tmp_path):
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "200", "--max-running", "8")
    results = run_json(sim, tmp_path, "--pp", "64", "--tg", "20", "--runs", "3", "-c", "4", "--warmup", "0")
    truths = [truth_by_request(sim)[r["request_id"]] for _, r in measured(results)]
    assert len(truths) == 12
    # At every arrival after the first wave, exactly 3 others are in flight (closed loop).
    spans = [(t["arrival_s"], max(e["t_s"] for e in t["events"])) for t in truths]
    peak = max(sum(1 for a, b in spans if a <= s < b) for s, _ in spans)
    assert peak == 4
    assert results["cases"][0]["aggregate_tps"] > results["cases"][0]["summary"]["e2e_tps"]["median"] * 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]


def test_server_down_is_one_line(tmp_path):
    proc = benchy("run", "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--quiet")
    assert_one_line_error(proc, "cannot reach the server")


def test_wrong_model_lists_served_models(start_sim):
    sim = start_sim("--model", "served-model")
    proc = benchy("run", "--base-url", sim.base_url, "--model", "nope", "--quiet")
    assert_one_line_error(proc, "'nope' is not served", "served-model")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--pp", "0"], "--pp must be whole numbers ≥ 1"),
        (["--tg", "-5"], "--tg"),
        (["--runs", "0"], "--runs"),
        (["--base-url", "localhost:8000/v1"], "must start with http"),
        (["--scenario", "nope"], "unknown scenario"),
        (["--bogus"], "No such option"),
    ],
)
def test_bad_flags_are_one_line(args, needle):
    assert_one_line_error(benchy("run", *args, "--quiet"), needle)


def test_multi_value_flags_make_every_combination(start_sim, tmp_path):
    sim = start_sim("--prefill-tps", "200000", "--decode-tps", "5000")
    out = tmp_path / "o"
    proc = benchy(
        "run",
        "--base-url",
        sim.base_url,
        "--pp",
        "64",
        "128",
        "256",
        "--tg",
        "2",
        "4",
        "--runs",
        "1",
        "--warmup",
        "0",
        "--quiet",
        "--format",
        "csv",
        "-o",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    labels = [c["label"] for c in json.loads((out / "results.json").read_text())["cases"]]
    assert labels == ["pp64 tg2", "pp64 tg4", "pp128 tg2", "pp128 tg4", "pp256 tg2", "pp256 tg4"]
    assert proc.stdout.startswith("label,scenario,pp,tg,concurrency")
    assert (out / "report.md").is_file() and (out / "requests.jsonl").is_file()
