"""A run's results remade from its bundle alone (manifest.json + requests.jsonl): `benchy rebuild`
gives what the run gave, and a run killed with SIGKILL mid-case gets its results back.

Against `benchy sim` over real HTTP; the killed run is judged against the simulator's truth log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from benchy.records import WITNESS_OF, read_records
from tests.conftest import REPO_ROOT, SimSince, run_benchy, run_benchy_here, shared_sim, sim_env, start_benchy
from tests.test_interrupt import wait_for_lines

fast_sim = shared_sim("--prefill-tps", "200000", "--decode-tps", "3000", "--max-running", "64", "--gpus", "2")

MADE = ("results.json", "results.csv", "report.md")  # what a rebuild writes again (figures aside: PNG bytes)


def run_into(sim, out: Path, *flags: str) -> subprocess.CompletedProcess:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *flags)
    assert proc.returncode in (0, 3), proc.stderr  # 3: the run's own warnings, not a failure here
    return proc


WORKLOADS = {
    "sweep with GPU metrics": (
        "--pp", "64", "--tg", "8", "16", "-c", "1", "2", "--runs", "3", "--gpu-metrics", "{dcgm}",
    ),
    "open loop": ("--pp", "64", "--tg", "8", "--rate", "40", "--requests", "12"),
    "multi-turn": ("--turns", "3", "-c", "2", "--pp", "48", "--tg", "8", "--think-time", "exp:5ms", "--cold-baseline"),
    "shared prefix": ("--shared-prefix", "0.75", "--groups", "2", "--pp", "256", "--tg", "8", "-c", "2", "--runs", "2"),
}  # fmt: skip


@pytest.mark.parametrize("flags", WORKLOADS.values(), ids=list(WORKLOADS))
def test_rebuild_remakes_the_runs_own_results_byte_for_byte(fast_sim, tmp_path, flags):
    sim = SimSince(fast_sim)
    out = tmp_path / "run"
    dcgm = sim.base_url.removesuffix("/v1") + "/dcgm/metrics"
    run_into(sim, out, *(f.format(dcgm=dcgm) for f in flags))
    own = {name: (out / name).read_bytes() for name in MADE}
    lines = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()[1:]]
    witnessed = {line[WITNESS_OF]: line["server_tokenize"] for line in lines if WITNESS_OF in line}
    assert witnessed  # the server's /tokenize counts came after their records, on lines of their own
    for name in MADE:
        (out / name).unlink()

    made = run_benchy_here("rebuild", str(out))
    assert made.returncode == 0, made.stderr
    for name in MADE:
        assert (out / name).read_bytes() == own[name], name
    results = json.loads(own["results.json"])
    rows = {r["request_id"]: r for c in results["cases"] for r in c["requests"]}
    assert {
        rid: rows[rid]["token_count"]["server_tokenize"] for rid in witnessed
    } == witnessed  # the late witness counted
    served = {t["request_id"]: t for t in sim.truth(expect=len(rows)) if t.get("request_id")}
    for rid, row in rows.items():  # every row is a request the server served, as it served it
        if row["status"] == "ok":
            assert row["completion_tokens"] == served[rid]["completion_tokens"]


def test_a_run_killed_mid_case_is_rebuilt_from_its_bundle_with_the_cut_named(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "200", "--prefill-tps", "100000")
    out = tmp_path / "killed"
    run = f"run --base-url {sim.base_url} --pp 64 --tg 10 -c 2 4 --runs 200 -q -o {out}"
    proc = start_benchy(*run.split(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_lines(out / "requests.jsonl", 14, proc)  # warmups and the requests sent alone first among them
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert not (out / "results.json").exists() and (out / "manifest.json").is_file()

    made = run_benchy_here("report", str(out))  # no results.json: made from the bundle first
    assert made.returncode == 0, made.stderr
    assert "rebuilding the results from the run's bundle" in made.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["partial"] and results["stopped"]["by"] == "killed"
    assert "'pp64 tg10 c2'" in results["stopped"]["reason"]  # the case under way
    assert results["not_measured"] == [{"case": "pp64 tg10 c4", "reason": "not started"}]
    (case,) = results["cases"]
    finished = [r for r in read_records(out / "requests.jsonl") if not r.warmup]
    assert case["n_ok"] + case["n_failed"] == len(finished) >= 8
    assert "aggregate_tps" in case["unavailable"]  # a rate over part of a case is withheld
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    for row in case["requests"]:  # each one the server served, as it served it
        assert row["completion_tokens"] == truth[row["request_id"]]["completion_tokens"]
        assert row["warmup"] or row["completion_tokens"] == 10
    assert "killed" in (out / "report.md").read_text()

    again = {name: (out / name).read_bytes() for name in MADE}
    assert run_benchy_here("rebuild", str(out)).returncode == 0
    assert {name: (out / name).read_bytes() for name in MADE} == again  # one bundle, one result


def test_report_falls_back_to_the_bundle_when_results_json_is_unreadable(fast_sim, tmp_path):
    sim = SimSince(fast_sim)
    out = tmp_path / "run"
    run_into(sim, out, "--pp", "64", "--tg", "8", "--runs", "3", "--no-report")
    own = (out / "results.json").read_bytes()
    (out / "results.json").write_bytes(own[: len(own) // 2])  # cut: not JSON
    other = tmp_path / "elsewhere"
    made = run_benchy_here("report", str(out), "-o", str(other))
    assert made.returncode == 0, made.stderr
    assert "not JSON" in made.stderr
    assert (other / "results.json").read_bytes() == own and (other / "report.md").is_file()
    assert (other / "manifest.json").read_bytes() == (out / "manifest.json").read_bytes()


def test_rebuild_of_a_folder_without_a_bundle_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "results.json").write_text("{}")
    made = run_benchy_here("rebuild", str(tmp_path))
    assert made.returncode == 2
    assert made.stderr.count("\n") == 1 and "no manifest.json" in made.stderr and "Traceback" not in made.stderr


def test_the_manifest_is_on_disk_before_the_first_measured_request(start_sim, tmp_path):
    """A run killed during its first case still has its setup and plans: the manifest is
    written once calibration is done, before any case's request."""
    sim = start_sim("--decode-tps", "100", "--prefill-tps", "100000")
    out = tmp_path / "early"
    run = f"run --base-url {sim.base_url} --pp 64 --tg 20 --runs 100 -q -o {out}"
    proc = start_benchy(*run.split(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_lines(out / "requests.jsonl", 1, proc)  # the warmup: no measured request yet
    manifest = json.loads((out / "manifest.json").read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert manifest["setup"]["model"] and manifest["setup"]["calibration"]
    assert [c["pp"] for c in manifest["cases"]] == [64] and not manifest["finished"]


SHIPPED = REPO_ROOT / "reports" / "dgx-spark-sim"


def test_the_shipped_run_folder_is_its_bundle_rebuilt(tmp_path):
    """reports/dgx-spark-sim's results and report are what its bundle gives today: a change to
    the analysis that changes them shows here (`benchy rebuild reports/dgx-spark-sim` makes
    them again, no server needed)."""
    for name in ("manifest.json", "requests.jsonl"):
        shutil.copyfile(SHIPPED / name, tmp_path / name)
    made = run_benchy_here("rebuild", str(tmp_path))
    assert made.returncode == 0, made.stderr
    for name in (*MADE, "server.csv"):
        assert (tmp_path / name).read_bytes() == (SHIPPED / name).read_bytes(), name


def test_a_run_without_a_folder_is_analysed_from_a_bundle_it_then_removes(fast_sim, tmp_path):
    """No -o: the bundle goes to a temporary folder, the results are made from it as from any
    bundle (stdout shows them), and nothing is left behind."""
    sim = SimSince(fast_sim)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    made = run_benchy("run", "--base-url", sim.base_url, "-q", "--pp", "64", "--tg", "8", "--runs", "3",
                      "--format", "json", env={**sim_env(), "TMPDIR": str(scratch)})  # fmt: skip
    assert made.returncode in (0, 3), made.stderr
    results = json.loads(made.stdout)
    (case,) = results["cases"]
    ids = [r["request_id"] for r in case["requests"] if not r["warmup"]]
    served = {t["request_id"]: t for t in sim.truth(expect=len(ids)) if t.get("request_id")}
    assert case["n_ok"] == 3 and all(served[rid]["completion_tokens"] == 8 for rid in ids)
    assert list(scratch.iterdir()) == []


def test_a_folder_written_before_bundles_is_rebuilt_from_what_its_results_json_kept(fast_sim, tmp_path):
    """No manifest, no witness lines (as benchy wrote folders before bundles): the manifest is
    made from results.json, the /tokenize counts its rows kept become witness lines, and the
    rebuild gives the same results.json."""
    sim = SimSince(fast_sim)
    out = tmp_path / "old"
    run_into(sim, out, "--pp", "64", "--tg", "8", "16", "-c", "1", "2", "--runs", "3", "--no-report")
    own = (out / "results.json").read_bytes()
    (out / "manifest.json").unlink()
    log = out / "requests.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(line for line in lines if not line.startswith(b'{"witness_of"')))
    assert len(log.read_bytes().splitlines()) < len(lines)  # it had some, and has none now

    made = run_benchy_here("rebuild", str(out), "--no-report")
    assert made.returncode == 0, made.stderr
    assert "made from its results.json" in made.stderr
    assert (out / "results.json").read_bytes() == own
    assert (out / "manifest.json").is_file()


def test_a_run_ended_by_an_error_is_rebuilt_with_the_error_named_not_a_kill(fast_sim, tmp_path):
    sim = SimSince(fast_sim)
    out = tmp_path / "failed"
    failed = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), "--pp", "16", "--tg", "8")
    assert failed.returncode == 1 and "too short" in failed.stderr
    assert not (out / "results.json").exists()
    made = run_benchy_here("rebuild", str(out), "--no-report")
    assert made.returncode == 0, made.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["stopped"]["by"] == "error" and "too short" in results["stopped"]["reason"]
    assert results["cases"] == [] and results["not_measured"][0]["case"] == "pp16 tg8"
