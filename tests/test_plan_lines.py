"""The workload tags stay on the plan, joined by request id (issue 51 item 1; records/plan.py).

requests.jsonl 2.0 writes a plan line for each request as it is sent (its tags, keyed by its id)
and the record without them; the analysis joins the two into the row results.json keeps. Held
here over real HTTP against `benchy sim`, judged against its truth log, and on bundles written
by the 1.x writer (tags inline on each record), which must rebuild to the byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchy.records import REQUESTS_SCHEMA, WITNESS_OF, is_header
from benchy.records.plan import NO_TAGS, PLAN_OF, TAG_NAMES
from tests.conftest import SimSince, run_benchy_here, shared_sim

sim_for_plans = shared_sim("--prefill-tps", "200000", "--decode-tps", "3000", "--max-running", "64")

# Bundles written by benchy at ca80c73 (requests 1.9: the tags on each record's line) against
# `benchy sim`, with their results.json as that benchy made it.
OLD = Path(__file__).parent / "data" / "requests-1.9"


def _lines(out: Path) -> tuple[dict, list[dict], list[dict]]:
    """requests.jsonl's header, its plan lines and its records, in file order (witness lines left out)."""
    header, *rest = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert is_header(header)
    plans = [line for line in rest if PLAN_OF in line]
    records = [line for line in rest if PLAN_OF not in line and WITNESS_OF not in line]
    return header, plans, records


def _run(sim, out: Path, *flags: str) -> dict:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), *flags)
    assert proc.returncode in (0, 3), proc.stderr  # 3: the run's own warnings
    return json.loads((out / "results.json").read_text())


def _rows(results: dict) -> list[dict]:
    return [row for case in results["cases"] for row in case["requests"]]


def _joined_as_planned(out: Path, results: dict) -> dict[str, dict]:
    """Checks the 2.0 file's shape (one plan line per record, before it; no tag on a record's
    line) and that each row's tags are its plan line's; the plan lines by request id."""
    header, plans, records = _lines(out)
    assert header["schema"] == REQUESTS_SCHEMA == "benchy/requests/2.0"
    by_id = {line[PLAN_OF]: line for line in plans}
    assert len(by_id) == len(plans) == len(records)  # one plan line a sent request, none twice
    assert set(by_id) == {r["request_id"] for r in records}
    text = (out / "requests.jsonl").read_text()
    for rid in by_id:  # its plan line was written before its record
        assert text.index(f'{{"{PLAN_OF}":"{rid}"') < text.index(f'"request_id":"{rid}"'), rid
    assert not any(set(TAG_NAMES) & set(r) for r in records)  # the record's line holds no tag
    rows = _rows(results)
    assert {row["request_id"] for row in rows} == set(by_id)
    for row in rows:
        planned = by_id[row["request_id"]]
        for name in TAG_NAMES:  # the row's tags are its plan's (a tag at its default is left off the line)
            assert row.get(name, getattr(NO_TAGS, name)) == planned.get(name, getattr(NO_TAGS, name)), name
    return by_id


def test_a_conversations_rows_carry_the_turns_their_plan_lines_wrote(sim_for_plans, tmp_path):
    """Multi-turn with a cold baseline: each turn's row says its conversation and turn, as its
    plan line wrote them; the server saw the turns of a conversation in that order, and each
    turn expected as cached what the server counted of the turn before (the truth log)."""
    sim = SimSince(sim_for_plans)
    out = tmp_path / "turns"
    results = _run(sim, out, "--turns", "3", "-c", "2", "--pp", "48", "--tg", "8", "--cold-baseline")
    plans = _joined_as_planned(out, results)
    rows = [row for row in _rows(results) if not row["warmup"]]
    truth = {t["request_id"]: t for t in sim.truth(expect=len(plans)) if t.get("request_id")}
    turns = [row for row in rows if not row.get("control")]
    controls = [row for row in rows if row.get("control")]
    assert sorted((r["conversation"], r["turn"]) for r in turns) == [(c, t) for c in (0, 1) for t in (1, 2, 3)]
    for c in (0, 1):
        mine = sorted((r for r in turns if r["conversation"] == c), key=lambda r: r["turn"])
        arrivals = [truth[r["request_id"]]["arrival_s"] for r in mine]
        assert arrivals == sorted(arrivals)  # turn 2 after turn 1, as the tags say
        before = [0] + [truth[r["request_id"]]["prompt_tokens"] for r in mine[:-1]]
        assert [r["expected_cached_tokens"] for r in mine] == before
        assert all(truth[r["request_id"]]["prompt_tokens"] > r["unique_tokens"] > 0 for r in mine)
    assert sorted(r["turn"] for r in controls) == [1, 1, 2, 2, 3, 3]
    assert all(r.get("conversation") is None and r["expected_cached_tokens"] == 0 for r in controls)
    assert all(plans[r["request_id"]]["control"] for r in controls)


def test_a_split_cases_rows_carry_the_tags_their_workers_planned(sim_for_plans, tmp_path):
    """--workers 2, an open loop with an image in each request: the workers plan the tags and
    hand them over with each send (load/handoff.Batch.sent); the parent writes the plan lines,
    its schedule on the parent's clock, and each row has them: the images the server decoded
    (the truth log), a schedule no later than the send."""
    sim = SimSince(sim_for_plans)
    out = tmp_path / "split"
    flags = ("--pp", "64", "--tg", "8", "--rate", "40", "--requests", "12", "--workers", "2")
    results = _run(sim, out, *flags, "--images", "1", "--image-size", "64x64")
    plans = _joined_as_planned(out, results)
    (case,) = results["cases"]
    assert case["client"]["workers"] == 2
    truth = {t["request_id"]: t for t in sim.truth(expect=len(plans)) if t.get("request_id")}
    measured = [row for row in case["requests"] if not row["warmup"]]
    assert len(measured) == 12
    for row in measured:
        assert row["images"] == len(truth[row["request_id"]]["images"]) == 1 and row["image_bytes"] > 0
        assert row["scheduled_mono_s"] is not None and row["scheduled_mono_s"] <= row["sent_mono_s"]
        assert row["local_token_scale"] is not None  # the calibration's scale, as planned


@pytest.mark.parametrize("name", ["multi-turn", "shared-prefix", "rate"])
def test_a_1x_bundle_with_its_tags_inline_rebuilds_to_the_byte(tmp_path, name):
    """The 1.x reader: tags read from each record's own line; results.json as that benchy made it."""
    header = json.loads((OLD / name / "requests.jsonl").read_text().splitlines()[0])
    assert header["schema"] == "benchy/requests/1.9"
    for part in ("manifest.json", "requests.jsonl"):
        shutil.copyfile(OLD / name / part, tmp_path / part)
    made = run_benchy_here("rebuild", str(tmp_path))
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "results.json").read_bytes() == (OLD / name / "results.json").read_bytes()
    rows = _rows(json.loads((tmp_path / "results.json").read_text()))
    tagged = {
        "multi-turn": lambda r: r.get("turn") is not None or r.get("control"),
        "shared-prefix": lambda r: r.get("group") is not None,
        "rate": lambda r: r.get("scheduled_mono_s") is not None,
    }[name]
    assert sum(map(tagged, rows)) >= 6  # the tags came through (the rows are not tagless)
