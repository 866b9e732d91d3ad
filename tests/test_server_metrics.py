"""Prometheus /metrics scraping (benchy/server/metrics.py): the parser on real engines' text,
bucket interpolation, and per-case figures scraped from `benchy sim` over real HTTP, judged
against its truth log."""

from __future__ import annotations

import asyncio
import math
import re

import aiohttp
import pytest

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.server.metrics import (
    LLAMACPP,
    VLLM,
    MetricsScraper,
    ScrapeError,
    bucket_quantile,
    case_metrics,
    detect,
    parse,
)
from benchy.server.window import Window
from benchy.sim.metrics import intervals

# llama.cpp b6xxx (xllamacpp) text, abridged, after one request.
LLAMACPP_TEXT = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 11
# TYPE llamacpp:prompt_tokens_cached_total counter
llamacpp:prompt_tokens_cached_total 4
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 0.002861
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 5
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 0.001397
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
"""

VLLM_TEXT = """\
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="m"} {b1}
vllm:request_queue_time_seconds_bucket{engine="0",le="0.5",model_name="m"} {b2}
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} {b3}
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} {b3}
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} {s}
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="other"} 100
vllm:request_queue_time_seconds_bucket{engine="0",le="0.5",model_name="other"} 100
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="other"} 100
vllm:request_queue_time_seconds_count{engine="0",model_name="other"} 100
vllm:request_queue_time_seconds_sum{engine="0",model_name="other"} 3
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} {p}
"""


def _vllm(b1, b2, b3, s, p):
    return (
        VLLM_TEXT.replace("{b1}", str(b1))
        .replace("{b2}", str(b2))
        .replace("{b3}", str(b3))
        .replace("{s}", str(s))
        .replace("{p}", str(p))
    )


def test_llamacpp_counters_mean_the_same_as_vllms():
    before = parse(re.sub(r" [0-9.]+$", " 0", LLAMACPP_TEXT, flags=re.M), 0.0)
    after = parse(LLAMACPP_TEXT, 2.0)
    assert detect(after) is LLAMACPP
    m = case_metrics(before, after, LLAMACPP)
    assert m.counters["prompt_tokens"] == 15  # 11 uncached + 4 cached: the whole prompt
    assert m.counters["cache_hits"] == 4 and m.counters["generation_tokens"] == 5
    assert m.derived["cache_hit_rate"] == pytest.approx(4 / 15)
    assert m.derived["prefill_tps"] == pytest.approx(11 / 0.002861)
    assert m.derived["decode_tps"] == pytest.approx(5 / 0.001397)
    assert "ttft_s" not in m.histograms and m.window_s == 2.0
    assert "kv_cache_usage" in m.unavailable  # this build publishes none: said, not invented


def test_histogram_delta_for_one_model_only():
    before, after = parse(_vllm(1, 1, 1, 0.1, 10), 0.0, "m"), parse(_vllm(3, 5, 6, 2.1, 70), 1.0, "m")
    assert detect(after) is VLLM
    m = case_metrics(before, after, VLLM)
    queue = m.histograms["queue_s"]
    assert queue.count == 5 and queue.mean == pytest.approx(2.0 / 5)  # the other model's 100 left out
    assert queue.median_bounds == [0.3, 0.5]  # 2 of 5 under 0.3, 4 of 5 under 0.5
    assert queue.median == pytest.approx(0.3 + 0.2 * (2.5 - 2) / 2)
    assert queue.p90 is None  # in the +Inf bucket: no bound above it
    low = case_metrics(parse(_vllm(0, 0, 0, 0, 0), 0.0), parse(_vllm(4, 4, 4, 0.2, 0), 1.0), VLLM)
    assert low.histograms["queue_s"].median is None  # somewhere in (0, 0.3]: not placed
    assert "(0, 0.3]" in low.histograms["queue_s"].quantile_note
    assert m.counters["prompt_tokens"] == 60
    assert "decode_s" in m.unavailable and "vllm:request_decode_time_seconds" in m.unavailable["decode_s"]


def test_bucket_quantile_interpolates_like_prometheus():
    cumulative = [(0.1, 0.0), (0.2, 10.0), (0.4, 20.0), (math.inf, 20.0)]
    assert bucket_quantile(cumulative, 0.5) == (pytest.approx(0.2), (0.1, 0.2))
    assert bucket_quantile(cumulative, 0.75)[0] == pytest.approx(0.3)
    over = [(0.1, 0.0), (math.inf, 4.0)]
    assert bucket_quantile(over, 0.5) == (0.1, (0.1, math.inf))  # above the last bound: its floor
    assert bucket_quantile([(0.1, 0.0), (math.inf, 0.0)], 0.5) == (None, None)


def test_text_that_is_not_prometheus_is_a_scrape_error():
    with pytest.raises(ScrapeError):
        parse("<html>502 Bad Gateway</html>\n", 0.0)


def test_a_counter_reset_is_counted_as_rate_counts_it():
    """A restart between scrapes: 50 → 80 before it, 10 → 20 after; the case counted 30 + 20."""
    scrapes = [parse(_vllm(0, 0, 0, 0, p), t) for t, p in enumerate((50, 80, 10, 20))]
    m = case_metrics(scrapes[0], scrapes[-1], VLLM, scrapes[1:-1])
    assert m.counters["prompt_tokens"] == 50 and m.counter_resets == 1 and m.several_processes is None
    alone = case_metrics(scrapes[0], scrapes[-1], VLLM)  # without the scrapes between: one fall seen
    assert alone.counters["prompt_tokens"] == 20 and alone.counter_resets == 1


def test_scrapes_of_several_processes_are_no_count():
    """Two processes behind one address answer in turn: their counts fall and come back."""
    scrapes = [parse(_vllm(0, 0, 0, 0, p), t) for t, p in enumerate((50, 40, 60, 45, 70, 52))]
    m = case_metrics(scrapes[0], scrapes[-1], VLLM, scrapes[1:-1])
    assert m.several_processes and "fell 3 times" in m.several_processes and "came back 2 times" in m.several_processes
    assert "prompt_tokens" not in m.counters and "several processes" in m.unavailable["prompt_tokens"]
    assert m.counter_resets == 0


class _Processes:
    """A /metrics address that answers each scrape from the next of `prompt_tokens` (one value a
    process), as processes behind a balancer do, one connection each."""

    engine = VLLM
    model = "benchy-sim"

    def __init__(self, prompt_tokens: list[int]) -> None:
        self.answers = iter(prompt_tokens)
        self.round_trips: list[float] = []
        self.t_s = 0.0

    async def scrape(self):
        self.t_s += 1.0
        return parse(_vllm(0, 0, 0, 0, next(self.answers)), self.t_s)


def test_the_scrapes_back_to_back_at_a_case_close_show_several_processes():
    """The case's scrapes climb (10 → 30 → 60: process A, then B, as a balancer picked); only
    the scrapes at its close, until two agree, show B's 60 fall to A's 40 and come back. An
    idle process answers two scrapes alike: the close asked until two did."""
    answers = _Processes([10, 30, 60, 40, 60, 60])
    win = Window(answers, interval_s=0)  # type: ignore[arg-type]

    async def case() -> None:
        await win.open()
        await win.close()

    asyncio.run(case())
    m = win.result
    assert not isinstance(m, str) and m.several_processes and "fell once" in m.several_processes
    assert "prompt_tokens" not in m.counters


def test_a_process_label_that_changes_is_several_processes():
    one, two = (
        parse(_vllm(0, 0, 0, 0, p).replace('model_name="', f'pid="{pid}",model_name="'), t)
        for t, (pid, p) in enumerate(((7, 50), (9, 60)))
    )
    m = case_metrics(one, two, VLLM)
    assert "pid" in (m.several_processes or "") and "prompt_tokens" not in m.counters


# ------------------------------------------------------------------ against the simulator

FAST = ("--decode-tps", "400", "--prefill-tps", "20000", "--natural-min", "8", "--natural-max", "24")


async def _requests(base_url: str, prompts: list[str], concurrency: int) -> None:
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as session:

        async def one(i: int, prompt: str) -> None:
            async with sem:
                body = {"model": "benchy-sim", "messages": [{"role": "user", "content": prompt}], "max_tokens": 16}
                async with session.post(
                    f"{base_url}/chat/completions", json=body, headers={"x-request-id": f"r{i}"}
                ) as r:
                    await r.read()

        await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))


def _window(base_url: str, root: str, prompts: list[str], concurrency: int):
    async def go():
        async with Client(ClientSettings(base_url)) as client:
            scraper = MetricsScraper(client, f"{root}/metrics", "benchy-sim")
            status = await scraper.probe()
            win = Window(scraper, interval_s=0.05)
            await win.open()
            await _requests(base_url, prompts, concurrency)
            win.expected_requests = len(prompts)
            await win.close()
            return status, win.result

    return asyncio.run(go())


def test_vllm_flavour_case_figures_equal_the_truth(start_sim):
    sim = start_sim(*FAST, "--max-running", "2")
    prompts = [f"prompt {i} " + "word " * (40 + 30 * i) for i in range(6)] + ["prompt 0 " + "word " * 40]
    status, m = _window(sim.base_url, sim.url, prompts, concurrency=4)
    truth = sim.truth(expect=len(prompts))
    assert status.available and status.engine == "vllm" and "queue_s" in status.found
    spans = [intervals(_Trace(t)) for t in truth]
    for name in ("queue_s", "prefill_s", "decode_s", "ttft_s", "e2e_s", "inference_s"):
        h = m.histograms[name]
        assert h.count == len(truth)
        assert h.mean == pytest.approx(sum(s[name] for s in spans) / len(truth), rel=1e-6, abs=1e-9), name
    assert max(s["queue_s"] for s in spans) > 0  # 4 in flight on 2 slots: some did queue
    assert m.counters["prompt_tokens"] == sum(t["prompt_tokens"] for t in truth)
    assert m.counters["generation_tokens"] == sum(t["completion_tokens"] for t in truth)
    hits = sum(t["cached_tokens"] for t in truth)
    assert hits > 0 and m.counters["cache_hits"] == hits  # the repeated prompt and the template
    assert m.derived["cache_hit_rate"] == pytest.approx(hits / m.counters["prompt_tokens"])
    assert m.gauges["running"].max <= 2 and m.gauges["running"].samples >= 2


def test_llamacpp_flavour_case_figures_equal_the_truth(start_sim):
    sim = start_sim(*FAST, "--flavor", "llamacpp", "--max-running", "1")
    prompts = [f"another {i} " + "word " * (60 + 20 * i) for i in range(3)]
    status, m = _window(sim.base_url, sim.url, prompts, concurrency=3)
    truth = sim.truth(expect=3)
    assert status.engine == "llama.cpp"
    prefill = sum(t["prefill_end_s"] - t["prefill_start_s"] for t in truth)
    uncached = sum(t["prompt_tokens"] - t["cached_tokens"] for t in truth)
    assert m.derived["prefill_tps"] == pytest.approx(uncached / prefill, rel=1e-6)
    decode = sum(t["token_times_s"][-1] - t["prefill_end_s"] for t in truth)
    assert m.derived["decode_tps"] == pytest.approx(sum(t["completion_tokens"] for t in truth) / decode, rel=1e-6)
    assert m.counters["prompt_tokens"] == sum(t["prompt_tokens"] for t in truth)


def test_metrics_off_gives_the_reason(start_sim):
    sim = start_sim("--no-metrics", truth_log=False)

    async def go():
        async with Client(ClientSettings(sim.base_url)) as client:
            return await MetricsScraper(client, f"{sim.url}/metrics", None).probe()

    status = asyncio.run(go())
    assert not status.available and "HTTP 404" in status.reason and "--metrics" in status.reason


class _Trace:
    """A truth-log line seen as the sim's Trace (for sim.metrics.intervals)."""

    def __init__(self, record: dict) -> None:
        self.__dict__.update(record)


SGLANG_TEXT = """\
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="m"} {p}
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="m"} {g}
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{model_name="m"} {c}
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 3
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} {n}
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} {n}
sglang:time_to_first_token_seconds_count{model_name="m"} {n}
sglang:time_to_first_token_seconds_sum{model_name="m"} {s}
"""


def _sglang(p, g, c, n, s):
    text = SGLANG_TEXT
    for key, value in (("{p}", p), ("{g}", g), ("{c}", c), ("{n}", n), ("{s}", s)):
        text = text.replace(key, str(value))
    return parse(text, 0.0, "m")


def test_sglang_names_map_onto_the_same_figures():
    before, after = _sglang(100, 10, 0, 1, 0.05), _sglang(900, 90, 200, 5, 0.25)
    assert detect(after).engine == "sglang"
    m = case_metrics(before, after, detect(after))
    assert (m.counters["prompt_tokens"], m.counters["generation_tokens"], m.counters["cache_hits"]) == (800, 80, 200)
    assert m.derived["cache_hit_rate"] == 0.25 and m.histograms["ttft_s"].mean == pytest.approx(0.05)
    assert m.gauges["running"].max == 3 and "prefill_tps" in m.unavailable


def test_the_derived_server_figures_are_registered_metrics():
    """What /metrics gives a case beyond the server's own counters (rates, the hit rate, the
    histograms' means the report shows) is described by the registry, source server."""
    from benchy.measure import registry

    keys = {m.key for m in registry.of_level(registry.SERVER_WINDOW)}
    assert {m.source for m in registry.of_level(registry.SERVER_WINDOW)} == {registry.SERVER}
    before = parse(re.sub(r" [0-9.]+$", " 0", LLAMACPP_TEXT, flags=re.M), 0.0)
    m = case_metrics(before, parse(LLAMACPP_TEXT, 2.0), LLAMACPP)
    s_before, s_after = _sglang(100, 10, 0, 1, 0.05), _sglang(900, 90, 200, 5, 0.25)
    s = case_metrics(s_before, s_after, detect(s_after))
    derived = set(m.derived) | set(s.derived) | {k for k in (*m.unavailable, *s.unavailable) if k in keys}
    assert derived and derived <= keys
    assert {"cache_hit_rate", "prefill_tps", "decode_tps"} <= derived
    assert {"ttft_s", "queue_s", "prefill_s"} <= keys  # the histogram means server_view prints


def test_a_fall_while_no_request_was_cut_is_another_process_not_a_reset():
    """Two servers behind nginx: one scrape answers 6,912, the next (the other server) 6,400;
    no request was cut or refused, as a restart's would be."""
    scrapes = [parse(_vllm(0, 0, 0, 0, p), t) for t, p in enumerate((6000, 6912, 6400, 6500))]
    m = case_metrics(scrapes[0], scrapes[-1], VLLM, scrapes[1:-1], cut=False)
    assert m.counter_resets == 0 and "fell once between 4 scrapes while no request" in (m.several_processes or "")
    assert "prompt_tokens" not in m.counters
    restarted = case_metrics(scrapes[0], scrapes[-1], VLLM, scrapes[1:-1], cut=True)
    assert restarted.counter_resets == 1 and restarted.counters["prompt_tokens"] == 912 + 6400 + 100
