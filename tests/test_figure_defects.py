"""The PNG defects a new user tripped on, one test each, and the rule that keeps each fixed: axis
limits come from the measured data (never from a reference line), and nothing is drawn where
its quantity cannot be (an error bar below zero, a change below −100%)."""

from __future__ import annotations

import copy
import json

from benchy.report import capacity as capacity_report
from benchy.report import compare, plots, probe_report
from benchy.results import files as results_files
from benchy.results.capacity import CapacityAnswer, CapacityPoint, CapacityResult, CapacitySetup
from tests.conftest import REPO_ROOT, run_benchy_here
from tests.forkserver import ForkedSim

EXAMPLE = REPO_ROOT / "reports" / "dgx-spark-sim" / "results.json"  # a saved scenario run


def drawn_figures(monkeypatch) -> dict:
    drawn: dict = {}
    real = plots.save

    def spy(fig, path):
        fig.canvas.draw()
        drawn[path.name] = fig
        return real(fig, path)

    monkeypatch.setattr(plots, "save", spy)
    return drawn


def bar_ends(ax, axis: int) -> list[float]:
    """Both ends of every error bar drawn on `ax`, along `axis` (0: x, 1: y), in data units."""
    ends = []
    for container in ax.containers:
        for bars in container.lines[2]:
            ends += [point[axis] for segment in bars.get_segments() for point in segment]
    return ends


def test_error_bars_stop_at_zero(tmp_path, monkeypatch):
    """A case whose spread is wider than its median (bimodal requests): its error bar used to run
    below zero and be cut off by the axis, as if the rate could be negative."""
    results = results_files.read(EXAMPLE)
    wide = copy.deepcopy(results)
    for case in wide.cases:
        for name in ("e2e_tps", "decode_tps", "ttft_s"):
            summary = case.summary.get(name)
            if summary:
                summary.std = 1.5 * summary.median
    drawn = drawn_figures(monkeypatch)
    plots.throughput_vs_prompt(wide, tmp_path)
    plots.ttft_vs_prompt(wide, tmp_path)
    assert drawn
    for name, fig in drawn.items():
        for ax in fig.axes:
            ends = bar_ends(ax, 1)
            if ends:
                assert min(ends) >= 0, (name, ax.get_title(), min(ends))
                assert max(ends) <= ax.get_ylim()[1], (name, ax.get_title())  # and none runs off the top


def test_the_perfect_scaling_line_does_not_squash_the_measured_points(tmp_path, monkeypatch):
    """One slot: four requests in flight get no more throughput than one, so perfect scaling
    runs 4× above the data; it used to set the y axis and flatten the points at its foot."""
    with ForkedSim("--decode-tps", "1000", "--prefill-tps", "50000", "--max-running", "1") as sim:
        proc = run_benchy_here(
            "run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "run"),
            "--pp", "64", "--tg", "32", "-c", "1", "4", "--requests", "8",
        )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    results = results_files.read(tmp_path / "run" / "results.json")
    drawn = drawn_figures(monkeypatch)
    plots.concurrency_scaling(results, tmp_path)
    left = drawn["concurrency.png"].axes[0]
    measured = [c.aggregate_tps for c in results.cases]
    assert max(measured) < 2 * min(measured), "one slot: concurrency 4 cannot scale"
    top = left.get_ylim()[1]
    assert max(measured) <= top <= 1.3 * max(measured), (measured, top)


def test_a_change_never_reads_below_minus_100_percent(tmp_path, monkeypatch):
    """The field case: a TTFT median of 359 ms whose change's interval ran −737 … −7 ms was drawn
    down to −205%, which no time can fall by. The axis stops at −100% and the cut bar says so."""
    change = compare.MetricChange(
        case="pp512 tg128 c1", metric="ttft_s", title="TTFT ms", verdict=compare.FASTER,
        a_median=0.359, b_median=0.1, n_a=10, n_b=10, change=-0.259, change_pct=-72.1, ci95=[-0.737, -0.007],
    )  # fmt: skip
    comparison = compare.Comparison("before", "after", "mann-whitney", 0.05, 0.02, changes=[change])
    drawn = drawn_figures(monkeypatch)
    compare.write_png([comparison], tmp_path / "compare.png")
    fig = drawn["compare.png"]
    ttft = next(ax for ax in fig.axes if ax.get_title().startswith("TTFT"))
    assert ttft.get_xlim()[0] >= -105
    assert min(bar_ends(ttft, 0)) >= -100
    assert [line.get_marker() for line in ttft.get_lines()].count("<") == 1  # the cut is marked


def test_a_cache_capacity_not_found_says_how_far_the_sweep_looked(start_sim, tmp_path, monkeypatch):
    """A cache larger than the sweep: every re-use hits, and the figure was a flat 100% line
    that did not say the cliff was not found, nor that the cache holds at least the largest set."""
    sim = start_sim("--prefill-tps", "50000", "--decode-tps", "3000", "--cache-blocks", "256")  # 4,096 tokens
    proc = run_benchy_here(
        "probe-cache", "--base-url", sim.base_url, "--capacity", "--capacity-prefix-tokens", "256",
        "--capacity-max-tokens", "2048", "--tg", "2", "-q", "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    cap = json.loads(proc.stdout)["capacity"]
    assert cap["cliff_tokens"] is None and all(p["hit_fraction"] == 1 for p in cap["points"])
    largest = max(p["working_set_tokens"] for p in cap["points"])
    drawn = drawn_figures(monkeypatch)
    probe_report.plot_capacity(cap, tmp_path / "capacity.png")
    words = " ".join(t.get_text() for ax in drawn["capacity.png"].axes for t in [ax.title, *ax.texts])
    assert "not found" in words and f"≥ {largest:,}" in words, words


def pareto_result(points: list[tuple[int, float, float, str]], capacity: int) -> CapacityResult:
    return CapacityResult(
        setup=CapacitySetup(case="pp512 tg128", slo={"ttft_s": 0.5}),
        answer=CapacityAnswer("found", capacity, capacity + 1),
        points=[CapacityPoint(load=c, throughput_tps=t, per_user_tps=u, verdict=v) for c, t, u, v in points],
    )


def test_the_pareto_legend_lists_only_what_is_drawn(tmp_path, monkeypatch):
    """c2 beats c1 on both axes: the front is one point, which a dashed line cannot draw, yet the
    legend listed a 'Pareto front'."""
    result = pareto_result([(1, 100.0, 50.0, "pass"), (2, 200.0, 60.0, "pass"), (3, 150.0, 30.0, "fail")], 2)
    assert len(capacity_report.pareto_front(result.points)) == 1
    drawn = drawn_figures(monkeypatch)
    capacity_report.write_figure(result, tmp_path / "capacity-pareto.png")
    ax = drawn["capacity-pareto.png"].axes[0]
    for handle, label in zip(*ax.get_legend_handles_labels()):
        if hasattr(handle, "get_xdata"):  # a line: drawn only with two points, or with a marker
            assert len(handle.get_xdata()) >= 2 or handle.get_marker() not in (None, "None", ""), label


def test_a_capacity_beaten_on_both_axes_says_so(tmp_path, monkeypatch):
    """The star (the highest passing load, c4) sat below c2, which also passes with more total and
    per-user throughput, and nothing said why the answer is not on the front."""
    result = pareto_result(
        [(1, 100.0, 50.0, "pass"), (2, 300.0, 48.0, "pass"), (4, 250.0, 40.0, "pass"), (5, 260.0, 20.0, "fail")], 4
    )
    drawn = drawn_figures(monkeypatch)
    capacity_report.write_figure(result, tmp_path / "capacity-pareto.png")
    texts = " ".join(t.get_text() for t in drawn["capacity-pareto.png"].axes[0].texts)
    assert "c2 passes too and beats the capacity on both axes" in texts, texts
