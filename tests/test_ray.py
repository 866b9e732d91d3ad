"""`--ray`: a case split over Ray actors on a two-node local cluster (ray.cluster_utils), merged
into one result, judged against the simulator's truth log. Marked `ray` (`make test-ray`);
skipped where Ray is not installed (CI's `make install` leaves the extra out)."""

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
from tests.conftest import REPO_ROOT, run_benchy, sim_env
from tests.test_interrupt import wait_for_lines
from tests.test_load import _form

pytestmark = pytest.mark.ray
ray_cluster_utils = pytest.importorskip("ray.cluster_utils", reason="Ray is not installed (pip install 'benchy[ray]')")

SMALL = {"num_cpus": 2, "object_store_memory": 80 * 1024 * 1024}  # Ray's minimum store is 75 MB


@pytest.fixture(scope="module")
def ray_cluster():
    """Two Ray nodes on this machine, two CPUs each: room for two benchy actors per node."""
    cluster = ray_cluster_utils.Cluster(
        initialize_head=True, connect=False, head_node_args={**SMALL, "include_dashboard": False}
    )
    try:
        cluster.add_node(**SMALL)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()


def start(sim, out: Path, address: str, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "benchy", "run", "--base-url", sim.base_url, *args, "-o", str(out), "-q"]
    cmd += ["--ray", address, "--ray-workers-per-node", "2"]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sim_env(), cwd=REPO_ROOT
    )


def finish(proc: subprocess.Popen, out: Path, code: int = 0) -> dict:
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == code and "Traceback" not in stderr, stderr
    return json.loads((out / "results.json").read_text())


def test_merged_result_has_exactly_the_servers_requests_in_one_process_form(start_sim, tmp_path, ray_cluster):
    sim = start_sim("--decode-tps", "1000", "--prefill-tps", "1000000", "--max-running", "64")
    args = ("--pp", "64", "--tg", "16", "-c", "8", "--runs", "5", "--warmup", "2")
    spread = finish(start(sim, tmp_path / "ray", ray_cluster, *args), tmp_path / "ray")
    [case] = spread["cases"]
    per_worker = case["client"]["per_worker"]
    assert len(per_worker) == 4 and len({e["node"] for e in per_worker}) == 2  # two actors per node
    # The actors sent the warmups and the case; this process first sent 3 alone (load/alone.py).
    alone = [r for r in case["requests"] if r["alone"]]
    assert len(alone) == 3 and sum(e["requests"] for e in per_worker) == len(case["requests"]) - 3 == 42
    # Exactly the requests the server saw: every one, once, with the server's token count.
    truth = {t["request_id"]: t for t in sim.truth(expect=45) if t["request_id"]}  # (calibration has none)
    assert sorted(r["request_id"] for r in case["requests"]) == sorted(truth)
    for req in case["requests"]:
        t = truth[req["request_id"]]
        assert req["completion_tokens"] == t["completion_tokens"] == (1 if req["alone"] else 16)
        assert req["sent_mono_s"] <= t["arrival_s"] <= req["sent_mono_s"] + req["end_s"]  # one clock
    on_disk = [r.request_id for r in read_records(tmp_path / "ray" / "requests.jsonl")]
    assert sorted(on_disk) == sorted(truth)
    for entry in per_worker:  # one kernel: no offset applied, the measured one within its bound
        assert entry["clock"]["same_clock"] and abs(entry["clock"]["measured_offset_s"]) <= entry["clock"]["rtt_s"] / 2
    assert spread["setup"]["load"]["ray"] == ray_cluster

    sim_one = start_sim("--decode-tps", "1000", "--prefill-tps", "1000000", "--max-running", "64")
    one = json.loads(_run_here(sim_one, tmp_path / "one", *args))
    # Warnings depend on how busy this machine is (client_overloaded), not on where it ran.
    assert _form(one["cases"]) == _form(spread["cases"])
    ray_load = {k: v for k, v in spread["setup"]["load"].items() if not k.startswith("ray")}
    assert ray_load.keys() == one["setup"]["load"].keys()
    assert case["summary"].keys() == one["cases"][0]["summary"].keys()


def _run_here(sim, out: Path, *args: str) -> str:
    proc = run_benchy("run", "--base-url", sim.base_url, *args, "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    return (out / "results.json").read_text()


def test_open_loop_rate_through_four_actors_is_the_asked_rate(start_sim, tmp_path, ray_cluster):
    sim = start_sim("--preset", "instant")
    args = ("--pp", "64", "--tg", "4", "--rate", "100", "--requests", "240", "--warmup", "0")
    results = finish(start(sim, tmp_path / "out", ray_cluster, *args), tmp_path / "out")
    [case] = results["cases"]
    assert case["n_ok"] == 240 and case["client"]["workers"] == 4
    # The case's own requests: the 3 sent alone before it (load/alone.py) went out seconds
    # earlier, before the actors' clock handshakes and shared start, and are no part of the rate.
    measured = {r["request_id"] for r in case["requests"] if not r["warmup"]}
    arrivals_s = sorted(t["arrival_s"] for t in sim.truth(expect=243) if t["request_id"] in measured)
    assert len(arrivals_s) == 240
    served = (len(arrivals_s) - 1) / (arrivals_s[-1] - arrivals_s[0])
    assert served == pytest.approx(100, rel=0.05)
    assert case["achieved_rate"] == pytest.approx(served, rel=0.02)


def _actor_pids() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"ray::ShareActor"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_a_killed_actor_loses_no_finished_request_and_records_its_lost_ones(start_sim, tmp_path, ray_cluster):
    sim = start_sim("--decode-tps", "200", "--prefill-tps", "100000", "--max-running", "64")
    out = tmp_path / "out"
    proc = start(sim, out, ray_cluster, "--pp", "64", "--tg", "20", "-c", "8", "--runs", "20", "--warmup", "0")
    wait_for_lines(out / "requests.jsonl", 20, proc, timeout=120)
    victim = _actor_pids()[0]
    killed_at = time.perf_counter()
    os.kill(victim, signal.SIGKILL)
    results = finish(proc, out)

    [case] = results["cases"]
    requests = {r["request_id"]: r for r in case["requests"]}
    lost = [r for r in requests.values() if r["error_kind"] == workers.LOST]
    assert lost and case["errors"] == {workers.LOST: len(lost)}
    assert case["client"]["lost_workers"] == 1
    survivors = [e for e in case["client"]["per_worker"] if e["lost"] is None]
    assert len(survivors) == 3 and all(e["requests"] == 40 for e in survivors)  # the run went on
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    finished = {rid for rid, t in truth.items() if t["last_token_event_s"] < killed_at - 4 * worker_side.BATCH_S}
    assert len(finished) >= 8 and all(requests[rid]["status"] == "ok" for rid in finished)


def test_ctrl_c_stops_every_actor_and_keeps_what_was_measured(start_sim, tmp_path, ray_cluster):
    sim = start_sim("--decode-tps", "200", "--prefill-tps", "100000", "--max-running", "64")
    out = tmp_path / "out"
    proc = start(sim, out, ray_cluster, "--pp", "64", "--tg", "20", "-c", "8", "--runs", "100", "--warmup", "0")
    wait_for_lines(out / "requests.jsonl", 20, proc, timeout=120)
    stopped_at = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    results = finish(proc, out, code=130)
    assert results["partial"] and results["stopped"]["by"] == "SIGINT"
    kept = {r["request_id"] for c in results["cases"] for r in c["requests"]}
    assert kept == {r.request_id for r in read_records(out / "requests.jsonl")}
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"] and t["status"] == 200}
    finished = {
        rid for rid, t in truth.items() if (t["last_token_event_s"] or 1e18) < stopped_at - 4 * worker_side.BATCH_S
    }
    assert len(finished) >= 4 and finished <= kept
    deadline = time.monotonic() + 30
    while _actor_pids() and time.monotonic() < deadline:  # the driver killed its actors on the way out
        time.sleep(0.2)
    assert not _actor_pids()


def test_a_local_instance_runs_a_case(start_sim, tmp_path):
    """`--ray local` starts its own small Ray instance, and stops it at the end."""
    sim = start_sim("--preset", "instant")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchy", "run", "--base-url", sim.base_url, "--pp", "64", "--tg", "8", "-c", "2"]
        + ["--runs", "3", "--ray", "local", "-o", str(out), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=sim_env(),
        cwd=REPO_ROOT,
    )
    [case] = finish(proc, out)["cases"]
    assert case["n_ok"] == 6 and case["client"]["workers"] == 1
    assert {r["request_id"] for r in case["requests"]} == {
        t["request_id"]
        for t in sim.truth(expect=10)
        if t["request_id"]  # 3 alone, 1 warmup, 6
    }
