"""A worker's records reach the parent in pieces from a thread of its own (load/handoff.py),
and its trace (load/worker_trace.py) says what the loop spent on the hand-offs and the
collector: judged against the simulator's truth log, with batches far bigger than a piece."""

from __future__ import annotations

import json

from benchy.load.handoff import MAX_RECORDS
from tests.conftest import run_benchy, sim_env


def test_big_batches_arrive_whole_in_pieces_and_the_trace_says_so(start_sim, tmp_path):
    sim = start_sim("--preset", "instant")
    trace = tmp_path / "trace.jsonl"
    env = {**sim_env(), "BENCHY_WORKER_TRACE": str(trace)}
    args = ["--pp", "64", "--tg", "2", "-c", "256", "--runs", "3", "--warmup", "0", "--workers", "2"]
    proc = run_benchy("run", "--base-url", sim.base_url, *args, "-o", str(tmp_path / "out"), "-q", env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    [case] = json.loads((tmp_path / "out" / "results.json").read_text())["cases"]
    measured = {r["request_id"] for r in case["requests"] if not r["warmup"]}
    served = {t["request_id"] for t in sim.truth(expect=768) if t["request_id"] in measured}
    assert len(measured) == len(served) == 768  # every request the server answered, once
    per_worker = case["client"]["per_worker"]
    assert sorted(e["requests"] for e in per_worker) == [384, 384]
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert sorted(x["worker"] for x in lines) == [0, 1]
    for x in lines:
        # 384 records a worker, 128 streams finishing at once: more than a piece holds, cut.
        assert 0 < x["handoff_records_most"] <= MAX_RECORDS
        assert x["handoff_max_records"] <= x["handoff_records_most"]
        assert x["handoffs"] >= 384 / MAX_RECORDS
        assert x["handoff_max_cpu_ms"] <= x["handoff_ms_max"] + 1.0  # CPU within the wall time (clock ticks)
        assert x["gc_pauses"] >= 0 and x["gc_pause_max_cpu_ms"] <= x["gc_pause_ms_max"] + 1.0
