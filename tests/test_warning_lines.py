"""The warnings after the table, as a user reads them in the terminal: one paragraph per cause
with its cases listed (not one per case), and -q leaving the notes out; results.json keeps
every warning of every case."""

from __future__ import annotations

import json

from benchy.checks.registry import INFO
from tests.conftest import run_benchy_here

# One slot for four requests in flight, and a role chunk sent long before the first token: a
# queueing warning and a note (first_chunk_before_prefill) on each of the two cases.
SIM = ("--max-running", "1", "--role-chunk-first", "--prefill-tps", "4000", "--decode-tps", "400")


def run(sim, out, *flags: str):
    args = ("run", "--base-url", sim.base_url, "--pp", "256", "512", "--tg", "16", "-c", "4", "--runs", "2")
    done = run_benchy_here(*args, "-o", str(out), *flags)
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads((out / "results.json").read_text())["warnings"]


def test_a_cause_shared_by_cases_is_one_paragraph_listing_them_and_quiet_drops_the_notes(start_sim, tmp_path):
    sim = start_sim(*SIM)
    printed, warnings = run(sim, tmp_path / "loud")
    labels = ["pp256 tg16 c4", "pp512 tg16 c4"]
    by_code: dict[str, list[dict]] = {}
    for w in warnings:
        by_code.setdefault(w["code"], []).append(w)
    shared = [code for code, ws in by_code.items() if sorted(w["case"] for w in ws) == labels]
    assert "first_chunk_before_prefill" in shared and len(shared) >= 2, by_code.keys()
    for code in shared:  # each case's warning is saved, but printed once with both cases
        assert printed.count(f": {code} [") == 1, printed
        assert f"{code} [2 cases: {', '.join(labels)}]" in printed
    quiet, again = run(sim, tmp_path / "quiet", "-q")
    notes = {w["code"] for w in again if w["severity"] == INFO}
    assert "first_chunk_before_prefill" in notes
    assert all(f": {code} [" not in quiet for code in notes) and "left out by -q" in quiet
    assert all(f": {w['code']}" in quiet for w in again if w["severity"] != INFO)
