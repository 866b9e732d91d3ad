"""The PNG defects a new user tripped on, one test each, and the rule that keeps each fixed: axis
limits come from the measured data (never from a reference line), and nothing is drawn where
its quantity cannot be (an error bar below zero, a change below −100%)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Annotation

from benchy.report import capacity as capacity_report
from benchy.report import compare, compare_write, plots, probe_report, render, server_view, workload_plots
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


def _widened(summary: dict) -> dict:
    """The summaries with a spread wider than their median (results are frozen: new ones)."""
    wide = ("e2e_tps", "decode_tps", "ttft_s")
    return {k: replace(v, std=1.5 * v.median) if v and k in wide else v for k, v in summary.items()}


def test_error_bars_stop_at_zero(tmp_path, monkeypatch):
    """A case whose spread is wider than its median (bimodal requests): its error bar used to run
    below zero and be cut off by the axis, as if the rate could be negative."""
    results = results_files.read(EXAMPLE)
    wide = replace(results, cases=[replace(c, summary=_widened(c.summary)) for c in results.cases])
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
    compare_write.write_png([comparison], tmp_path / "compare.png")
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


@pytest.fixture(scope="module")
def llamacpp_run(tmp_path_factory):
    """A llama.cpp-like server (its /metrics has no TTFT histograms, its responses carry timings)
    whose prefill runs at 12,000 tokens/s: an axis that crosses 10,000."""
    out = tmp_path_factory.mktemp("llamacpp") / "run"
    with ForkedSim("--flavor", "llamacpp", "--prefill-tps", "12000", "--decode-tps", "400") as sim:
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out),
                               "--pp", "512", "2048", "--tg", "16", "--runs", "3")  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    return results_files.read(out / "results.json")


def test_the_server_view_names_only_the_sides_it_draws(llamacpp_run, tmp_path, monkeypatch):
    """The left panel once drew client bars only under the title 'client vs server split'. Every
    server part it names has a bar drawn, and the title says 'split' only when one is; llama.cpp
    publishes its prompt time (timings.prompt_ms) but no queue, so its prefill part is drawn alone."""
    drawn = drawn_figures(monkeypatch)
    server_view.figure(llamacpp_run, tmp_path)
    left = drawn["server_view.png"].axes[0]
    bars = {c.get_label(): c for c in left.containers}
    server_parts = [label for label in left.get_legend_handles_labels()[1] if label.startswith("server")]
    for label in server_parts:
        assert any(bar.get_width() > 0 for bar in bars[label]), label
    assert server_parts == ["server: prefill"], server_parts
    title = left.get_title()
    assert ("no split" not in title and "split" in title) == bool(server_parts), title


def test_a_value_axis_writes_its_ticks_in_one_unit(llamacpp_run, tmp_path, monkeypatch):
    """Ticks of 7,500 beside 10k and 12.5k read as three units on one axis, crowded together."""
    drawn = drawn_figures(monkeypatch)
    server_view.figure(llamacpp_run, tmp_path)
    fig = drawn["server_view.png"]
    assert max(ax.get_xlim()[1] for ax in fig.axes) >= 10_000, "the prefill axis crosses 10,000"
    for ax in fig.axes:
        low, high = ax.get_xlim()
        shown = [t.get_text() for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high and t.get_text()]
        styles = {"k" if s.endswith("k") else "M" if s.endswith("M") else "plain" for s in shown if s != "0"}
        assert len(styles) <= 1, (ax.get_title(), shown)
        assert len(shown) <= 7, (ax.get_title(), shown)


def test_the_per_turn_figure_shows_each_turns_n_and_its_requests(tmp_path, monkeypatch):
    """Two conversations: each turn's median is two requests, and the figure drew the median
    alone, so one slow request looked like a trend."""
    with ForkedSim("--decode-tps", "1000", "--prefill-tps", "50000") as sim:
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "run"),
                               "--turns", "3", "-c", "2", "--pp", "64", "--tg", "8")  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    results = results_files.read(tmp_path / "run" / "results.json")
    case = next(c for c in results.cases if c.kind == "multi_turn")
    drawn = drawn_figures(monkeypatch)
    workload_plots.figures(results, tmp_path)
    left = next(f for name, f in drawn.items() if name.startswith("workload-turns")).axes[0]
    ticks = [t.get_text() for t in left.get_xticklabels()]
    rows = {r.turn: r.n_ok for r in case.workload.turns}  # type: ignore[union-attr]
    assert ticks == [f"{turn}\nn = {n}" for turn, n in rows.items()], ticks
    measured = [r for r in case.requests if not r.warmup and not r.control and r.status == "ok" and r.turn]
    dots = sum(len(c.get_offsets()) for c in left.collections)
    assert dots == len(measured) == sum(rows.values())


def test_a_per_turn_figure_with_every_ttft_withheld_says_why_in_its_place(tmp_path, monkeypatch):
    """A buffered stream withholds TTFT in every turn: the figure was silently left out, and a
    reader could not tell it from a run without turns."""
    with ForkedSim("--preset", "buffered", "--decode-tps", "1000", "--prefill-tps", "50000") as sim:
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "run"),
                               "--turns", "2", "-c", "2", "--pp", "64", "--tg", "16")  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    results = results_files.read(tmp_path / "run" / "results.json")
    case = next(c for c in results.cases if c.kind == "multi_turn")
    turns = case.workload.turns  # type: ignore[union-attr]
    assert turns and all(r.ttft_s is None for r in turns)  # the premise: every turn's TTFT withheld
    reasons = {r.unavailable["ttft_s"] for r in turns}
    drawn = drawn_figures(monkeypatch)
    made = workload_plots.figures(results, tmp_path)
    assert not any(name.startswith("workload-turns") for name in drawn)
    (placeholder,) = [f for f in made if f.title.startswith("TTFT and reuse by turn")]
    assert placeholder.path is None and placeholder.caption.startswith("Not drawn")
    assert all(reason in placeholder.caption for reason in reasons)


def test_the_trace_reuse_figure_hides_no_request_and_shows_the_failed(tmp_path, monkeypatch):
    """Requests at identical (expected, reported) points were drawn on top of one another, and
    failed requests were not drawn at all."""
    with ForkedSim("--decode-tps", "2000", "--prefill-tps", "50000", "--fault", "http500:0.25", "--seed", "2") as sim:
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "run"), "--trace", "sample",
                               "--speed", "4", "--requests", "16", "--endpoint", "completions", "--warmup", "0")  # fmt: skip
    assert proc.returncode in (0, 3, 4), proc.stderr
    results = results_files.read(tmp_path / "run" / "results.json")
    case = next(c for c in results.cases if c.kind == "trace")
    measured = [r for r in case.requests if not r.warmup and r.expected_cached_tokens is not None]
    ok = [r for r in measured if r.status == "ok" and r.cached_tokens is not None]
    failed = [r for r in measured if r.status != "ok"]
    assert failed, "the injected failures"
    drawn = drawn_figures(monkeypatch)
    workload_plots.figures(results, tmp_path)
    ax = next(f for name, f in drawn.items() if name.startswith("workload-reuse")).axes[0]
    requests, crosses = ax.collections[0], ax.collections[1]
    positions = [tuple(p) for p in requests.get_offsets()]
    assert len(set(positions)) == len(positions), "one marker a place"
    shown = {p: 1 for p in positions}
    for text in ax.texts:  # ×n beside a marker that stands for n requests
        shown[tuple(text.xy)] = int(text.get_text().lstrip("×"))
    assert sum(shown.values()) == len(ok)
    assert len(crosses.get_offsets()) == len(failed)


def box_distance(box, point) -> float:
    return math.hypot(max(box.x0 - point[0], 0, point[0] - box.x1), max(box.y0 - point[1], 0, point[1] - box.y1))


def test_every_value_label_is_nearest_its_own_point(tmp_path, monkeypatch):
    """Two prompt lengths whose aggregate throughput at concurrency 1 is all but equal: their two
    labels sat between the two points, each nearer the other's ("36/41" read as one label)."""
    with ForkedSim("--decode-tps", "400", "--prefill-tps", "50000") as sim:
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "run"),
                               "--pp", "64", "256", "--tg", "16", "-c", "1", "2", "--runs", "4")  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    results = results_files.read(tmp_path / "run" / "results.json")
    drawn = drawn_figures(monkeypatch)
    render.write_report(results, tmp_path / "report")
    labelled = 0
    for name, fig in drawn.items():
        FigureCanvasAgg(fig)  # a saved figure is closed: a canvas again, to measure it
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            points = [
                ((x, y), ax.transData.transform((x, y)))
                for c in ax.containers
                if hasattr(c, "lines")
                for x, y in zip(*c.lines[0].get_data())
            ]
            for label in (t for t in ax.texts if hasattr(t, "xy")):
                box = label.get_window_extent(renderer)
                own = box_distance(box, ax.transData.transform(label.xy))
                closer = [xy for xy, px in points if tuple(xy) != tuple(label.xy) and box_distance(box, px) <= own]
                assert not closer, (name, ax.get_title(), label.get_text(), closer)
                labelled += 1
    assert labelled >= 8  # labels are still drawn where a place is free


def marker_hits(fig) -> list[tuple[str, str, str]]:
    """Every value label whose drawn text box covers a drawn marker (of its own point or another),
    from matplotlib's own artists: the text's window extent against each marker's pixels (a disc
    for a point, a thin bar for an error bar's cap)."""
    canvas = FigureCanvasAgg(fig)  # a closed figure keeps its artists, not its canvas
    canvas.draw()
    renderer = canvas.get_renderer()
    hits = []
    for ax in fig.axes:
        marks = []  # (x, y, half width, half height, round)
        for line in ax.get_lines():
            marker = line.get_marker()
            if marker in (None, "None", "none", "", " ") or not line.get_visible():
                continue
            half = line.get_markersize() * fig.dpi / 72 / 2
            edge = max(line.get_markeredgewidth() * fig.dpi / 72 / 2, 0.5)
            w, h = {"_": (half, edge), "|": (edge, half)}.get(str(marker), (half, half))
            xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
            marks += [(px, py, w, h, str(marker)) for px, py in ax.transData.transform(xy)]
        for text in ax.texts:
            if not isinstance(text, Annotation):
                continue
            box = text.get_window_extent(renderer)
            for px, py, w, h, marker in marks:
                dx = max(box.x0 - px, 0.0, px - box.x1)
                dy = max(box.y0 - py, 0.0, py - box.y1)
                covered = (dx < w and dy < h) if marker in ("_", "|") else math.hypot(dx, dy) < w
                if covered:
                    hits.append((ax.get_title(), text.get_text(), f"mark {marker} at {px:.0f},{py:.0f}; text {box}"))
    return hits


def test_no_value_label_covers_a_marker(tmp_path, monkeypatch):
    """TTFT vs prompt: a value label sat on its own marker, hiding the point it names. Judged on
    a run's figure from the drawn artists: each label's rendered box against every marker's disc
    (the estimate the placement uses must not be what checks it). Two output lengths that give the
    same TTFT put both series' markers together, the crowded case; the shipped run is the other.
    Labels at fixed offsets from their points (7 pt above, or 15 pt below for every
    other series) fail it here: a small TTFT's label covers its own error bar's cap, and each of
    two close points' labels covers the other's marker."""
    with ForkedSim("--decode-tps", "2000", "--prefill-tps", "20000") as sim:
        proc = run_benchy_here(
            "run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "run"), "--no-report",
            "--pp", "128", "1024", "8192", "--tg", "16", "17", "-c", "1", "--requests", "3",
        )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    results = results_files.read(tmp_path / "run" / "results.json")
    for run in (results, results_files.read(EXAMPLE)):
        drawn = drawn_figures(monkeypatch)
        plots.ttft_vs_prompt(run, tmp_path)
        plots.throughput_vs_prompt(run, tmp_path)
        labelled = [t for fig in drawn.values() for ax in fig.axes for t in ax.texts if isinstance(t, Annotation)]
        assert labelled, "the figures carry value labels"
        for name, fig in drawn.items():
            assert marker_hits(fig) == [], name


def test_the_marker_witness_sees_a_label_on_its_own_marker():
    """The witness of the test above, on a figure drawn by hand: a label centred on its point (the
    defect as the issue saw it) and one at a fixed offset onto its error bar's cap are found; a
    label well clear of every mark is not."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4, 3), dpi=plots.DPI)
    ax = fig.add_subplot()
    ax.errorbar([1, 2, 3], [10, 20, 30], yerr=[0, 2, 0], marker="o", capsize=4)
    ax.set_xlim(0, 4)
    ax.set_ylim(0, 40)
    ax.annotate("10", (1, 10), textcoords="offset points", xytext=(0, 0), ha="center", va="center")
    ax.annotate("20", (2, 20), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.annotate("30", (3, 30), textcoords="offset points", xytext=(0, 30), ha="center")
    hits = marker_hits(fig)
    assert {label for _, label, _ in hits} == {"10", "20"}, hits
    assert any(label == "10" and "mark o" in where for _, label, where in hits)
    assert any(label == "20" and "mark _" in where for _, label, where in hits)


def test_a_server_view_rate_without_a_figure_has_no_bar_but_a_word(tmp_path, monkeypatch):
    """The middle and right panels drew a missing rate as a zero-length bar, beside a legend entry,
    as if the rate were 0. One output token: the client has no decode interval to measure (its
    decode t/s is withheld), so that bar must be absent, with a word where it would be."""
    with ForkedSim("--prefill-tps", "20000", "--decode-tps", "500") as sim:
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "run"), "--no-report",
                               "--pp", "256", "--tg", "1", "--requests", "3")  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    results = results_files.read(tmp_path / "run" / "results.json")
    case = results.cases[0]
    assert not case.summary.get("decode_tps"), "one output token: no client decode rate"
    drawn = drawn_figures(monkeypatch)
    server_view.figure(results, tmp_path)
    fig = drawn["server_view.png"]
    right = next(ax for ax in fig.axes if ax.get_title() == "Decode t/s")
    for ax in fig.axes[1:]:
        for container in ax.containers:
            assert all(bar.get_width() > 0 for bar in container), (ax.get_title(), container.get_label())
        labels = ax.get_legend_handles_labels()[1]
        assert all(c.get_label() in labels for c in ax.containers)
    assert "client (median)" not in right.get_legend_handles_labels()[1]
    assert any("no client figure" in t.get_text() for t in right.texts)
