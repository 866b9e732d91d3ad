"""Nothing lost: every finished request is on disk whatever ends a run (SIGKILL included), and
Ctrl-C / SIGTERM save and print the partial results, which `benchy report` accepts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from benchy.cli import main
from benchy.records import is_header, read_records
from benchy.records.plan import PLAN_OF
from tests.conftest import records_in, start_benchy


def start_run(sim, out: Path, tg: int = 25, concurrency: int = 4, *flags: str) -> subprocess.Popen:
    run = f"run --base-url {sim.base_url} --pp 64 --tg {tg} -c {concurrency} --runs 500 -q"
    return start_benchy(*run.split(), *flags, "-o", str(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cells_of(row: str) -> list[str]:
    """The cells of a markdown table row, stripped."""
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def wait_for_lines(path: Path, k: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Polls (bounded) until requests.jsonl holds k records (after its header line); fails if
    benchy exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and records_in(path.read_bytes()) >= k:
            return
        assert proc.poll() is None, f"benchy ended early: {proc.communicate()}"
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"{path} never reached {k} lines")


def test_sigkill_loses_no_finished_request(start_sim, tmp_path):
    """One request at a time, 0.3 s each: a writer that buffered its lines (8 KiB, some six
    records) would hold the last ~1.8 s of requests in memory, and the kill would lose them."""
    sim = start_sim("--decode-tps", "100", "--prefill-tps", "100000")
    out = tmp_path / "killed"
    proc = start_run(sim, out, tg=30, concurrency=1)
    k = 8
    wait_for_lines(out / "requests.jsonl", k, proc)
    time.sleep(1.0)  # more requests finish; the kill lands at no particular moment
    killed_at = time.perf_counter()
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)

    lines = (out / "requests.jsonl").read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends in a newline; else a line cut by the kill
    made = [r for r in map(json.loads, lines) if not is_header(r)]  # every complete line is valid JSON
    records = [r for r in made if PLAN_OF not in r]
    if tail:
        with pytest.raises(ValueError):
            json.loads(tail)
    assert len(records) >= k
    assert [r.request_id for r in read_records(out / "requests.jsonl")] == [r["request_id"] for r in records]
    # each request's plan line (its tags, records/plan.py) went to disk as it was sent, before its record
    planned_at = {r[PLAN_OF]: i for i, r in enumerate(made) if PLAN_OF in r}
    assert all(planned_at[r["request_id"]] < made.index(r) for r in records)

    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    for rec in records:  # every recorded request is one the server really served, as recorded
        served = truth[rec["request_id"]]
        assert rec["status"] == "ok" and rec["completion_tokens"] == served["completion_tokens"] == 30
    # and every request the server had finished 0.75 s before the kill is on disk
    recorded = {r["request_id"] for r in records}
    finished = [rid for rid, t in truth.items() if max(e["t_s"] for e in t["events"]) < killed_at - 0.75]
    assert len(finished) >= k and set(finished) <= recorded


@pytest.mark.parametrize("sig, by, code", [(signal.SIGINT, "SIGINT", 130), (signal.SIGTERM, "SIGTERM", 143)])
def test_interrupt_saves_and_prints_partial_results(start_sim, tmp_path, sig, by, code):
    sim = start_sim("--decode-tps", "500", "--prefill-tps", "100000")
    out = tmp_path / "interrupted"
    proc = start_run(sim, out)
    wait_for_lines(out / "requests.jsonl", 12, proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)

    assert proc.returncode == code, stderr  # 128 + the signal's number
    assert "Traceback" not in stderr
    first, *rest = stderr.strip().splitlines()
    assert first.startswith("benchy: stopped early:")
    assert any(line.strip().startswith("measured: pp64 tg25 c4") and "cut short" in line for line in rest), stderr
    assert rest[-1].strip() == f"partial results saved in {out}"
    assert "pp64 tg25 c4 ⚠ (cut short)" in stdout  # the partial table is printed, the cut case marked
    lines = stdout.splitlines()
    row = next(line for line in lines if line.startswith("| pp64 tg25 c4"))
    header = next(line for line in lines if line.lstrip("| ").startswith("test |"))
    cells = dict(zip(cells_of(header), cells_of(row)))
    # aggregate t/s and req/s withheld with the cut-short footnote (a short prefill's rate may
    # be n/a too on a loaded machine, for its spread: another footnote)
    [cut] = [line.split("]")[0] + "]" for line in lines if line.startswith("[") and "the case was cut short" in line]
    assert cells["aggregate t/s"] == cells["req/s"] == f"n/a {cut}"
    assert "case_cut_short" in stdout

    results = json.loads((out / "results.json").read_text())
    assert results["partial"] is True and results["stopped"]["by"] == by
    on_disk = [
        r
        for r in map(json.loads, (out / "requests.jsonl").read_text().splitlines())
        if not is_header(r) and PLAN_OF not in r
    ]
    [case] = results["cases"]
    assert [r["request_id"] for r in case["requests"]] == [r["request_id"] for r in on_disk]
    assert len(on_disk) >= 12 and case["n_ok"] + case["n_failed"] == len(on_disk) - case["n_warmup"]
    assert case["n_failed"] == 0  # requests cut short by the stop are not passed off as failures
    # a rate over part of a case is not the case's rate: withheld, with the reason, everywhere
    assert case["aggregate_tps"] is None and case["unavailable_codes"]["aggregate_tps"] == "cut_short"
    assert case["request_rate"] is None and "case_cut_short" in {w["code"] for w in results["warnings"]}
    csv_row = (out / "results.csv").read_text().splitlines()[1]
    assert "case_cut_short" in csv_row
    assert "Partial run" in (out / "report.md").read_text()

    (out / "report.md").unlink()
    with pytest.raises(SystemExit) as again:  # `benchy report` re-renders the partial run
        main(["report", str(out / "results.json")])
    assert again.value.code == 0
    assert "Partial run" in (out / "report.md").read_text()


@pytest.mark.slow
def test_interrupt_keeps_what_worker_processes_finished(start_sim, tmp_path):
    """With --workers 2 the records come back from other processes: a stop keeps every one the
    server had finished before it (with 50 ms for the worker to read and send it)."""
    sim = start_sim("--decode-tps", "500", "--prefill-tps", "100000")
    out = tmp_path / "workers"
    proc = start_run(sim, out, 25, 8, "--workers", "2")
    wait_for_lines(out / "requests.jsonl", 20, proc)
    stopped_at = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr

    results = json.loads((out / "results.json").read_text())
    [case] = results["cases"]
    kept = {r["request_id"] for r in case["requests"]}
    assert {r.request_id for r in read_records(out / "requests.jsonl")} == kept
    truth = {
        t["request_id"]: t for t in sim.truth() if t["request_id"] and t["status"] == 200 and t["last_token_event_s"]
    }
    finished = {rid for rid, t in truth.items() if t["last_token_event_s"] < stopped_at - 0.05}
    assert len(finished) >= 10 and finished <= kept
    assert results["setup"]["load"]["workers"] == 2


def test_ctrl_c_while_calibrating_leaves_the_folder_empty(start_sim, tmp_path):
    """Ctrl-C before the first case says "nothing was measured or saved": then nothing is,
    so the same -o takes the rerun without --force. The server holds every response's headers
    30 s, so the interrupt lands in calibration, right after benchy's first line (the banner)."""
    sim = start_sim("--header-delay-s", "30")
    out = tmp_path / "calibrating"
    proc = start_benchy(
        *f"run --base-url {sim.base_url} --pp 64 --tg 4 --runs 1".split(),
        "-o",
        str(out),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    banner = proc.stderr.readline()
    assert banner.startswith(f"benchy: {sim.base_url}"), (banner, proc.communicate())
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "nothing was measured or saved" in err
    assert "interrupted (Ctrl-C) while calibrating" in err  # the run's typed stop, worded
    assert not (out.exists() and any(out.iterdir())), sorted(p.name for p in out.iterdir())
