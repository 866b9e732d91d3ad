"""A capacity search's folder is a bundle: `benchy rebuild DIR` remakes capacity.json and
capacity.md from capacity-manifest.json and its rounds' folders alone, identical to the search's
own; a round whose results.json is lost is remade from that round's own bundle first.

Against `benchy sim` over real HTTP.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchy.capacity.bundle import CAPACITY_MANIFEST
from tests.conftest import run_benchy_here

REMADE = ("capacity.json", "capacity.md")  # what a rebuild writes again (figures aside: PNG bytes)
# Four slots, each request ~42 ms: up to concurrency 4 meets a 70 ms end-to-end target, 8 queues past it.
SIM = ("--max-running", "4", "--prefill-tps", "40000", "--decode-tps", "400", "--batch-slowdown", "0")
SEARCH = ("--pp", "64", "--tg", "16", "--slo", "e2e=70ms", "--max", "8", "--min-requests", "6", "--max-requests", "12")


def search_into(sim, out: Path) -> dict:
    proc = run_benchy_here("capacity", "--base-url", sim.base_url, "-q", "-o", str(out), *SEARCH)
    assert proc.returncode in (0, 8, 9), proc.stderr  # 8: uncertain, 9: benchy fell behind; both saved
    return json.loads((out / "capacity.json").read_text(encoding="utf-8"))


def rebuild(out: Path) -> None:
    proc = run_benchy_here("rebuild", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out / "capacity.json")


def test_rebuild_of_a_capacity_folder_remakes_capacity_json_and_its_report(start_sim, tmp_path):
    sim = start_sim(*SIM)
    out = tmp_path / "capacity"
    result = search_into(sim, out)
    manifest = json.loads((out / CAPACITY_MANIFEST).read_text(encoding="utf-8"))
    rounds = [r["folder"] for p in result["points"] for r in p["rounds"]]
    assert manifest["finished"] and sorted(r["folder"] for r in manifest["rounds"]) == sorted(rounds)
    assert len(rounds) >= 2  # a search, not one point
    made = {name: (out / name).read_bytes() for name in REMADE}

    for name in REMADE:
        (out / name).unlink()
    rebuild(out)
    for name in REMADE:
        assert (out / name).read_bytes() == made[name], name

    # A round that lost its results.json: remade from its own bundle, then the same search.
    lost = out / rounds[-1] / "results.json"
    lost.unlink()
    (out / "capacity.json").unlink()
    rebuild(out)
    assert lost.is_file()
    assert (out / "capacity.json").read_bytes() == made["capacity.json"]

    # `benchy report DIR` of a capacity folder that lost capacity.json rebuilds it, as for a run
    (out / "capacity.json").unlink()
    proc = run_benchy_here("report", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "capacity.json").read_bytes() == made["capacity.json"]


def test_rebuild_of_a_capacity_folder_missing_a_round_is_one_line(start_sim, tmp_path):
    sim = start_sim(*SIM)
    out = tmp_path / "capacity"
    result = search_into(sim, out)
    shutil.rmtree(out / result["points"][0]["rounds"][0]["folder"])
    proc = run_benchy_here("rebuild", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "cannot be read" in proc.stderr and proc.stderr.strip().count("\n") == 0
