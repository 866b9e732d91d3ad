"""The one-way flow of the measurement model: checks only read, reports only read saved results,
withholding is decided where results are built and reported by its code."""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import subprocess
import sys
from dataclasses import replace

from benchy.checks import warnings as checks
from benchy.measure import classify, registry, unavailable
from benchy.measure.ceiling import CeilingSetup
from benchy.records.plan import Tagged
from benchy.results import build as results_build
from benchy.results import files as results_files
from benchy.results import types as results_mod
from benchy.results.setup import Setup
from benchy.workloads.case import Case
from tests.conftest import REPO_ROOT, run_benchy_here, sim_env

EXAMPLE = REPO_ROOT / "reports" / "dgx-spark-sim" / "results.json"


def record(i: int, tg: int, ttft: float, tokens_per_event: int = 1, usage: bool = True) -> Tagged:
    events = max(1, tg // tokens_per_event)
    times = [ttft + 0.01 * k for k in range(events)]
    return Tagged(
        case=f"pp64 tg{tg}",
        run=i,
        index=i,
        warmup=False,
        request_id=f"r{tg}-{i}",
        nonce="n",
        target_prompt_tokens=64,
        target_output_tokens=tg,
        end_s=times[-1] + 0.01,
        token_event_s=times,
        token_event_chars=[4] * events,
        token_event_kinds="c" * events,
        prompt_tokens=64,
        completion_tokens=tg,
        usage_reported=usage,
        content_chars=4 * events,
        sent_mono_s=100.0 + i,
    )


def run_of(cases: list, ceiling: CeilingSetup | None = None) -> results_mod.RunResult:
    """The run of the cases' figures (results_build.case_figures), its warnings with it."""
    view = results_build.run_view(Setup(ceiling=ceiling), cases, partial=False, stopped=None, version="test")
    return view.result(checks.check(view))


def case_of(tg: int, ttft: float, **kw):
    return results_build.case_figures(Case(pp=64, tg=tg), "chat", 3, [record(i, tg, ttft, **kw) for i in range(3)])


def one_case(*args, **kw) -> results_mod.CaseResult:
    """A case built alone (results_build.case_figures' arguments), as a run of it holds it."""
    return run_of([results_build.case_figures(*args, **kw)]).cases[0]


def test_checks_only_read_what_they_check():
    run = results_files.read(EXAMPLE)
    before = copy.deepcopy(run.to_dict())
    found = checks.check(run)
    assert run.to_dict() == before
    assert [w.to_dict() for w in found] == before["warnings"]  # saved results re-check the same


def test_buffering_is_recognised_by_its_code_not_its_words():
    run = run_of([case_of(64, 0.05, tokens_per_event=8)])
    (buffered,) = run.cases
    assert buffered.reason("ttft_s").code == unavailable.BUFFERED and buffered.summary["ttft_s"] is None
    reworded = replace(buffered, unavailable={name: "the stream came in lumps" for name in buffered.unavailable})
    assert "sse_buffering" in {w.code for w in checks.check(replace(run, cases=[reworded]))}
    unbuffered = case_of(64, 0.05)
    assert "sse_buffering" not in {w.code for w in run_of([unbuffered]).warnings}


def test_a_ttft_trend_is_withheld_where_results_are_built_and_reported_once_per_case():
    short, long = case_of(16, 0.05, usage=False), case_of(256, 1.5, usage=False)
    run = run_of([short, long])
    for case in run.cases:
        assert case.summary["ttft_s"] is None and case.reason("ttft_s").code == unavailable.BUFFERED_TREND
        assert (
            {"ttft_s", "decode_tps", "itl_s", "prefill_tps"}
            <= set(case.withheld)
            <= set(registry.STREAM_TIMING_METRICS)
        )
        assert case.summary["e2e_tps"] is not None  # end-to-end stays
        assert all(r.metrics["ttft_s"] is None and "ttft_s" in r.withheld for r in case.requests)
    trend = [w for w in run.warnings if w.code == "sse_buffering"]
    assert [w.case for w in trend] == [c.label for c in run.cases]
    assert trend[0].details.ttft_s_by_tg == {"tg16": 0.05, "tg256": 1.5}


def test_ceilings_are_stored_once_when_results_are_built():
    ceiling = CeilingSetup(bandwidth_gbs=10.0, active_bytes_per_token=1e9)  # 10 tok/s
    run = run_of([case_of(64, 0.05)], ceiling)
    (case,) = run.cases
    assert case.ceiling is not None and case.ceiling.tokens_per_s == 10.0
    assert case.ceiling.decode_pct == 100.0 * case.median("decode_tps") / 10.0
    (w,) = [w for w in run.warnings if w.code == "above_bandwidth_ceiling"]
    assert {e.name for e in w.evidence} == set(w.metrics) and all(e.threshold == 10.0 for e in w.evidence)


def test_an_empty_output_is_a_failure_before_any_statistic():
    empty = dataclasses.replace(record(0, 16, 0.05), content_chars=0, completion_tokens=16)
    case = one_case(Case(pp=64, tg=16), "chat", 1, [empty, record(1, 16, 0.05)])
    assert (case.n_ok, case.n_failed, case.errors) == (1, 1, {"empty_output": 1})
    assert case.summary["e2e_tps"].n == 1


def imports_of(module: str) -> set[str]:
    tree = ast.parse((REPO_ROOT / module).read_text(encoding="utf-8"))
    found = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            found |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
    return found


def test_reports_read_results_only_and_statistics_need_no_plotting():
    """compare draws with plots inside write_png only: its statistics (stats.py) import no matplotlib."""
    assert not {m for m in imports_of("benchy/report/render.py") if m.startswith("benchy.probe")}
    assert not {m for m in imports_of("benchy/checks/warnings.py") if m.startswith("benchy.report")}
    code = (
        "import sys, benchy.report.compare, benchy.measure.stats, benchy.checks.warnings, benchy.results.types;"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=sim_env(), cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_goodput_judges_each_request_by_its_cases_buffering_verdict():
    """One request in four read as a lump (a busy client's late read) does not make the case
    buffered: the case reports its TTFT, and the SLO on TTFT is judged for every request, that
    one included, as the summaries are. A case that is buffered withholds TTFT: no verdict."""
    live = [record(i, 32, 0.05) for i in range(3)]
    lumpy = record(3, 32, 0.05, tokens_per_event=8)
    assert classify.is_buffered(lumpy) and not any(classify.is_buffered(r) for r in live)
    case = one_case(Case(pp=64, tg=32), "chat", 4, [*live, lumpy], slo={"ttft_s": 1.0})
    assert case.summary["ttft_s"] is not None and case.goodput is not None
    assert case.goodput.fraction == 1.0 and case.goodput.unavailable is None
    lumps = [record(i, 32, 0.05, tokens_per_event=8) for i in range(4)]
    buffered = one_case(Case(pp=64, tg=32), "chat", 4, lumps, slo={"ttft_s": 1.0})
    assert buffered.summary.get("ttft_s") is None and buffered.goodput is not None
    assert buffered.goodput.fraction is None and "cannot judge the SLO" in str(buffered.goodput.unavailable)


def test_turn_rows_withhold_what_their_case_withholds():
    """Three turn-1 requests, two buffered: the case's verdict (half or more buffered) withholds
    its TTFT, so the turn row must too; judged alone, the one live request gave 0.2 s."""
    from benchy.workloads.spec import MultiTurn

    records = [dataclasses.replace(record(i, 64, 0.2), conversation=i, turn=1, request_id=f"t1-{i}") for i in range(3)]
    made = [0.05 + 0.02 * k for k in range(64)]  # a token every 20 ms, delivered 16 at a time
    lumps = [made[min(63, (k // 16 + 1) * 16 - 1)] + (k % 16) * 2e-6 for k in range(64)]
    records[1:] = [dataclasses.replace(rec, token_event_s=lumps, end_s=lumps[-1] + 0.001) for rec in records[1:]]
    assert [classify.is_buffered(r) for r in records] == [False, True, True]
    case = results_build.case_figures(
        Case(pp=64, tg=64, concurrency=3, workload=MultiTurn(turns=1)), "chat", 1, records
    )
    run = results_build.run_view(Setup(), [case], partial=False, stopped=None, version="test").result([])
    (case,) = run.cases
    assert case.summary["ttft_s"] is None and case.unavailable_codes["ttft_s"] == unavailable.BUFFERED
    (row,) = case.workload.turns
    assert row.ttft_s is None and row.prefill_tps is None
    assert row.unavailable["ttft_s"] == case.unavailable["ttft_s"]
    assert row.e2e_s is not None  # not a stream timing: kept
    saved = results_mod.RunResult.from_dict(run.to_dict()).cases[0].workload.turns[0]
    assert saved.ttft_s is None and "ttft_s" in saved.unavailable


def test_the_run_result_is_constructed_once_with_its_warnings(start_sim, tmp_path, monkeypatch):
    """Issue 51 item 3: the warnings are checked on the run's view (results/view.RunView) before
    any RunResult exists; the analysis then constructs its one RunResult, with them, and no
    result is made and then made again to hold them."""
    from benchy.analysis import analyze

    sim = start_sim("--preset", "buffered")  # every stream buffered: warnings to hold
    out = tmp_path / "run"
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), "--pp", "64", "--tg", "16")
    assert proc.returncode in (0, 3), proc.stderr
    saved = json.loads((out / "results.json").read_text())
    made = []
    real = results_mod.RunResult.__init__

    def counted(self, *args, **kw):
        real(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(results_mod.RunResult, "__init__", counted)
    run = analyze.analyze(analyze.Bundle.read(out))
    assert len(made) == 1 and made[0] is run
    assert "sse_buffering" in {w.code for w in run.warnings}
    assert [w.to_dict() for w in run.warnings] == saved["warnings"]  # the warnings the run saved


def test_the_run_view_holds_every_field_of_a_run_result_but_its_warnings():
    """RunView.result makes the one RunResult from the view's fields: a field added to RunResult
    and not to the view would be dropped from every result without a word (its schema id is
    the class's own)."""
    import dataclasses

    from benchy.results.view import RunView

    made = {f.name for f in dataclasses.fields(results_mod.RunResult)} - {"warnings", "schema"}
    assert {f.name for f in dataclasses.fields(RunView)} == made
    saved = results_files.read(EXAMPLE)
    assert RunView.of(saved).result(saved.warnings).to_dict() == saved.to_dict()


def test_a_finding_words_its_own_warning():
    """Issue 51 item 2: a trap's words (message, hint; severity by its code's rule) are its
    class's (results/findings.py); the check that registers it asks the finding. A TTFT trend
    and a buffered case, each worded by the finding that withheld its timings."""
    from benchy.results import findings

    trend = run_of([case_of(16, 0.05, usage=False), case_of(256, 1.5, usage=False)])
    worded = [w for w in trend.warnings if w.code == "sse_buffering"]
    grew = findings.BUFFERED_BY_TREND.found_in(trend.cases)
    assert len(worded) == 2 and worded == [findings.BUFFERED_BY_TREND.words(found) for found in grew]
    assert all(w.severity == findings.BUFFERED_BY_TREND.code.rule.severity for w in worded)
    buffered = run_of([case_of(64, 0.05, tokens_per_event=8)])
    (said,) = [w for w in buffered.warnings if w.code == "sse_buffering"]
    found = findings.BUFFERED_STREAMS.found_in(buffered.cases[0])
    assert found is not None and said == findings.BUFFERED_STREAMS.words(found)
    assert findings.BUFFERED_STREAMS.found_in(trend.cases[0]) is None  # withheld by the other finding
    assert findings.BUFFERED_BY_TREND.found_in(buffered.cases) == ()


def test_a_decided_finding_withholds_in_the_result_what_its_warning_says():
    """Issue 51 item 2: a trap decided before the results exist (results/findings.py DECIDED)
    takes the metrics it withholds from its code's one entry; the result built from its verdict
    withholds those (and what is computed from them) in the case and in every request, and the
    warning that words it names the same ones."""
    from benchy.results import findings

    assert [f.code.value for f in findings.DECIDED] == [
        "prefill_holds_queueing",
        "sse_buffering",
        "prefill_holds_queueing",
        "fixed_latency",
    ]
    run = run_of([case_of(16, 0.05, usage=False), case_of(256, 1.5, usage=False)])
    (trend,) = {w.code for w in run.warnings} & {"sse_buffering"}
    expected = set(registry.with_dependents(findings.BufferedTrend().withholds))
    for case in run.cases:
        by_trend = {n for n, code in case.unavailable_codes.items() if code == unavailable.BUFFERED_TREND}
        assert by_trend == expected
        (said,) = [w for w in run.warnings if w.code == trend and w.case == case.label]
        assert set(registry.with_dependents(said.withheld)) == expected
        for r in case.requests:
            assert {n for n, code in r.unavailable_codes.items() if code == unavailable.BUFFERED_TREND} <= expected
            assert set(r.withheld) <= expected and r.withheld  # the values kept for audit, never shown


def test_each_case_result_is_constructed_once_its_verdicts_decided_before(monkeypatch):
    """Issue 51 item 3: decide, then build. Two cases whose TTFT trend withholds their stream
    timings (a verdict across cases) and a buffered one: each CaseResult is made once, already
    holding every verdict (no result is made and then made again with one)."""
    made = []
    real = results_mod.CaseResult.__init__

    def counted(self, *args, **kw):
        made.append(kw.get("label"))
        real(self, *args, **kw)

    monkeypatch.setattr(results_mod.CaseResult, "__init__", counted)
    figures = [case_of(16, 0.05, usage=False), case_of(256, 1.5, usage=False)]  # measured: no result yet
    assert made == []
    run = results_build.run_view(Setup(), figures, partial=False, stopped=None, version="test")
    assert sorted(made) == sorted(c.label for c in run.cases) and len(made) == 2
    assert all(c.reason("ttft_s").code == unavailable.BUFFERED_TREND for c in run.cases)
