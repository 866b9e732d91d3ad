"""What a user sees of a run: percentiles of loaded cases on the terminal, a CSV column for every
figure, scenario names, and figures worth a slide (labels that collide with nothing, TTFT in ms
on a readable axis, no one-point curves, no box around three dots, a probe figure that says why
a length failed), from real runs against `benchy sim`."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from benchy.measure import registry, stats
from benchy.report import plots, probe_report, render, table
from benchy.results import files as results_files
from benchy.results import types as results_mod
from tests.conftest import REPO_ROOT, run_benchy_here
from tests.forkserver import ForkedSim as SimProcess
from tests.test_report import capture_figures

FAST = ("--decode-tps", "1000", "--prefill-tps", "50000")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{name: (folder, completed process)} of a sweep, a concurrency sweep, an open loop with
    an SLO and a scenario run, all against one simulator."""
    root = tmp_path_factory.mktemp("figures")
    plans = {
        "sweep": ("--pp", "128", "512", "2048", "--tg", "16", "64", "--runs", "3"),
        "load": ("--pp", "128", "--tg", "32", "-c", "1", "4", "--requests", "12", "--view", "full"),
        "rate": ("--pp", "128", "--tg", "32", "--rate", "5", "10", "--requests", "10", "--slo", "ttft=1s"),
        "scenario": ("--scenario", "chat_short", "--runs", "2"),
    }
    done = {}
    with SimProcess(*FAST) as sim:
        for name, args in plans.items():
            out = root / name
            proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *args)
            assert proc.returncode == 0, proc.stderr
            done[name] = (out, proc)
    return done


def same(cell: str, value: float | None) -> bool:
    """A CSV cell holds the saved figure, and is blank where the figure is unavailable."""
    return cell == "" if value is None else float(cell) == pytest.approx(value)


def load(folder) -> dict:
    return results_files.load(folder / "results.json")


def test_loaded_cases_show_percentiles_on_the_terminal(runs):
    out, proc = runs["load"]
    results = load(out)
    single, loaded = results["cases"]
    assert "TTFT ms p50 / p90 / p99" in proc.stdout
    lines = proc.stdout.split("p50 / p90 / p99", 1)[1].split("## Closed loops")[0].splitlines()  # the load table
    rows = [line for line in lines if line.startswith("|") and "pp128" in line]
    assert [r.split("|")[1].strip() for r in rows] == [loaded["label"]]  # loaded cases only
    ttft = [r["metrics"]["ttft_s"] for r in loaded["requests"] if not r["warmup"] and r["status"] == "ok"]
    p50, p90, p99 = (float(np.percentile(ttft, q)) * 1000 for q in (50, 90, 99))
    assert p50 <= p90 <= p99
    cells = rows[0].split("|")[3].strip()
    # each percentile only from as many requests as it needs; "too few" otherwise
    n = len(ttft)
    shown = [
        table._short(v) if stats.enough_for(k, n) else stats.TOO_FEW
        for k, v in zip(("median", "p90", "p99"), (p50, p90, p99))
    ]
    assert cells == " / ".join(shown)
    assert (stats.TOO_FEW in cells) == (n < stats.SHOWN_FROM["p99"])


def test_the_csv_has_a_column_for_every_figure_and_open_loops_say_so(runs):
    out, _ = runs["rate"]
    results = load(out)
    rows = list(csv.DictReader(io.StringIO((out / "results.csv").read_text(), newline="")))
    case_metrics = [m.name for m in registry.METRICS.values() if m.level == registry.CASE]
    for name in case_metrics:  # from the registry: a new CASE metric gets its column
        assert any(col == name or col.startswith(name + "_") for col in table.CSV_COLUMNS), name
    for case in results["cases"]:
        mine = [r for r in rows if r["label"] == case["label"]]
        assert len(mine) == len(registry.REQUEST_METRICS)
        for row in mine:
            assert (row["mode"], float(row["rate"]), row["concurrency"]) == ("open", case["rate"], "")
            assert float(row["aggregate_tps"]) == pytest.approx(case["aggregate_tps"])
            assert float(row["request_rate"]) == pytest.approx(case["request_rate"])
            assert float(row["achieved_rate"]) == pytest.approx(case["achieved_rate"])
            assert float(row["send_lag_s_p50"]) == pytest.approx(case["send_lag"]["median"])
            if stats.enough_for("p99", case["send_lag"]["n"]):
                assert float(row["send_lag_s_p99"]) == pytest.approx(case["send_lag"]["p99"])
            else:  # as the report: too few for a p99
                assert row["send_lag_s_p99"] == ""
            # on a busy machine a request's TTFT may be withheld, and the SLO then cannot be judged
            assert same(row["goodput"], case["goodput"]["fraction"])
            assert same(row["goodput_rate"], case["goodput"]["rate"])
        ttft = next(r for r in mine if r["metric"] == "ttft_s")
        summary = case["summary"]["ttft_s"] or {}
        n = summary.get("n", 0)  # too few values for a percentile: blank, as the report's "too few"
        for name in ("p90", "p99"):
            assert same(ttft[name], summary.get(name) if stats.enough_for(name, n) else None), name
        assert ttft["unit"] == "s"


def test_scenario_names_appear_in_the_table_and_the_figures(runs, tmp_path, monkeypatch):
    out, proc = runs["scenario"]
    assert "chat_short (pp167 tg256)" in proc.stdout
    assert "chat_short (pp167 tg256)" in (out / "report.md").read_text()
    drawn = capture_figures(monkeypatch)
    render.write_report(results_files.read(out / "results.json"), tmp_path)
    ticks = [t.get_text() for t in drawn["requests_e2e.png"].axes[0].get_yticklabels()]
    assert ticks == ["chat_short (pp167 tg256)"]


def text_boxes(fig) -> list:
    FigureCanvasAgg(fig)  # a saved figure is closed: give it a canvas again to measure it
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for ax in fig.axes for t in ax.texts]


def marker_boxes(fig) -> list:
    out = []
    for ax in fig.axes:
        for cont in ax.containers:
            for x, y in zip(*cont.lines[0].get_data()):
                px, py = ax.transData.transform((x, y))
                out.append((px - 4, py - 4, px + 4, py + 4))
    return out


def overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_sweep_figures_are_fit_for_a_slide(runs, tmp_path, monkeypatch):
    out, _ = runs["sweep"]
    results = load(out)
    drawn = capture_figures(monkeypatch)
    render.write_report(results_mod.RunResult.from_dict(results), tmp_path)
    assert {"throughput_vs_prompt.png", "ttft_vs_prompt.png", "requests_e2e.png"} <= set(drawn)
    for name, fig in drawn.items():  # no value label on another, nor on a point
        boxes = [box.extents for _, box in text_boxes(fig)]
        for i, a in enumerate(boxes):
            assert not any(overlaps(a, b) for b in boxes[i + 1 :]), name
            assert not any(overlaps(a, m) for m in marker_boxes(fig)), name
    labelled = len(text_boxes(drawn["throughput_vs_prompt.png"]))
    assert labelled >= 12 * 2 // 3  # most of the 12 points keep their value label
    ttft = drawn["ttft_vs_prompt.png"].axes[0]
    assert "milliseconds" in ttft.get_ylabel()  # as in the tables, not seconds
    plotted = sorted(y for c in ttft.containers for y in c.lines[0].get_ydata())
    expected = sorted(c["summary"]["ttft_s"]["median"] * 1000 for c in results["cases"])
    assert plotted == pytest.approx(expected)
    low, high = ttft.get_ylim()
    shown = [t.get_text() for t in ttft.get_yticklabels() if low <= t.get_position()[1] <= high]
    assert len(shown) >= 3 and all(t.replace(",", "").replace(".", "").isdigit() for t in shown), shown
    dots = drawn["requests_e2e.png"].axes[0]  # 3 requests a case: dots and a median, no box
    assert not [line for line in dots.get_lines() if len(line.get_xdata()) == 5]  # a box is a 5-point path


def test_one_prompt_length_draws_no_curve_and_many_requests_get_a_box(runs, tmp_path, monkeypatch):
    out, _ = runs["load"]
    drawn = capture_figures(monkeypatch)
    render.write_report(results_files.read(out / "results.json"), tmp_path)
    assert "throughput_vs_prompt.png" not in drawn and "ttft_vs_prompt.png" not in drawn
    assert "concurrency.png" in drawn
    dots = drawn["requests_e2e.png"].axes[0]  # 12 requests a case: quartile boxes
    assert len([line for line in dots.get_lines() if len(line.get_xdata()) == 5]) == 2


def test_the_probe_figure_says_why_a_length_failed_and_keeps_its_legend_off_the_points(tmp_path, monkeypatch):
    # 8,000-token prompts need 0.4 s of prefill; a 0.3 s timeout fails all but the cached repeats
    with SimProcess("--decode-tps", "1000", "--prefill-tps", "20000") as sim:
        proc = run_benchy_here(
            "probe-cache", "--base-url", sim.base_url, "--lengths", "1000", "8000", "-n", "3",
            "--timeout", "0.3", "-q", "--format", "json",
        )  # fmt: skip
    probe = json.loads(proc.stdout)
    failed = probe["lengths"][1]
    assert failed["n_failed"] > 0 and failed["errors"] == {"timeout": failed["n_failed"]}
    drawn = capture_figures(monkeypatch)
    probe_report.plot(probe, tmp_path / "probe.png")
    fig = drawn["probe.png"]
    ax = fig.axes[0]
    notes = [t.get_text() for t in ax.texts]
    total = failed["n_ok"] + failed["n_failed"]
    assert f"{failed['n_failed']} of {total} failed: timeout" in notes
    assert "TTFT, ms" in ax.get_ylabel()
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.y1 < ax.get_window_extent().y0  # under the axes, on no point


def test_comparing_a_run_with_itself_warns(runs):
    sweep, _ = runs["sweep"]
    same = run_benchy_here("compare", str(sweep), str(sweep))
    assert same.returncode == 0 and "SAME RUN" in same.stderr
    other = run_benchy_here("compare", str(sweep), str(runs["load"][0]))
    assert "SAME RUN" not in other.stderr


def test_ttft_labels_and_axes_come_from_the_registry():
    # the figure's unit is the tables' unit: one place says TTFT is shown in ms
    assert registry.METRICS["ttft_s"].scale == 1000 and "ms" in registry.METRICS["ttft_s"].title
    assert plots.BOX_MIN_REQUESTS >= 5


EXAMPLE = REPO_ROOT / "reports" / "dgx-spark-sim" / "results.json"  # a scenario run, saved


def test_a_scenario_run_draws_lone_points_and_no_rule_that_cannot_apply(tmp_path, monkeypatch):
    """Four scenarios, each its own lengths: an output length measured at one prompt length is a
    point with no line, and the buffered-stream rule (lines that differ by output length at one
    prompt length) is not stated where no two output lengths meet. The title is the heading."""
    results = results_files.read(EXAMPLE)
    drawn = {}
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.setdefault("fig", fig) and path)
    figure = plots.ttft_vs_prompt(results, tmp_path)
    assert drawn["fig"].texts[0].get_text().startswith(figure.title)  # suptitle = the report's heading
    assert "point to a buffered stream" not in figure.caption and "A lone point" in figure.caption
    left = drawn["fig"].axes[0]
    by_label = {c.get_label(): c for c in left.containers}
    lone = [c for c in by_label.values() if len(c.lines[0].get_xdata()) == 1]
    assert lone and all(c.lines[0].get_linestyle() == "None" for c in lone)


def test_statistics_from_too_few_requests_say_so_and_the_engine_is_not_repeated():
    from benchy.report import markdown

    results = results_files.read(EXAMPLE)
    assert all(c.n_ok == 3 for c in results.cases)
    details = "\n".join(markdown.detail_lines(results))
    assert details.count("too few (n = 3)") == len(results.cases)  # no bootstrap CI from 3 values
    assert " / too few / too few |" in details  # nor a p90 or p99
    setup = "\n".join(markdown.setup_lines(results))
    assert setup.count("benchy-sim 0.1.0") == 1, setup
