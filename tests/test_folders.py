"""One folder, one run: `-o DIR` refuses a folder that holds files unless --force, --force leaves
no file (figures included) that the new results did not make, `--no-report` draws nothing, and `benchy report -o OTHER`
copies the results its report says are beside it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from benchy.records import read_records
from tests.conftest import SimSince, shared_sim
from tests.conftest import run_benchy_here as benchy

FAST = ("--decode-tps", "2000", "--prefill-tps", "200000")
fast_sim = shared_sim(*FAST)  # one for the module (each test reads its own part of the truth log)


def run_into(sim, out: Path, *args: str) -> subprocess.CompletedProcess:
    return benchy(
        "run", "--base-url", sim.base_url, "--pp", "64", "--tg", "8", "--runs", "2", "-q", "-o", str(out), *args
    )


def figures_named_in(report: Path) -> set[str]:
    return set(re.findall(r"figures/([\w.-]+\.png)", report.read_text()))


def test_a_folder_with_an_earlier_run_is_refused_then_replaced_with_force(fast_sim, tmp_path):
    sim = SimSince(fast_sim)
    out = tmp_path / "out"
    first = run_into(sim, out, "-c", "1", "2")
    assert first.returncode == 0, first.stderr
    earlier = (out / "results.json").read_text()
    earlier_figures = {p.name for p in (out / "figures").glob("*.png")}
    assert "concurrency.png" in earlier_figures  # a figure only a concurrency sweep makes
    (out / "notes.txt").write_text("mine")

    refused = run_into(sim, out, "-c", "1")
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert str(out) in line and "not empty" in line and "--force" in line
    assert (out / "results.json").read_text() == earlier  # untouched
    served = len(sim.truth())

    replaced = run_into(sim, out, "-c", "1", "--force")
    assert replaced.returncode == 0, replaced.stderr
    assert len(sim.truth()) > served  # it did run
    results = json.loads((out / "results.json").read_text())
    assert [c["label"] for c in results["cases"]] == ["pp64 tg8"]
    on_disk = {p.name for p in (out / "figures").glob("*.png")}
    assert on_disk == figures_named_in(out / "report.md")  # every figure there is this run's
    assert "concurrency.png" not in on_disk
    ids = {r.request_id for r in read_records(out / "requests.jsonl")}
    assert ids == {r["request_id"] for c in results["cases"] for r in c["requests"]}  # this run's only
    assert (out / "notes.txt").read_text() == "mine"  # only benchy's own files are replaced


def test_report_elsewhere_copies_the_results_it_reports(fast_sim, tmp_path):
    sim = SimSince(fast_sim)
    run_dir, other = tmp_path / "run", tmp_path / "other"
    assert run_into(sim, run_dir, "--no-report").returncode == 0
    assert {p.name for p in run_dir.iterdir()} == {"results.json", "requests.jsonl", "manifest.json"}  # nothing drawn

    made = benchy("report", str(run_dir / "results.json"), "-o", str(other))
    assert made.returncode == 0, made.stderr
    assert (other / "results.json").read_bytes() == (run_dir / "results.json").read_bytes()
    assert (other / "requests.jsonl").read_bytes() == (run_dir / "requests.jsonl").read_bytes()
    assert (other / "manifest.json").read_bytes() == (run_dir / "manifest.json").read_bytes()  # the bundle too
    report = (other / "report.md").read_text()
    assert "results.json" in report and figures_named_in(other / "report.md")
    for name in figures_named_in(other / "report.md"):
        assert (other / "figures" / name).is_file()

    again = benchy("report", str(run_dir), "-o", str(other))
    assert again.returncode == 1 and "--force" in again.stderr
    assert benchy("report", str(run_dir), "-o", str(other), "--force").returncode == 0
    in_place = benchy("report", str(run_dir))  # beside its own results: no copy, no refusal
    assert in_place.returncode == 0, in_place.stderr
    assert (run_dir / "report.md").is_file() and (run_dir / "results.csv").is_file()  # drawn later


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


REFUSED = {
    "prompt over the context": lambda url: ("--base-url", url, "--pp", "40000"),
    "unknown model": lambda url: ("--base-url", url, "--model", "no-such-model"),
    "connection refused": lambda url: ("--base-url", f"http://127.0.0.1:{_closed_port()}/v1"),
    "GPU metrics unreadable": lambda url: ("--base-url", url, "--gpu-metrics", f"http://127.0.0.1:{_closed_port()}/m"),
}


@pytest.mark.parametrize("why", list(REFUSED))
def test_a_run_refused_before_measuring_leaves_nothing_that_blocks_its_rerun(fast_sim, tmp_path, why):
    """A refused run (exit 1 or 2) creates nothing in -o: the corrected rerun into the same
    folder is not told that it "is not empty (requests.jsonl): pass --force"."""
    sim = SimSince(fast_sim)
    out = tmp_path / "runs" / "llama"
    refused = benchy("run", "--tg", "8", "--runs", "1", "-q", "-o", str(out), *REFUSED[why](sim.base_url))
    assert refused.returncode in (1, 2), refused.stderr
    assert not (out.exists() and any(out.iterdir())), sorted(p.name for p in out.iterdir())
    rerun = run_into(sim, out, "-c", "1")
    assert rerun.returncode == 0, rerun.stderr
    assert {"results.json", "requests.jsonl"} <= {p.name for p in out.iterdir()}
