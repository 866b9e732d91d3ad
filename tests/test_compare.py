"""`benchy compare`: significance-tested differences between runs of `benchy sim`, checked against
the simulator's configured rates and ground-truth log."""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as sps

from benchy.measure import registry, stats
from benchy.report import compare as compare_mod
from benchy.report import compare_write
from benchy.results.types import CheckWarning, ClientHealth, RunResult
from tests.conftest import start_benchy
from tests.forkserver import ForkedSim as SimProcess
from tests.test_report import assert_sensible_png, benchy_here

FAST, SLOW = "200", "100"  # simulated decode rates, tok/s
# Simulated times of 100+ ms, so that a busy test machine's few ms of jitter stay under the 2%
# minimum effect: "identical" must mean identical up to noise, not up to the neighbours' load.
SIM = ("--prefill-tps", "4000", "--max-running", "4")


RUNS = {  # name: (decode rate, flags); each against a simulator of its own, all at once
    "slow": (SLOW, ("--pp", "400", "600")),
    "slow_again": (SLOW, ("--pp", "400", "600")),
    "no_nonce": (SLOW, ("--pp", "400", "--no-nonce")),
    "other_cases": (SLOW, ("--pp", "400", "800")),
    "fast": (FAST, ("--pp", "400", "600")),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """slow, slow_again (same configuration), fast, no_nonce, other_cases: results paths + truth.
    The five runs are real time spent waiting on decodes (tg24 at 100 t/s), so they run at
    once, each a benchy process of its own against a simulator of its own: each run's requests
    are still one at a time on a server that serves only them, judged against its truth log."""
    root = tmp_path_factory.mktemp("compare")
    with contextlib.ExitStack() as stack:
        sims = {
            name: stack.enter_context(SimProcess("--decode-tps", rate, *SIM, truth_log=root / f"{name}-truth.jsonl"))
            for name, (rate, _) in RUNS.items()
        }
        procs = {
            name: start_benchy(
                "run",
                "--base-url",
                sims[name].base_url,
                "--tg",
                "24",
                "--runs",
                "5",
                "--output",
                str(root / name),
                "-q",
                "--no-report",
                *flags,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, (_, flags) in RUNS.items()
        }
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=300)
            assert proc.returncode in (0, 4), f"benchy run ({name}) exited {proc.returncode}: {err}"
    out = {name: root / name / "results.json" for name in RUNS}
    truth = {
        name: [json.loads(line) for line in (root / f"{name}-truth.jsonl").read_text().splitlines()] for name in RUNS
    }
    out["truth"] = {
        "slow": [t for name, (rate, _) in RUNS.items() if rate == SLOW for t in truth[name]],
        "fast": truth["fast"],
    }
    return out


def load(path):
    return json.loads(path.read_text())


def typed(results: dict) -> RunResult:
    return RunResult.from_dict(results)


def truth_decode_tps(truth: list[dict], results: dict) -> float:
    """Median decode rate the simulator really delivered to the run's measured requests."""
    measured = {r["request_id"] for c in results["cases"] for r in c["requests"] if not r["warmup"]}
    rates = [
        (t["completion_tokens"] - 1) / (t["last_token_event_s"] - t["first_token_event_s"])
        for t in truth
        if t["request_id"] in measured
    ]
    return float(np.median(rates))


def stamp_error(results: dict, label: str) -> float:
    """The relative error a case's decode rate may carry on a busy machine: its first and last
    event each stamped late by up to the event-loop lag benchy measured in the case, over the
    case's decode span."""
    case = next(c for c in results["cases"] if c["label"] == label)
    lag_s = (case.get("client") or {}).get("loop_lag_ms_max", 0.0) / 1000
    span_s = (case["tg"] - 1) / case["summary"]["decode_tps"]["median"]
    return 2 * lag_s / span_s


def verdicts(comparison, metric=None):
    return {(c.case, c.metric): c.verdict for c in comparison.changes if metric in (None, c.metric)}


def behind(*results: dict) -> set[str]:
    """Cases in which benchy said it fell behind (client_overloaded) in any of these runs."""
    return {w["case"] for r in results for w in r["warnings"] if w["code"] == "client_overloaded"}


def expected(verdict: str, case: str, late: set[str], withheld: set[str] = frozenset()) -> set[str]:
    """The verdict a real change earns; where benchy fell behind it may instead say the change
    is within its own delay (judged on its own in test_a_change_benchy_own_delay_could_make_is_no_verdict),
    and where either run withheld the figure (a late client's reads look bursty) there is none."""
    allowed = {verdict, compare_mod.CLIENT_DELAY} if case in late else {verdict}
    return allowed | {compare_mod.UNAVAILABLE} if case in withheld else allowed


def withheld(metric: str, *results: dict) -> set[str]:
    """Cases whose figure either run withheld (its summary is null)."""
    return {c["label"] for r in results for c in r["cases"] if c["summary"].get(metric) is None}


def test_faster_decode_is_significant_in_the_right_direction(runs):
    slow, fast = load(runs["slow"]), load(runs["fast"])
    late = behind(slow, fast)
    comp = compare_mod.compare(typed(slow), typed(fast), "slow", "fast")
    for metric in ("e2e_tps", "decode_tps"):
        for (case, _), seen in verdicts(comp, metric).items():
            assert seen in expected(compare_mod.FASTER, case, late, withheld(metric, slow, fast)), (case, metric, seen)
    backwards = compare_mod.compare(typed(fast), typed(slow), "fast", "slow")
    for (case, _), seen in verdicts(backwards, "decode_tps").items():
        assert seen in expected(compare_mod.SLOWER, case, late, withheld("decode_tps", slow, fast)), (case, seen)
    # the measured change matches what the simulator really did, and its CI excludes "no change"
    true_ratio = truth_decode_tps(runs["truth"]["fast"], fast) / truth_decode_tps(runs["truth"]["slow"], slow)
    kept = [change for change in comp.changes if change.case not in withheld("decode_tps", slow, fast)]
    for change in kept:  # a case whose decode one run withheld (a busy machine) has no figure to hold
        if change.metric == "decode_tps":
            tolerance = 0.05 + stamp_error(slow, change.case) + stamp_error(fast, change.case)
            assert change.b_median / change.a_median == pytest.approx(true_ratio, rel=tolerance)
            assert change.p_adjusted < 0.05 and change.ci95[0] > 0


def test_compares_medians_are_the_medians_each_run_saved(runs):
    """compare prints each run's registered per-case figure (the summary its own table showed),
    not a statistic of its own: every median it reports is that run's saved summary median."""
    import ast
    import inspect

    slow, fast = load(runs["slow"]), load(runs["fast"])
    comp = compare_mod.compare(typed(slow), typed(fast), "slow", "fast")
    saved = {
        (side, c["label"], m): summary["median"]
        for side, results in (("a", slow), ("b", fast))
        for c in results["cases"]
        for m, summary in c["summary"].items()
        if summary
    }
    shown = [c for c in comp.changes if c.a_median is not None]
    assert shown
    for change in shown:
        assert change.a_median == saved["a", change.case, change.metric]
        assert change.b_median == saved["b", change.case, change.metric]
    calls = {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(ast.parse(inspect.getsource(compare_mod)))
        if isinstance(node, ast.Call)
    }
    assert not calls & {"median", "mean", "nanmedian", "percentile"}


def truth_medians(truth: list[dict], results: dict, label: str) -> dict[str, float]:
    """What the simulator really delivered to a case's measured requests, per compared metric."""
    case = next(c for c in results["cases"] if c["label"] == label)
    ids = {r["request_id"] for r in case["requests"] if not r["warmup"]}
    mine = [t for t in truth if t["request_id"] in ids]
    return {
        "ttft_s": float(np.median([t["first_token_event_s"] - t["arrival_s"] for t in mine])),
        "e2e_tps": float(
            np.median([t["completion_tokens"] / (t["last_token_event_s"] - t["arrival_s"]) for t in mine])
        ),
        "decode_tps": truth_decode_tps(truth, {"cases": [case]}),
    }


def test_identical_configurations_show_no_significant_difference(runs):
    """Same server, same configuration: a change benchy calls faster or slower must be one the
    simulator really delivered (a loaded machine slows the simulator too, run by run), in the
    same direction and of a size near the minimum effect: benchy's figure adds its own reading
    to the server's (the event loop's wake-up, a busy core), so a 2.1% change it measured was a
    1.5% one in the truth once in CI; half the minimum effect is never noise of its reading."""
    slow, again = load(runs["slow"]), load(runs["slow_again"])
    comp = compare_mod.compare(typed(slow), typed(again), "slow", "slow_again")
    for change in comp.changes:
        if change.verdict in (compare_mod.FASTER, compare_mod.SLOWER):
            a, b = (truth_medians(runs["truth"]["slow"], r, change.case)[change.metric] for r in (slow, again))
            assert (b - a) * change.change > 0 and abs(b / a - 1) >= compare_mod.MIN_EFFECT / 2, (change, a, b)
    assert all(c.p_adjusted is not None for c in comp.changes)  # tested, not skipped


def fell_behind(results: RunResult, lag_s: float) -> RunResult:
    """These results as if benchy had fallen behind in every case, its loop late by up to lag_s."""
    results = kept_up(results)
    lag = ClientHealth(loop_lag_ms_max=lag_s * 1000)
    late = [CheckWarning("client_overloaded", case=c.label, metrics=["ttft_s", "decode_tps"]) for c in results.cases]
    return replace(results, cases=[replace(c, client=lag) for c in results.cases], warnings=[*results.warnings, *late])


def kept_up(results: RunResult) -> RunResult:
    """These results as if benchy had kept up everywhere: on a busy machine a real run may have
    fallen behind too, and its own lag would then join the one a test sets."""
    return replace(
        results,
        warnings=[w for w in results.warnings if w.code != "client_overloaded"],
        cases=[replace(c, client=None) for c in results.cases],
    )


def test_a_change_benchy_own_delay_could_make_is_no_verdict(runs):
    """Where benchy fell behind, each timestamp may be late by up to its loop's longest lag. A
    change that lag can explain is not the server's; one far beyond it still is."""
    slow, fast = load(runs["slow"]), load(runs["fast"])
    span = min(
        c["summary"]["e2e_s"]["median"] - c["summary"]["ttft_s"]["median"] for c in slow["cases"] + fast["cases"]
    )
    judged = set(verdicts(compare_mod.compare(typed(slow), typed(fast)), "decode_tps").values()) - {
        compare_mod.UNAVAILABLE
    }
    assert judged, "no case has a decode rate in both runs"
    late = compare_mod.compare(kept_up(typed(slow)), fell_behind(typed(fast), lag_s=span), "slow", "fast")
    assert set(verdicts(late, "decode_tps").values()) - {compare_mod.UNAVAILABLE} == {compare_mod.CLIENT_DELAY}
    assert all("client_overloaded" in c.reason for c in late.changes if c.verdict == compare_mod.CLIENT_DELAY)
    barely = compare_mod.compare(kept_up(typed(slow)), fell_behind(typed(fast), lag_s=span / 100), "slow", "fast")
    assert set(verdicts(barely, "decode_tps").values()) - {compare_mod.UNAVAILABLE} == {compare_mod.FASTER}


def test_compare_cli_writes_markdown_and_one_png(runs, tmp_path, capsys):
    code, out, err = benchy_here(capsys, "compare", str(runs["slow"].parent), str(runs["fast"]), "-o", str(tmp_path))
    assert code == 0, err
    assert "## fast vs slow" in out and "**faster**" in out
    if not behind(load(runs["slow"]), load(runs["fast"])):
        assert "- fast, decode t/s: **faster** in 2 of 2 cases" in out
    md = (tmp_path / "compare.md").read_text()
    assert "![change per case](compare.png)" in md
    assert_sensible_png(tmp_path / "compare.png")
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert len(saved["comparisons"][0]["changes"]) == 2 * len(registry.COMPARE_METRICS)


def test_different_prompt_nonce_is_refused_unless_forced(runs, capsys):
    code, _, err = benchy_here(capsys, "compare", str(runs["slow"]), str(runs["no_nonce"]))
    assert code == 1 and err.startswith("benchy: error: prompt nonce differs")
    assert err.count("\n") == 1 and "--allow-nonce-mismatch" in err
    code, out, err = benchy_here(capsys, "compare", str(runs["slow"]), str(runs["no_nonce"]), "--allow-nonce-mismatch")
    assert code == 0
    assert "warning: NOT COMPARABLE" in err and "> **Warning:** NOT COMPARABLE" in out


def test_compare_output_folder_follows_the_one_folder_rule(runs, tmp_path, capsys):
    """compare -o refuses a folder that holds files, as run -o and report -o do; --force replaces
    benchy's own files there and leaves the user's."""
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "compare.md").write_text("an older comparison")
    code, _, err = benchy_here(capsys, "compare", str(runs["slow"]), str(runs["fast"]), "-o", str(out))
    assert code == 1 and "not empty" in err and "--force" in err and err.count("\n") == 1
    assert (out / "compare.md").read_text() == "an older comparison"
    code, _, err = benchy_here(capsys, "compare", str(runs["slow"]), str(runs["fast"]), "-o", str(out), "--force")
    assert code == 0, err
    assert "## fast vs slow" in (out / "compare.md").read_text() and (out / "notes.txt").read_text() == "mine"


def test_unmatched_cases_are_reported_and_no_common_case_is_refused(runs, capsys):
    code, out, err = benchy_here(capsys, "compare", str(runs["slow"]), str(runs["other_cases"]))
    assert code == 0, err
    assert "CASES DO NOT MATCH" in err
    assert "only in slow: pp600 tg24" in out and "only in other_cases: pp800 tg24" in out
    table_cases = {line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| pp")}
    assert table_cases == {"pp400 tg24"}
    slow, other = load(runs["slow"]), load(runs["other_cases"])
    other["cases"] = [c for c in other["cases"] if c["pp"] == 800]
    with pytest.raises(compare_mod.CompareError, match="no case in common"):
        compare_mod.compare(typed(slow), typed(other))


def test_compare_needs_two_readable_files(runs, tmp_path, capsys):
    code, _, err = benchy_here(capsys, "compare", str(runs["slow"]))
    assert code == 2 and "at least two" in err
    code, _, err = benchy_here(capsys, "compare", str(runs["slow"]), str(tmp_path / "missing.json"))
    assert code == 1 and "cannot read" in err and err.count("\n") == 1


# ------------------------------------------------------------------ the statistics themselves


def measured_ok(case: dict) -> list[dict]:
    """The requests whose figures a comparison tests: measured, with a value (a late read may
    withhold one request's decode rate)."""
    return [r for r in case["requests"] if not r["warmup"] and r["metrics"]["decode_tps"] is not None]


def test_welch_option_uses_welchs_t_test_on_the_per_request_values(runs):
    slow, fast = load(runs["slow"]), load(runs["fast"])
    comp = compare_mod.compare(typed(slow), typed(fast), test="welch")
    change = next(c for c in comp.changes if c.metric == "decode_tps" and c.p_value is not None)
    case_a = next(c for c in slow["cases"] if c["label"] == change.case)
    case_b = next(c for c in fast["cases"] if c["label"] == change.case)
    a, b = ([r["metrics"]["decode_tps"] for r in measured_ok(case)] for case in (case_a, case_b))
    assert change.p_value == pytest.approx(sps.ttest_ind(a, b, equal_var=False).pvalue)
    assert "Welch t-test" in compare_mod.markdown([comp])


def test_benjamini_hochberg_matches_scipy():
    p = np.random.default_rng(7).uniform(0, 0.3, 40)
    assert np.allclose(stats.benjamini_hochberg(list(p)), sps.false_discovery_control(p))


@pytest.mark.parametrize("n_a, n_b", [(3, 3), (4, 4), (5, 6)])
def test_smallest_possible_p_is_mann_whitney_at_complete_separation(n_a, n_b):
    a, b = list(range(n_a)), list(range(100, 100 + n_b))
    exact = sps.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue
    assert stats.smallest_possible_p(n_a, n_b, "mannwhitney") == pytest.approx(exact)


def test_three_requests_a_side_are_too_few_for_mann_whitney(runs):
    slow, fast = load(runs["slow"]), load(runs["fast"])
    for results in (slow, fast):
        for case in results["cases"]:
            measured = [r for r in case["requests"] if not r["warmup"]]
            case["requests"] = measured[:3]  # as if run with --runs 3
    comp = compare_mod.compare(typed(slow), typed(fast))
    judged = [c for c in comp.changes if c.verdict != compare_mod.UNAVAILABLE]  # n/a: a figure withheld
    assert judged and {c.verdict for c in judged} == {compare_mod.TOO_FEW}
    assert all("use more --runs" in c.reason for c in judged)
    names = [m.name for m in registry.COMPARE_METRICS]
    gone = {(c["label"], m) for r in (slow, fast) for c in r["cases"] for m in names if c["summary"].get(m) is None}
    assert {(c.case, c.metric) for c in comp.changes if c.verdict == compare_mod.UNAVAILABLE} <= gone


def test_a_single_warning_is_counted_in_the_singular(runs):
    one = load(runs["fast"])
    one["warnings"] = [{"code": "client_overloaded", "severity": "warning", "case": None, "message": "m", "hint": "h"}]
    comp = compare_mod.compare(typed(load(runs["slow"])), typed(one), "slow", "fast")
    assert "fast has 1 warning (client_overloaded)" in "\n".join(comp.warnings)


def test_the_setup_table_shows_every_difference_that_can_explain_a_change(tmp_path, capsys):
    """Two llama-servers, 4 slots of 8,192 tokens against 1 of 4,096: the setup table says so
    (slots, context), not only "Started (UTC)"; equal settings stay out of it."""
    saved = {}
    for name, slots, context in (("four", "4", "8192"), ("one", "1", "4096")):
        with SimProcess(
            "--flavor", "llamacpp", "--max-running", slots, "--context-length", context, "--instant"
        ) as sim:
            code, _, err = benchy_here(
                capsys, "run", "--base-url", sim.base_url, "--pp", "64", "--tg", "4", "--runs", "3",
                "-q", "--no-report", "-o", str(tmp_path / name),
            )  # fmt: skip
            assert code == 0, err
        saved[name] = tmp_path / name / "results.json"
    code, out, err = benchy_here(capsys, "compare", str(saved["four"]), str(saved["one"]))
    assert code == 0, err
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert "| 4 | 1 |" in rows["Slots (requests run at once)"]
    assert "| 8,192 | 4,096 |" in rows["Context (tokens a request may hold)"]
    # the same on both: the model, the engine, the flags once the output folder and URL are set aside
    assert not {"Model", "Engine", "Flags"} & set(rows)


def test_the_change_axis_never_goes_below_minus_100_percent(tmp_path, monkeypatch):
    """A noisy median's interval of the difference reaching −205% of the baseline: no time or
    rate falls below zero, so neither the error bar nor the axis goes past −100%."""
    from benchy.report import plots

    seen = []

    def keep(fig, path):
        seen.extend(ax.get_xlim() for ax in fig.axes)
        plots.plt.close(fig)
        return path

    monkeypatch.setattr(plots, "save", keep)
    changes = [
        compare_mod.MetricChange(
            "pp64 tg4",
            m.name,
            m.title,
            "slower",
            a_median=2.0,
            b_median=0.8,
            n_a=20,
            n_b=20,
            change=-1.2,
            change_pct=-60.0,
            ci95=[-4.1, 0.4],
        )  # fmt: skip
        for m in registry.COMPARE_METRICS
    ]
    comp = compare_mod.Comparison("a", "b", "mannwhitney", 0.05, 0.02, changes=changes)
    compare_write.write_png([comp], tmp_path / "compare.png")
    lows = [left for left, _ in seen]
    assert len(lows) == len(registry.COMPARE_METRICS) and all(-105.0 <= low for low in lows), lows
