"""The server's view of each case, end to end: `benchy run` against `benchy sim` over real HTTP.
The per-case figures benchy scrapes from /metrics must equal what the simulator's truth log
says it did for the measured requests, and each way the two views can disagree (the sim can
provoke each) must raise its warning; a clean run raises none of them."""

from __future__ import annotations

import json

import pytest

from benchy.measure.registry import METRICS
from benchy.report import table
from benchy.results.types import RunResult
from benchy.sim.metrics import intervals
from tests.conftest import REPO_ROOT, warning_codes
from tests.conftest import run_benchy_here as benchy  # none of these needs a process of its own

FAST = ("--prefill-tps", "20000", "--decode-tps", "400", "--natural-min", "8", "--natural-max", "24")
SERVER_CODES = {"server_cache_hit", "server_token_mismatch", "ttft_outside_server", "queue_dominates_ttft"}


class _Trace:
    def __init__(self, record: dict) -> None:
        self.__dict__.update(record)


def run(sim, *args: str) -> dict:
    proc = benchy("run", "--base-url", sim.base_url, "--quiet", "--format", "json", *args)
    assert proc.returncode in (0, 2), proc.stderr  # 2: a warning was raised
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def codes(results: dict, case: dict | None = None) -> set[str]:
    return {w["code"] for w in results["warnings"] if case is None or w["case"] == case["label"]}


def warning(results: dict, code: str) -> dict:
    return next(w for w in results["warnings"] if w["code"] == code)


def measured_truth(sim, case: dict) -> list[dict]:
    ids = {r["request_id"] for r in case["requests"] if not r["warmup"]}
    truth = [t for t in sim.truth(expect=len(case["requests"])) if t["request_id"] in ids]
    assert len(truth) == len(ids)
    return truth


def test_case_figures_equal_the_truth_and_a_clean_run_raises_no_disagreement(start_sim):
    sim = start_sim(*FAST, "--max-running", "4")
    results = run(sim, "--pp", "200", "--tg", "12", "-c", "1", "-c", "3", "--runs", "2")
    setup = results["setup"]
    assert setup["server"]["engine"] == "benchy-sim" and setup["server"]["context_length"] == 32768
    assert setup["server_metrics"]["available"] and setup["server_metrics"]["engine"] == "vllm"
    for case in results["cases"]:
        server, truth = case["server"], measured_truth(sim, case)
        spans = [intervals(_Trace(t)) for t in truth]
        for name in ("queue_s", "prefill_s", "ttft_s", "decode_s", "e2e_s"):
            h = server["histograms"][name]
            assert h["count"] == len(truth), name  # the warmups are outside the window
            assert h["mean"] == pytest.approx(sum(s[name] for s in spans) / len(truth), rel=1e-6, abs=1e-9), name
        counters = server["counters"]
        assert counters["prompt_tokens"] == sum(t["prompt_tokens"] for t in truth)
        assert counters["cache_hits"] == sum(t["cached_tokens"] for t in truth)
        assert counters["generation_tokens"] == sum(t["completion_tokens"] for t in truth)
        assert server["rtt_s"] is not None and server["rtt_s"] > 0
    assert not warning_codes(results) & SERVER_CODES


def test_cache_busting_that_failed_is_seen_by_the_server_alone(start_sim):
    """Usage says nothing of cached tokens (vLLM's default); only /metrics shows the hits."""
    sim = start_sim(*FAST, "--cache-despite-nonce", "--no-prompt-details")
    results = run(sim, "--pp", "300", "--tg", "8", "--runs", "3")
    case = results["cases"][0]
    assert "prefix_cache_hit" not in codes(results)  # the client alone cannot tell
    w = warning(results, "server_cache_hit")
    truth = measured_truth(sim, case)
    assert w["details"]["server_cache_hits"] == sum(t["cached_tokens"] for t in truth)
    assert w["details"].get("usage_cached_tokens") is None and "ttft_s" in w["metrics"]


def test_server_counting_other_tokens_than_the_client(start_sim):
    sim = start_sim(*FAST, "--metrics-token-factor", "1.5")
    results = run(sim, "--pp", "100", "--tg", "16", "--runs", "3")
    w = warning(results, "server_token_mismatch")
    truth = measured_truth(sim, results["cases"][0])
    assert w["details"]["client_tokens"] == sum(t["completion_tokens"] for t in truth)
    assert w["details"]["server_generation_tokens"] == pytest.approx(1.5 * w["details"]["client_tokens"])
    evidence = {e["name"]: e for e in w["evidence"]}
    assert evidence["token_difference"]["observed"] > evidence["token_difference"]["threshold"]
    # usage was believed: it is what the rates counted, and the words say so
    assert w["details"]["counted_tokens"] == w["details"]["client_tokens"]
    assert "usage adds up to" in w["message"] and "which benchy's rates count" in w["message"]


def test_server_metrics_against_a_usage_the_stream_overruled_words_what_the_rates_counted(start_sim):
    """usage claims double; the stream and the server's /tokenize overrule it (usage_mismatch),
    so the rates count the stream, which the server's own /metrics count sides with: the
    warning says that, not that usage is what the rates count."""
    sim = start_sim(*FAST, "--usage-scale", "2")
    results = run(sim, "--pp", "100", "--tg", "16", "--runs", "3")
    assert "usage_mismatch" in codes(results)
    w = warning(results, "server_token_mismatch")
    made = sum(t["completion_tokens"] for t in measured_truth(sim, results["cases"][0]))
    assert w["details"]["client_tokens"] == 2 * made and w["details"]["counted_tokens"] == made
    assert w["details"]["server_generation_tokens"] == made
    assert "which benchy's rates count" not in w["message"]
    assert f"benchy's rates count {made}" in w["message"] and "sides with the stream" in w["message"]


def test_ttft_held_outside_the_server(start_sim):
    delay = 0.4
    sim = start_sim(*FAST, "--proxy-delay-s", str(delay))
    results = run(sim, "--pp", "100", "--tg", "8", "--runs", "3")
    w = warning(results, "ttft_outside_server")
    d = w["details"]
    assert d["outside_s"] >= delay  # the whole proxy delay, and the HTTP around it
    # the server's part is what the simulator did, so the rest is outside it; no constant
    # bound on the round trip, which a loaded host stretches (27 ms seen with both cores busy)
    spans = [intervals(_Trace(t)) for t in measured_truth(sim, results["cases"][0])]
    assert d["server_ttft_s"] == pytest.approx(sum(s["ttft_s"] for s in spans) / len(spans), rel=1e-6)
    assert d["outside_s"] == pytest.approx(d["client_ttft_s"] - d["server_ttft_s"], rel=1e-9)
    assert d["outside_s"] > d["bound_s"] >= d["rtt_s"] > 0  # beyond a round trip, not one
    # the proxy held new requests, not the answers flowing: no stream fell silent, so the
    # words name something in front of the server, not the server nor (awake) benchy; on a
    # machine so busy that benchy itself was late by half the gap, it rightly says so instead
    if d["cause"] == "client":
        late = max(d["client_lag_s"] or 0.0, d["loop_peak_s"] or 0.0)
        assert late >= 0.5 * d["outside_s"] and "benchy" in w["message"], (late, w["message"])
        pytest.skip(f"benchy was late {late * 1000:.0f} ms on this busy machine and said so")
    assert d["cause"] == "in_front" and "in front of the server" in w["message"], w["message"]


def test_queue_dominating_ttft_names_the_concurrency(start_sim):
    sim = start_sim(*FAST, "--max-running", "1")
    results = run(sim, "--pp", "100", "--tg", "24", "-c", "4", "--runs", "2")
    w = warning(results, "queue_dominates_ttft")
    assert "concurrency 4" in w["message"] and w["details"]["queue_share"] > 0.5
    truth = measured_truth(sim, results["cases"][0])
    queue = sum(t["admitted_s"] - t["queued_s"] for t in truth) / len(truth)
    assert w["details"]["queue_s"] == pytest.approx(queue, rel=1e-6)


def test_llamacpp_flavour_identity_and_counters(start_sim):
    sim = start_sim(*FAST, "--flavor", "llamacpp", "--max-running", "2", "--context-length", "4096")
    results = run(sim, "--pp", "150", "--tg", "10", "--runs", "2")
    ident = results["setup"]["server"]
    assert (ident["slots"], ident["context_length"]) == (2, 4096)
    assert ident["build"].startswith("benchy-sim") and ident["context_source"].startswith("/props")
    server, truth = results["cases"][0]["server"], measured_truth(sim, results["cases"][0])
    assert server["engine"] == "llama.cpp" and "ttft_s" not in server["histograms"]
    assert server["counters"]["prompt_tokens"] == sum(t["prompt_tokens"] for t in truth)
    prefill = sum(t["prefill_end_s"] - t["prefill_start_s"] for t in truth)
    uncached = sum(t["prompt_tokens"] - t["cached_tokens"] for t in truth)
    assert server["derived"]["prefill_tps"] == pytest.approx(uncached / prefill, rel=1e-6)
    assert all(r["server_timings"] for r in results["cases"][0]["requests"])  # as llama.cpp, every response


def test_no_server_metrics_says_why(start_sim):
    sim = start_sim(*FAST)
    results = run(sim, "--pp", "64", "--tg", "4", "--runs", "1", "--no-server-metrics")
    assert results["setup"]["server_metrics"] == {
        **results["setup"]["server_metrics"],
        "available": False,
        "reason": "turned off with --no-server-metrics",
    }
    assert "server" not in results["cases"][0] or results["cases"][0]["server"] is None


def test_report_has_the_server_view_section_figure_and_csv(start_sim, tmp_path):
    sim = start_sim(*FAST, "--max-running", "1")
    out = tmp_path / "out"
    proc = benchy("run", "--base-url", sim.base_url, "--output", str(out), "--pp", "100", "--tg", "8", "-c", "2")
    assert proc.returncode in (0, 2), proc.stderr
    assert proc.stderr.startswith(f"benchy: {sim.base_url} · benchy-sim ") and f"results → {out}" in proc.stderr
    report = (out / "report.md").read_text()
    assert "## Server view" in report and "figures/server_view.png" in report
    assert (out / "figures" / "server_view.png").stat().st_size > 0
    results = json.loads((out / "results.json").read_text())
    rows = (out / "server.csv").read_text().splitlines()
    header, row = rows[0].split(","), rows[1].split(",")
    server = results["cases"][0]["server"]
    keys = {k: row[header.index(k)] for k in ("label", "pp", "tg", "concurrency", "depth")}
    assert keys == {"label": "pp100 tg8 c2", "pp": "100", "tg": "8", "concurrency": "2", "depth": "0"}  # as results.csv
    assert float(row[header.index("server_queue_s")]) == pytest.approx(server["histograms"]["queue_s"]["mean"])
    assert float(row[header.index("server_generation_tokens")]) == server["counters"]["generation_tokens"]


def test_report_says_why_there_is_no_server_view():
    from benchy.report import server_view

    results = {
        "setup": {"server_metrics": {"url": "u", "available": False, "reason": "GET /metrics answered HTTP 404"}},
        "cases": [{"label": "pp1 tg1", "pp": 1, "tg": 1, "concurrency": 1, "summary": {}, "requests": []}],
    }
    run = RunResult.from_dict(results)
    lines = "\n".join(server_view.section_lines(run))
    assert "No server figures: GET /metrics answered HTTP 404." in lines
    assert server_view.csv_text(run).splitlines()[1].endswith("GET /metrics answered HTTP 404")


def test_without_metrics_the_per_response_timings_give_the_servers_rates(start_sim):
    """llama.cpp without --metrics still times each response: the server view uses that."""
    from benchy.report import server_view

    sim = start_sim(*FAST, "--no-metrics", "--timings")
    results = run(sim, "--pp", "300", "--tg", "12", "--runs", "3")
    case = results["cases"][0]
    assert "HTTP 404" in results["setup"]["server_metrics"]["reason"]
    truth = {t["request_id"]: t for t in measured_truth(sim, case)}
    for req in case["requests"]:
        if req["warmup"]:
            continue
        t = truth[req["request_id"]]
        uncached = t["prompt_tokens"] - t["cached_tokens"]
        prefill = uncached / (t["prefill_end_s"] - t["prefill_start_s"])
        decode = t["completion_tokens"] / (t["token_times_s"][-1] - t["prefill_end_s"])
        assert req["metrics"]["server_prefill_tps"] == pytest.approx(prefill, rel=1e-6)
        assert req["metrics"]["server_decode_tps"] == pytest.approx(decode, rel=1e-6)
    typed = RunResult.from_dict(results)
    row = server_view.case_row(typed, typed.cases[0])
    assert row["server_source"] == "response timings" and row["server_ttft_s"] is None
    # like the client's rate beside it: the median of the per-request rates, not their mean
    assert row["server_prefill_tps"] == pytest.approx(case["summary"]["server_prefill_tps"]["median"])
    assert row["server_decode_tps"] == pytest.approx(case["summary"]["server_decode_tps"]["median"])


def test_the_server_view_names_each_case_as_the_runs_table_does():
    """A scenario case is `chat_short (pp167 tg256)` in the run's table: the server view beside it
    says the same (the shipped dgx-spark-sim report runs four scenarios)."""
    from benchy.report import server_view, table
    from benchy.results import files as results_files

    run = results_files.read(REPO_ROOT / "reports" / "dgx-spark-sim" / "results.json")
    lines = server_view.section_lines(run)
    named = [line.split(" | ")[0].removeprefix("| ") for line in lines if line.startswith("| ") and "|---" not in line]
    assert named[1:] == [table.case_name(c) for c in run.cases] and named[0] == "test"
    assert all(c.scenario and name.startswith(c.scenario + " (") for c, name in zip(run.cases, named[1:]))


def _drawn(monkeypatch, results: RunResult, directory):
    """The server view's figure object (before it is saved) and its caption."""
    from benchy.report import plots, server_view

    drawn = {}
    monkeypatch.setattr(plots, "save", lambda fig, path: drawn.setdefault("fig", fig) and path)
    figure = server_view.figure(results, directory)
    drawn["fig"].canvas.draw()
    return drawn["fig"], figure.caption


def test_the_figure_draws_what_the_table_shows(start_sim, tmp_path, monkeypatch):
    """A single stream never queues: no 'server: queue' entry for a bar nobody can see; the
    client's rate bars are the results table's medians; every axis starts at a labelled 0 and
    has no '1e6' offset (a million-t/s prefill reads as 1M, not 1)."""
    from benchy.report import server_view

    sim = start_sim("--prefill-tps", "2000000", "--decode-tps", "400", "--max-running", "4")
    results = RunResult.from_dict(run(sim, "--pp", "2000", "--tg", "12", "--runs", "3"))
    [case] = results.cases
    fig, caption = _drawn(monkeypatch, results, tmp_path)
    left, mid, right = fig.axes
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    server = case.server_figures()
    assert server is not None
    server_ttft = server.histograms["ttft_s"].mean
    assert server.histograms["queue_s"].mean < server_view.VISIBLE_SHARE * server_ttft
    assert "server: queue" not in legend and "server: prefill" in legend
    for ax in (left, mid, right):
        assert ax.get_xlim()[0] == 0 and ax.xaxis.get_offset_text().get_text() == ""
        assert "0" in [t.get_text() for t in ax.get_xticklabels()]
    for ax, metric in ((mid, "prefill_tps"), (right, "decode_tps")):
        # The table's figure: its median, or n/a where the spread dwarfs it (a 1 ms prefill's
        # rate on a loaded machine can be that noisy), which the caption then says.
        summary = case.summary[metric]
        noisy = table.too_noisy(summary, METRICS[metric])
        assert ax.patches[0].get_width() == (0 if noisy else pytest.approx(summary.median))
        assert not noisy or "too noisy for one figure" in caption


def test_a_withheld_client_bar_says_why(start_sim, tmp_path, monkeypatch):
    # 200 t/s: the 16 tokens a buffer holds back took 75 ms to make, which a busy client reading
    # late cannot hide (at 2,000 t/s they took 7.5 ms, and one late read halved that: "live").
    sim = start_sim("--preset", "buffered", "--decode-tps", "200", "--prefill-tps", "100000")
    results = RunResult.from_dict(run(sim, "--pp", "500", "--tg", "32", "--runs", "3"))
    [case] = results.cases
    assert case.summary["decode_tps"] is None  # withheld: the stream was buffered
    _, caption = _drawn(monkeypatch, results, tmp_path)
    assert "client Decode t/s of" in caption and "(SSE buffering)" in caption
    assert "does not publish" not in caption


def test_llamacpp_rates_beside_the_clients_are_the_same_statistic_and_its_prompt_time_is_shown(start_sim, tmp_path):
    """llama.cpp with --metrics and per-response timings, one request in flight: /metrics' decode
    rate is a ratio of sums over the case, the client's a median of per-request rates; the view
    sets the client's beside the median of the server's own timings (they then agree, as the truth
    says), names the statistic, and fills the server's prefill time from each response's prompt_ms
    (no "–" where the warnings quote it)."""
    from benchy.report import server_view

    sim = start_sim(*FAST, "--flavor", "llamacpp", "--timings")
    results = run(sim, "--pp", "300", "--tg", "24", "--runs", "4")
    typed = RunResult.from_dict(results)
    case = typed.cases[0]
    row = server_view.case_row(typed, case)
    assert row["server_source"].startswith("/metrics") and row["server_rates"] == server_view.RATES_PER_RESPONSE
    assert row["server_decode_tps"] == pytest.approx(case.median("server_decode_tps"))
    assert row["server_prefill_tps"] == pytest.approx(case.median("server_prefill_tps"))
    truth = measured_truth(sim, results["cases"][0])
    prompt_s = [t["prefill_end_s"] - t["prefill_start_s"] for t in truth]
    assert row["server_prefill_s"] == pytest.approx(sum(prompt_s) / len(prompt_s), rel=0.01)
    section = "\n".join(server_view.section_lines(typed))
    assert "medians of its per-response timings" in section and " Σ" not in section.split("Rates:")[0]
