"""--duration bounds a case (issue 54, item 2): after it, the requests in flight get --drain
(by default as long as --duration); those still in flight then are cut, recorded as cut (not
as server failures), and the case says the server was saturated. Judged over real HTTP against
`benchy sim`, whose truth log says which requests it finished and which it saw aborted."""

from __future__ import annotations

import json

import pytest

from benchy.cli import main
from benchy.load import drain, progress
from benchy.load.plan import CasePlan, LoadSettings
from benchy.workloads.scenario import Case
from tests.conftest import run_benchy_here


def _run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args])
    shown = capsys.readouterr()
    return int(done.value.code or 0), shown.out, shown.err


def _truth_of(sim, requests: list[dict]) -> dict[str, dict]:
    ids = {r["request_id"] for r in requests}
    return {t["request_id"]: t for t in sim.truth(expect=len(ids)) if t["request_id"] in ids}


def test_a_saturated_open_loop_ends_at_duration_plus_drain_and_counts_the_cut(start_sim, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(progress, "PLAIN_LINE_EVERY_S", 0.2)
    # One request at a time, 1 s each: 8 arrivals in the first second would take ~8 s to serve.
    sim = start_sim("--max-running", "1", "--decode-tps", "50", "--prefill-tps", "200000")
    out = tmp_path / "out"
    args = ("--pp", "64", "--tg", "50", "--rate", "8", "--duration", "1", "--drain", "0.5", "--warmup", "0")
    code, table, err = _run(capsys, "--base-url", sim.base_url, "-o", str(out), "--no-report", *args)
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    measured = [r for r in case["requests"] if not r["warmup"]]
    cut = [r for r in measured if r["error_kind"] == drain.DRAIN_CUT]
    finished = [r for r in measured if r["status"] == "ok"]
    assert cut and finished and len(cut) + len(finished) == len(measured)  # none dropped, none else failed

    truth = _truth_of(sim, measured)
    assert set(truth) == {r["request_id"] for r in measured}  # every request the server saw is recorded
    for r in cut:  # the server had not finished them when benchy let go
        assert truth[r["request_id"]]["finish_reason"] == "abort"
        assert truth[r["request_id"]]["completion_tokens"] < 50
    for r in finished:
        assert truth[r["request_id"]]["completion_tokens"] == 50

    start = min(r["scheduled_mono_s"] for r in measured)
    cut_at = [r["sent_mono_s"] + r["end_s"] - start for r in cut]
    assert min(cut_at) >= 1.5 - 0.05  # never before --duration + --drain
    assert max(cut_at) < 1.5 + 4.0  # and far before the ~8 s the queue needed

    assert case["errors"] == {drain.DRAIN_CUT: len(cut)}  # counted as cut
    codes = {w["code"] for w in results["warnings"]}
    assert "saturated" in codes and "request_errors" not in codes  # not as server failures
    (note,) = [w for w in results["warnings"] if w["code"] == "saturated"]
    assert f"{len(cut)} of {len(measured)} requests" in note["message"] and note["details"]["requests"] == len(cut)
    assert results["setup"]["load"]["drain_s"] == 0.5
    assert code == 0
    assert "(draining, at most 0.5 s): " in err  # the progress line said why it went on
    row = next(line for line in table.splitlines() if line.startswith("|") and "r8" in line)
    assert row.rstrip(" |").endswith(f"0 + {len(cut)} cut")  # the table's errors: none failed, these cut


def test_the_drain_defaults_to_the_duration_in_a_closed_loop(start_sim, tmp_path):
    # Two streams of 2 s requests, --duration 0.5: with the default drain (0.5 s) both first
    # requests are cut at ~1 s, well before they could end.
    sim = start_sim("--decode-tps", "50", "--prefill-tps", "200000")
    out = tmp_path / "out"
    args = ("--pp", "64", "--tg", "100", "-c", "2", "--duration", "0.5", "--warmup", "0", "--quiet", "--no-report")
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-o", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    measured = [r for r in results["cases"][0]["requests"] if not r["warmup"]]
    assert len(measured) == 2 and all(r["error_kind"] == drain.DRAIN_CUT for r in measured)
    truth = _truth_of(sim, measured)
    assert all(t["finish_reason"] == "abort" and t["completion_tokens"] < 100 for t in truth.values())
    assert all(0.95 <= r["end_s"] < 1.9 for r in measured)  # cut at duration + drain, not at their 2 s end


def test_drain_needs_a_duration():
    proc = run_benchy_here("run", "--pp", "8", "--drain", "5")
    assert proc.returncode == 2
    assert "--drain needs --duration" in proc.stderr and "Traceback" not in proc.stderr


def test_a_plan_without_duration_has_no_drain_bound():
    case = Case(pp=8, tg=8, concurrency=1)
    assert CasePlan(case, 0, 1, 0, "chat", "s").drain_window == float("inf")
    assert CasePlan(case, 0, 1, 0, "chat", "s", duration_s=30).drain_window == 10  # drain.default_drain
    assert CasePlan(case, 0, 1, 0, "chat", "s", duration_s=30, drain_s=0).drain_window == 0


@pytest.mark.parametrize("duration, expected", [(1, 1), (8, 8), (30, 10), (60, 15), (400, 100)])
def test_the_default_drain_is_a_quarter_of_the_duration_within_bounds(duration, expected):
    """A quarter of --duration, at least 10 s (an unsaturated server's last requests end on their
    own), never more than the duration: a saturated case lasts at most 1.25 × its duration
    once the duration is 40 s or more (the README's --duration 60: 75 s, not 120 s)."""
    assert drain.default_drain(duration, None) == expected
    assert drain.default_drain(duration, 3.0) == 3.0
    assert drain.default_drain(None, None) is None
    assert expected <= duration and (duration < 40 or duration + expected <= 1.25 * duration)


def test_results_say_the_drain_the_cases_got():
    """setup.load.drain_s is the drain applied, default included, so a reader (and the saturated
    check's words) never has to know the default; without --duration there is none."""
    assert LoadSettings(duration_s=60).saved().to_dict()["drain_s"] == 15
    assert LoadSettings(duration_s=60, drain_s=0).saved().to_dict()["drain_s"] == 0
    assert "drain_s" not in LoadSettings().saved().to_dict()
