"""A case asked for twice (`--pp 64 64`): the run knows its cases by label (the table,
results.json, compare, the report), so it is measured once with a one-line note; two different
cases under one label are refused, exit 2."""

from __future__ import annotations

import json

from benchy.records import read_records
from tests.conftest import run_benchy


def test_a_repeated_pp_is_measured_once_with_a_note(start_sim, tmp_path):
    sim = start_sim("--instant")
    out = tmp_path / "out"
    done = run_benchy(
        "run", "--base-url", sim.base_url, *"--pp 64 64 --tg 8 --runs 3 --warmup 0".split(), "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "asked for more than once" in line]
    assert len(notes) == 1 and "pp64 tg8" in notes[0]
    results = json.loads((out / "results.json").read_text())
    assert [c["label"] for c in results["cases"]] == ["pp64 tg8"]
    sent = {r.request_id for r in read_records(out / "requests.jsonl")}
    served = {t["request_id"] for t in sim.truth() if t["request_id"] is not None}
    assert len(sent) == 3 and served == sent  # the server saw one case's requests, no second copy


def test_two_different_cases_under_one_label_are_refused(tmp_path):
    scenario = tmp_path / "other_runs.toml"  # (another endpoint is another label: pp64 tg8 completions)
    scenario.write_text('name = "other_runs"\npp = 64\ntg = 8\nruns = 7\n')
    done = run_benchy(
        "run", "--base-url", "http://127.0.0.1:9/v1", "--scenario", str(scenario), "--pp", "64", "--tg", "8"
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if "pp64 tg8" in line]
    assert "runs" in line
