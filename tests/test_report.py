"""`benchy report`: report.md and PNG figures re-made from saved results, against real runs of
`benchy sim` (clean, buffered with failures, and a cache probe)."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from benchy import cli
from benchy.report import plots, probe_report, render
from benchy.results.types import RunResult
from tests.conftest import run_benchy_here

SECRET = "sk-report-sentinel-4242"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def benchy(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_benchy_here(*args)
    if check and proc.returncode not in (0, 3, 4):
        raise AssertionError(f"benchy {' '.join(args)} → {proc.returncode}: {proc.stderr}")
    return proc


def benchy_here(capsys, *args: str) -> tuple[int, str, str]:
    """The real entry point, in this process (no interpreter start-up): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exited:
        cli.main(list(args))
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk; fails on anything that is not a PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def assert_sensible_png(path: Path) -> None:
    width, height = png_size(path)
    assert 500 <= width <= 1600 and 250 <= height <= 2000, (path.name, width, height)
    assert path.stat().st_size < 400_000, "a report figure should stay small enough to commit"
    pixels = matplotlib.image.imread(path)  # decodes the whole image: a truncated file fails here
    assert pixels.shape[:2] == (height, width)
    assert float(np.std(pixels)) > 0.05, "the image is blank"


def capture_figures(monkeypatch) -> dict:
    """{file name: matplotlib figure} of every figure saved while it is active (still saved)."""
    drawn = {}
    real_save = plots.save

    def spy(fig, path):
        drawn[path.name] = fig
        return real_save(fig, path)

    monkeypatch.setattr(plots, "save", spy)
    return drawn


def embedded_figures(markdown: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """A clean sweep over 2 prompt × 2 output lengths × concurrency 1 and 2, with a ceiling."""
    out = tmp_path_factory.mktemp("clean")
    from tests.forkserver import ForkedSim as SimProcess

    with SimProcess("--decode-tps", "400", "--prefill-tps", "40000", "--max-running", "4") as sim:
        proc = benchy(
            "run",
            "--base-url",
            sim.base_url,
            "--api-key",
            SECRET,
            "--pp",
            "64",
            "256",
            "--tg",
            "16",
            "32",
            "--concurrency",
            "1",
            "2",
            "--runs",
            "3",
            "--bandwidth-gbs",
            "8000",
            "--active-bytes-per-token",
            "4e9",
            "--output",
            str(out / "run"),
            "-q",
        )
    return out, proc


@pytest.fixture(scope="module")
def troubled_run(tmp_path_factory):
    """A buffered stream (29 tokens in 2 events, as in field report 003) with injected HTTP 500s."""
    out = tmp_path_factory.mktemp("troubled")
    truth = out / "truth.jsonl"
    from tests.forkserver import ForkedSim as SimProcess

    with SimProcess(
        "--events-per-response",
        "2",
        "--decode-tps",
        "400",
        "--prefill-tps",
        "40000",
        "--fault",
        "http500:0.3",
        "--seed",
        "3",
        truth_log=truth,
    ) as sim:
        benchy(
            "run",
            "--base-url",
            sim.base_url,
            "--pp",
            "64",
            "96",  # two prompt lengths: a "vs prompt length" figure has a line to draw
            "--tg",
            "16",
            "48",
            "--runs",
            "6",
            "--output",
            str(out / "run"),
            "-q",
        )
    return out, [json.loads(line) for line in truth.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def open_loop_run(tmp_path_factory):
    """Open-loop arrivals at two rates, with and without cached context depth."""
    out = tmp_path_factory.mktemp("open")
    from tests.forkserver import ForkedSim as SimProcess

    with SimProcess("--decode-tps", "400", "--prefill-tps", "40000") as sim:
        benchy(
            "run",
            "--base-url",
            sim.base_url,
            "--pp",
            "64",
            "--tg",
            "16",
            "--rate",
            "10",
            "20",
            "--requests",
            "5",
            "--depth",
            "0",
            "64",
            "--depth-mode",
            "cached",
            "--output",
            str(out),
            "-q",
        )
    return out


def test_run_output_folder_holds_report_with_setup_table_and_figures(clean_run):
    out, proc = clean_run
    folder = out / "run"
    results = json.loads((folder / "results.json").read_text())
    md = (folder / "report.md").read_text()
    setup = results["setup"]
    for expected in (
        setup["model"],
        setup["server_version"],
        setup["command_line"],
        "Prompt nonce",
        "yes (no prefix cache can serve a request)",
        "## How to read this report",
    ):
        assert expected in md, expected
    # a loaded test machine may add a client_overloaded warning: every warning must show, with its hint
    for warning in results["warnings"]:
        assert f"`{warning['code']}`" in md and warning["hint"] in md
    if not results["warnings"]:
        assert "No warnings: every case is clean." in md
    assert SECRET not in md and SECRET not in (folder / "results.json").read_text()
    for case in results["cases"]:
        e2e = case["summary"]["e2e_tps"]
        row = next(line for line in md.splitlines() if line.startswith("|") and f" {case['label']} |" in line)
        cells = [cell.strip() for cell in row.split("|")]
        assert f"{e2e['median']:,.1f} ± {e2e['std']:,.1f}" in row and cells[2] == str(case["n_ok"])
    figures = embedded_figures(md)
    assert [Path(f).name for f in figures] == [
        "server_view.png",  # in the Server view section, before the Figures
        "throughput_vs_prompt.png",
        "ttft_vs_prompt.png",
        "concurrency.png",
        "requests_e2e.png",
    ]
    for rel in figures:
        assert_sensible_png(folder / rel)
    assert "Dashed lines: the memory-bandwidth ceiling" in md


def test_report_command_remakes_the_report_elsewhere_from_results_only(clean_run, tmp_path, capsys):
    out, _ = clean_run
    copy = tmp_path / "elsewhere" / "results.json"
    copy.parent.mkdir()
    copy.write_text((out / "run" / "results.json").read_text())
    code, out_text, err = benchy_here(capsys, "report", str(copy), "-o", str(tmp_path / "remade"))
    assert code == 0, err
    remade = (tmp_path / "remade" / "report.md").read_text()
    assert Path(out_text.strip()) == tmp_path / "remade" / "report.md"
    assert remade == (out / "run" / "report.md").read_text()  # same results → the same report
    for rel in embedded_figures(remade):
        assert_sensible_png(tmp_path / "remade" / rel)


def test_figures_draw_the_saved_medians_and_the_recorded_ceiling(clean_run, tmp_path, monkeypatch):
    out, _ = clean_run
    results = json.loads((out / "run" / "results.json").read_text())
    drawn = capture_figures(monkeypatch)
    render.write_report(RunResult.from_dict(results), tmp_path)
    single = [c for c in results["cases"] if c["concurrency"] == 1]
    left, right = drawn["throughput_vs_prompt.png"].axes[:2]
    points = {(x, round(y, 6)) for cont in left.containers for x, y in zip(*cont.lines[0].get_data())}
    assert points == {(c["pp"], round(c["summary"]["e2e_tps"]["median"], 6)) for c in single}
    ceilings = [line for line in right.get_lines() if line.get_linestyle() == "--"]
    drawn_ceilings = sorted(round(y, 6) for line in ceilings for y in line.get_ydata())
    assert drawn_ceilings == sorted(round(c["ceiling"]["tokens_per_s"], 6) for c in single)
    agg = drawn["concurrency.png"].axes[0]
    agg_points = {(x, round(y, 6)) for cont in agg.containers for x, y in zip(*cont.lines[0].get_data())}
    assert agg_points == {(c["concurrency"], round(c["aggregate_tps"], 6)) for c in results["cases"]}


def test_open_loop_and_depth_cases_get_their_own_lines_and_a_rate_figure(open_loop_run, tmp_path, monkeypatch):
    results = json.loads((open_loop_run / "results.json").read_text())
    md = (open_loop_run / "report.md").read_text()
    assert [Path(f).name for f in embedded_figures(md)] == [
        "server_view.png",  # in the Server view section, before the Figures
        "rate.png",  # one prompt length: no "vs prompt length" figure of one point per line
        "requests_e2e.png",
    ]
    drawn = capture_figures(monkeypatch)
    render.write_report(RunResult.from_dict(results), tmp_path)
    per_request = drawn["rate.png"].axes[1]
    lines = {c.get_label(): list(zip(*c.lines[0].get_data())) for c in per_request.containers}
    assert set(lines) == {"pp64 tg16", "pp64 tg16 @ depth 64 cached"}
    for label, points in lines.items():
        depth = 64 if "depth" in label else 0
        expected = sorted(
            (c["rate"], c["summary"]["e2e_tps"]["median"]) for c in results["cases"] if c["depth"] == depth
        )
        assert [v for p in points for v in p] == pytest.approx([v for p in expected for v in p])
    for rel in embedded_figures(md):
        assert_sensible_png(open_loop_run / rel)


def test_report_with_unavailable_metrics_failures_and_warnings(troubled_run):
    out, truth = troubled_run
    folder = out / "run"
    results = json.loads((folder / "results.json").read_text())
    md = (folder / "report.md").read_text()
    measured = {r["request_id"] for c in results["cases"] for r in c["requests"] if not r["warmup"]}
    truth_failed = sum(1 for t in truth if t["request_id"] in measured and t["fault"] == "http500")
    assert truth_failed > 0, "the fault seed should fail some measured requests"
    assert f", {truth_failed} failed." in md
    # stream-timing metrics are n/a with the reason; the headline e2e t/s still shows
    assert re.search(r"\| +n/a \[1\] \|", md) and "[1] SSE buffering" in md
    for code in ("sse_buffering", "request_errors"):
        assert f"`{code}`" in md
    assert "Hint:" in md
    # TTFT cannot be drawn at all, so no empty chart: a sentence says why
    assert "ttft_vs_prompt.png" not in md and not (folder / "figures" / "ttft_vs_prompt.png").exists()
    assert "Not drawn, because benchy could not measure any of its values" in md
    assert "decode t/s of pp64 tg16, pp96 tg16, pp64 tg48, pp96 tg48 (SSE buffering)" in md
    for rel in embedded_figures(md):
        assert_sensible_png(folder / rel)


def test_report_of_a_partial_run_says_so(troubled_run, tmp_path, capsys):
    out, _ = troubled_run
    results = json.loads((out / "run" / "results.json").read_text())
    results["partial"] = True
    results["cases"] = results["cases"][:1]  # what an interrupted run saves: the finished cases
    (tmp_path / "results.json").write_text(json.dumps(results))
    code, _, err = benchy_here(capsys, "report", str(tmp_path))
    assert code == 0, err
    md = (tmp_path / "report.md").read_text()
    assert "**Partial run**" in md and "1 case," in md


def test_probe_results_render_the_same_way(tmp_path, capsys):
    from tests.forkserver import ForkedSim as SimProcess

    with SimProcess("--decode-tps", "400", "--prefill-tps", "40000") as sim:
        proc = benchy(
            "probe-cache",
            "--base-url",
            sim.base_url,
            "--lengths",
            "300",
            "-n",
            "3",
            "-o",
            str(tmp_path / "probe"),
            "-q",
        )
    assert proc.returncode == 0, proc.stderr
    code, _, err = benchy_here(capsys, "report", str(tmp_path / "probe" / "probe.json"), "-o", str(tmp_path / "again"))
    assert code == 0, err
    md = (tmp_path / "again" / "probe.md").read_text()
    assert md == (tmp_path / "probe" / "probe.md").read_text()  # the same rendering as the probe's own
    probe = json.loads((tmp_path / "probe" / "probe.json").read_text())
    assert probe_report.VERDICT_TEXT[probe["lengths"][0]["verdict"]] in md
    assert embedded_figures(md)
    for rel in embedded_figures(md):
        png_size(tmp_path / "again" / rel)
        assert (tmp_path / "again" / rel).stat().st_size > 5_000


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "cannot read"),
        ("{not json", "not JSON"),
        (json.dumps({"schema": "benchy/results/999"}), "schema"),
        (json.dumps({"schema": "benchy/results/1", "cases": [{"label": "x"}]}), "malformed"),
    ],
)
def test_report_bad_file_is_one_line_error(tmp_path, capsys, content, message):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    code, _, err = benchy_here(capsys, "report", str(path))
    assert code == 1
    assert err.startswith("benchy: error:") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_the_glossary_defines_each_metric_once():
    """A definition, then what it means: the explanation does not restate the formula."""
    from benchy.report.markdown import glossary

    [line] = [g for g in glossary().splitlines() if g.startswith("- **aggregate t/s**")]
    assert line.count("÷") == 1 and line.count("last end") == 1, line
