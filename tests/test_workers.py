"""A case split over local worker processes (workers.py): the clock handshake, and a worker
killed mid-case, judged against the simulator's truth log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchy.load import worker_side, workers
from benchy.records import read_records
from tests.conftest import REPO_ROOT, sim_env, start_benchy, worker_pids
from tests.test_interrupt import wait_for_lines


def _start(sim, out: Path, *flags: str) -> subprocess.Popen:
    args = ["--pp", "64", "--tg", "20", "-c", "4", "--runs", "40", "--warmup", "0", "--workers", "2"]
    return start_benchy(
        "run",
        "--base-url",
        sim.base_url,
        *args,
        "-o",
        str(out),
        "-q",
        *flags,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_one_worker(proc: subprocess.Popen, out: Path) -> float:
    wait_for_lines(out / "requests.jsonl", 16, proc)
    victim = worker_pids(proc.pid)[0]
    killed_at = time.perf_counter()
    os.kill(victim, signal.SIGKILL)
    return killed_at


@pytest.mark.parametrize("limit", [None, "0"])
def test_a_killed_worker_loses_no_finished_request_and_records_its_lost_ones(start_sim, tmp_path, limit):
    """The run goes on without the lost worker (or stops, as --max-errors 0 says); what the server
    had finished well before the kill is kept; what the worker had in flight is `worker_lost`."""
    sim = start_sim("--decode-tps", "200", "--prefill-tps", "100000", "--max-running", "64")
    out = tmp_path / "out"
    proc = _start(sim, out, *(["--max-errors", limit] if limit else []))
    killed_at = _kill_one_worker(proc, out)
    _, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == (5 if limit else 0), stderr

    results = json.loads((out / "results.json").read_text())
    [case] = results["cases"]
    requests = {r["request_id"]: r for r in case["requests"]}
    lost = [r for r in requests.values() if r["error_kind"] == workers.LOST]
    assert lost and all(r["status"] == "error" and "in flight" in r["error"] for r in lost)
    assert case["errors"] == {workers.LOST: len(lost)}  # nothing else failed
    assert case["client"]["lost_workers"] == 1
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    ended = {rid: t["last_token_event_s"] for rid, t in truth.items() if t["last_token_event_s"] is not None}
    finished = {
        rid for rid, end in ended.items() if end < killed_at - 4 * worker_side.BATCH_S
    }  # (None: cut before a token)
    assert len(finished) >= 4
    assert all(requests[rid]["status"] == "ok" for rid in finished)  # kept, and as they were
    if limit:
        assert results["stopped"]["by"] == "max-errors" and results["partial"]
    else:
        # the other worker sent its whole share (half of the 160 requests)
        survivor = [e for e in case["client"]["per_worker"] if e["lost"] is None]
        assert len(survivor) == 1 and survivor[0]["requests"] == 80
        assert case["n_ok"] >= 80 and not results["partial"]
    on_disk = {r.request_id for r in read_records(out / "requests.jsonl")}
    assert on_disk == set(requests)


def test_clock_handshake_on_one_kernel_finds_no_offset(start_sim, tmp_path):
    """Workers on the parent's kernel share its clock: no offset is applied, and the one the
    handshake measured lies within its own uncertainty (half the best round trip) of zero."""
    sim = start_sim("--decode-tps", "1000", "--prefill-tps", "1000000")
    out = tmp_path / "out"
    proc = _start(sim, out)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    [case] = json.loads((out / "results.json").read_text())["cases"]
    per_worker = case["client"]["per_worker"]
    assert [e["worker"] for e in per_worker] == [0, 1]
    for entry in per_worker:
        clock = entry["clock"]
        assert clock["same_clock"] and clock["offset_s"] == 0 and clock["uncertainty_s"] == 0
        assert abs(clock["measured_offset_s"]) <= clock["rtt_s"] / 2
    assert sum(e["requests"] for e in per_worker) == case["n_ok"] == 160


def test_ray_without_ray_installed_is_one_line_saying_how_to_install():
    blocked = "import sys; sys.modules['ray'] = None; from benchy.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", blocked, "run", "--base-url", "http://127.0.0.1:9/v1", "--ray", "-q"],
        capture_output=True,
        text=True,
        env=sim_env(),
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert "--ray needs Ray" in line and "pip install 'benchy[ray]'" in line
