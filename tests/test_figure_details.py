"""Figure details a load tester tripped on (issue 54, item 7), each as a property of the drawn
PNG's artists: a failure count never over a dot, crowded Pareto labels never over each other,
whole-token ticks on a lengths histogram whose lengths are all one."""

from __future__ import annotations

from benchy.report import capacity as capacity_report
from benchy.report import dataset_view, plots
from benchy.results.capacity import CapacityAnswer, CapacityPoint, CapacityResult, CapacitySetup
from benchy.results.types import CaseResult, RequestResult, RunResult, Setup
from tests.test_figure_defects import drawn_figures


def _boxes(fig, texts) -> list[tuple[float, float, float, float]]:
    """Each text's box in pixels, as the saved PNG drew it (a closed figure gets a canvas again)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    return [tuple(t.get_window_extent(renderer).extents) for t in texts]


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _request(i: int, e2e_tps: float | None, prompt: int = 64, output: int = 16) -> RequestResult:
    ok = e2e_tps is not None
    return RequestResult(
        case="x",
        run=0,
        warmup=False,
        nonce=None,
        index=i,
        request_id=f"r{i}",
        status="ok" if ok else "error",
        metrics={"e2e_tps": e2e_tps} if ok else {},
        target_prompt_tokens=prompt,
        prompt_tokens=prompt,
        target_output_tokens=output,
        completion_tokens=output if ok else 0,
    )


def test_a_failure_count_is_drawn_over_no_dot(tmp_path, monkeypatch):
    """Slow requests sit at the left of the axis, where the count of failed ones used to be."""
    values = [0.4, 0.6, 0.9, 1.3, 40.0]
    requests = [_request(i, v) for i, v in enumerate(values)] + [_request(9, None)]
    case = CaseResult(label="pp64 tg16", pp=64, tg=16, requests=requests, n_ok=5, n_failed=1, errors={"http_500": 1})
    drawn = drawn_figures(monkeypatch)
    plots.request_distribution(RunResult(setup=Setup(), cases=[case]), tmp_path)
    fig = drawn["requests_e2e.png"]
    ax = fig.axes[0]
    [note] = [t for t in ax.texts if "failed" in t.get_text()]
    box = _boxes(fig, [note])[0]
    dots = [xy for c in ax.collections for xy in ax.transData.transform(c.get_offsets()) if len(c.get_offsets())]
    assert len(dots) >= len(values)
    assert not any(box[0] - 7 <= x <= box[2] + 7 and box[1] - 7 <= y <= box[3] + 7 for x, y in dots)
    assert box[0] >= ax.get_window_extent().x1  # beside the axes, where no dot can be


def test_crowded_pareto_labels_never_overlap(tmp_path, monkeypatch):
    """Failing loads c12, c13, c14 within a token/s of each other: their labels, drawn at a
    fixed offset, ran into one another ('c1/13c12')."""
    crowd = [(1, 40.0, 40.0), (2, 39.5, 78.0), (4, 38.6, 150.0), (6, 37.9, 220.0), (7, 37.5, 224.0)]
    crowd += [(8, 30.0, 230.0), (12, 19.0, 235.0), (13, 18.5, 235.5), (14, 18.0, 236.0), (16, 15.0, 236.0)]
    points = [
        CapacityPoint(load=c, verdict="pass" if c <= 8 else "fail", per_user_tps=u, throughput_tps=t)
        for c, u, t in crowd
    ]
    result = CapacityResult(setup=CapacitySetup(), answer=CapacityAnswer("found", 8, 12), points=points)
    drawn = drawn_figures(monkeypatch)
    capacity_report.write_figure(result, tmp_path / "capacity-pareto.png")
    fig = drawn["capacity-pareto.png"]
    labels = [t for t in fig.axes[0].texts if t.get_text().startswith("c")]
    assert len(labels) >= 6  # most are placed; one that cannot be is left to the points table
    boxes = _boxes(fig, labels)
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_a_constant_length_histogram_ticks_whole_tokens_and_requests(tmp_path, monkeypatch):
    """Every output 16 tokens: the ticks read 15.6, 15.8 … and 0.5 requests before."""
    from benchy.workloads.dataset import DatasetSetup

    requests = [_request(i, 30.0, prompt=50 + 37 * i, output=16) for i in range(8)]
    case = CaseResult(label="dataset sample tg16 c2", pp=0, tg=16, kind="dataset", requests=requests, n_ok=8)
    data = DatasetSetup(
        name="sample",
        path="sample",
        sha256="0" * 64,
        format="sharegpt",
        entries=8,
        entries_without_prompt=0,
        mode="natural",
        seed=0,
    )
    setup = Setup(dataset=data)
    drawn = drawn_figures(monkeypatch)
    dataset_view.figures(plots, RunResult(setup=setup, cases=[case]), tmp_path)
    fig = drawn["dataset-lengths.png"]
    for ax in fig.axes:
        low, high = ax.get_xlim()
        xs = [t for t in ax.get_xticks() if low <= t <= high]
        ys = [t for t in ax.get_yticks() if 0 <= t <= ax.get_ylim()[1]]
        assert xs and all(float(t).is_integer() for t in xs), xs
        assert ys and all(float(t).is_integer() for t in ys), ys
    output = fig.axes[1]
    assert 16 in output.get_xticks() and output.get_xlim()[1] - output.get_xlim()[0] >= dataset_view.MIN_SPAN


def test_token_bins_are_whole_tokens_centred_on_the_counts():
    assert dataset_view.token_bins([16] * 8) == [15.5, 16.5]
    values = list(range(50, 300, 7))
    edges = dataset_view.token_bins(values)
    assert len(edges) - 1 <= dataset_view.MAX_BINS and all(float(e - 0.5).is_integer() for e in edges)
    assert edges[0] < min(values) and edges[-1] > max(values)
