"""How a run ends, seen from outside: a server that dies mid-run, a case that lost most of its
requests, a stop before anything or before every case was measured. Each says plainly what was
and was not measured and exits with the code docs/exit-codes.md gives it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

from benchy import outcome
from tests import conftest
from tests.conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def start_benchy(*args: str) -> subprocess.Popen:
    return conftest.start_benchy("run", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_until(condition, proc: subprocess.Popen, what: str, timeout: float = 60.0) -> None:
    """Polls (bounded) until `condition()`; fails if benchy exits first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"benchy ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.02)


def jsonl_lines(path: Path) -> int:
    """Finished requests in requests.jsonl (its schema header is not one)."""
    return path.read_bytes().count(b'"request_id"') if path.exists() else 0


def test_a_server_that_dies_mid_run_stops_the_run_and_keeps_what_was_measured(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "500", "--prefill-tps", "100000")
    out = tmp_path / "out"
    proc = start_benchy(
        "--base-url",
        sim.base_url,
        "--pp",
        "64",
        "--tg",
        "25",
        "-c",
        "2",
        "4",
        "--runs",
        "400",
        "-o",
        str(out),
        "--reconnect-s",
        "1",
    )
    # 3 requests sent alone first (load/alone.py), then 6 of the case
    wait_until(lambda: jsonl_lines(out / "requests.jsonl") >= 9, proc, "9 finished requests")
    sim.stop()
    killed_at = time.monotonic()
    stdout, stderr = proc.communicate(timeout=60)
    stopped_after_s = time.monotonic() - killed_at

    assert proc.returncode == outcome.EXIT_SERVER_GONE, stderr
    results = json.loads((out / "results.json").read_text())
    assert results["partial"] and results["stopped"]["by"] == "server-gone"
    [case] = results["cases"]
    assert case["label"] == "pp64 tg25 c2" and case["planned_requests"] == 800
    # what was measured is kept, as the server logged it; at most the 2 in flight are lost
    truth = {t["request_id"]: t for t in sim.truth() if t["error"] is None and t["request_id"]}
    ok = {r["request_id"]: r for r in case["requests"] if r["status"] == "ok" and not r["alone"]}
    served = {rid for rid in truth if rid in ok or rid.split("-")[-1].startswith(("0m", "0w"))}
    assert len(ok) >= 6 and set(ok) <= served and len(served - set(ok)) <= 2
    for rid, r in ok.items():
        assert r["completion_tokens"] == truth[rid]["completion_tokens"] == 25
    # it stopped at the third connection failure in a row (the other stream in flight may still
    # finish and be kept), not after 800 requests
    kinds = [r["error_kind"] for r in case["requests"]]
    third = next(i for i in range(2, len(kinds)) if kinds[i - 2 : i + 1] == ["connect"] * 3)
    assert len(kinds) - 1 - third <= 1, kinds
    # a closed loop waited out --reconnect-s 1 before it gave up, no longer
    assert case["n_ok"] + case["n_failed"] < 50 and 1 <= stopped_after_s < 30
    assert results["not_measured"] == [{"case": "pp64 tg25 c4", "reason": "not started"}]
    # the hint fits a dead server: restart it, not "raise --timeout"
    [errors] = [w for w in results["warnings"] if w["code"] == "request_errors"]
    assert "down or unreachable" in errors["hint"] and "--timeout" not in errors["hint"]
    assert re.search(
        r"the server is gone: \d requests in a row could not connect over 1\.\d s, and it did not "
        r"come back within --reconnect-s 1",
        stderr,
    ), stderr
    assert "not measured: pp64 tg25 c4 (not started)" in stderr
    assert "measured: pp64 tg25 c2" in stderr and "cut short" in stderr
    assert "pp64 tg25 c2" in stdout  # the table of what was measured


def test_without_the_stop_a_case_that_lost_most_requests_fails(start_sim, tmp_path):
    """--max-connect-failures 0 sends every planned request to the dead server; the case lost
    most of them, which is a failed case (exit 3), not a clean run."""
    sim = start_sim("--decode-tps", "500", "--prefill-tps", "100000")
    out = tmp_path / "out"
    proc = start_benchy(
        "--base-url", sim.base_url, "--pp", "64", "--tg", "25", "--runs", "40", "--max-connect-failures", "0",
        "-o", str(out), "-q",
    )  # fmt: skip
    wait_until(lambda: jsonl_lines(out / "requests.jsonl") >= 4, proc, "4 finished requests")
    sim.stop()
    _, stderr = proc.communicate(timeout=120)

    results = json.loads((out / "results.json").read_text())
    [case] = results["cases"]
    assert not results["partial"] and results["stopped"] is None
    assert case["n_ok"] + case["n_failed"] == 40  # nothing dropped, nothing stopped
    served = {t["request_id"] for t in sim.truth() if t["error"] is None}
    assert case["n_ok"] == sum(r["request_id"] in served for r in case["requests"] if not r["warmup"])
    assert case["n_failed"] > case["n_ok"]
    [w] = [w for w in results["warnings"] if w["code"] == "request_errors"]
    assert w["severity"] == "error"
    assert proc.returncode == outcome.EXIT_CHECK_FAILED, stderr


def test_a_case_that_lost_most_requests_to_server_errors_fails(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "2000", "--prefill-tps", "100000", "--seed", "1", "--fault", "http500:0.6")
    proc = start_benchy("--base-url", sim.base_url, "--pp", "64", "--tg", "8", "--runs", "10", "--warmup", "0", "-q")
    stdout, stderr = proc.communicate(timeout=120)
    faults = [t for t in sim.truth() if t["fault"] == "http500"]
    measured = [t for t in sim.truth() if (t["request_id"] or "").split("-")[-1].startswith("0m")]
    failed = sum(t["fault"] == "http500" for t in measured)
    assert faults and failed > len(measured) - failed, "the seed must make most requests fail"
    assert f"{failed} of 10 requests failed" in stdout
    assert proc.returncode == outcome.EXIT_CHECK_FAILED, stderr


def test_sigterm_after_the_warmup_says_nothing_was_measured(start_sim, tmp_path):
    # 60 tokens at 30 tok/s: each measured request takes 2 s, so the signal lands inside the first
    sim = start_sim("--decode-tps", "30", "--prefill-tps", "100000")
    out = tmp_path / "out"
    proc = start_benchy(
        "--base-url", sim.base_url, "--pp", "64", "--tg", "60", "-c", "1", "2", "--runs", "3", "-o", str(out), "-q"
    )
    wait_until(lambda: jsonl_lines(out / "requests.jsonl") >= 1, proc, "the warmup")
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)

    assert proc.returncode == outcome.EXIT_TERMINATED == 143, stderr
    results = json.loads((out / "results.json").read_text())
    assert results["cases"] == [] and results["partial"]
    assert results["not_measured"] == [
        {"case": "pp64 tg60", "reason": "stopped during its warmup"},
        {"case": "pp64 tg60 c2", "reason": "not started"},
    ]
    assert not [w for w in results["warnings"] if w["severity"] == "error"]  # nothing failed
    assert "No case was measured." in stdout and "clean" not in stdout and "succeeded" not in stdout
    assert "measured: nothing" in stderr and "not measured: pp64 tg60 c2 (not started)" in stderr


def test_interrupted_during_calibration_says_so(start_sim, tmp_path):
    # every completion waits 30 s for its headers: calibration is where the signal lands
    sim = start_sim("--header-delay-s", "30")
    out = tmp_path / "out"
    proc = start_benchy("--base-url", sim.base_url, "--pp", "64", "--tg", "8", "-o", str(out))
    stderr_lines: list[str] = []
    wait_until(
        lambda: stderr_lines.append(proc.stderr.readline()) or "calibrating" in stderr_lines[-1], proc, "calibration"
    )
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)

    assert proc.returncode == outcome.EXIT_INTERRUPTED
    [line] = stderr.strip().splitlines()
    assert "interrupted (Ctrl-C) while calibrating prompt lengths" in line and "nothing was measured" in line
    assert stdout == "" and not (out / "results.json").exists()


def test_every_exit_code_is_in_the_one_table_of_the_docs():
    table = (DOCS / "exit-codes.md").read_text()
    codes = {v for k, v in vars(outcome).items() if k.startswith("EXIT_")}
    for code in codes:
        assert f"| {code} |" in table, code
    assert "exit-codes.md" in (REPO_ROOT / "README.md").read_text()


def test_a_cut_case_where_nothing_succeeded_says_so_and_shows_no_tail_table():
    """'11 of 12 requests, 11 failed' read as if something was measured; a case without one
    success has no percentiles to tabulate either."""
    from benchy.report import table
    from benchy.results.types import CaseResult, RunResult

    lost = CaseResult(label="pp64 tg4 c4", pp=64, tg=4, concurrency=4, n_ok=0, n_failed=11, planned_requests=12)
    run = RunResult(partial=True, cases=[lost])
    [line] = outcome.measured_lines(run)
    assert line == "measured: pp64 tg4 c4 (11 of 12 requests, all failed: no figure; cut short)"
    assert table.load_markdown(run) is None and "p50 / p90 / p99" not in table.markdown(run)
