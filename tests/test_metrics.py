"""Each metric formula on hand-built records whose true values are known."""

import dataclasses

import pytest

from benchy.measure import case_formulas, reading, registry, request_formulas
from benchy.measure.unavailable import Unavailable
from benchy.records.plan import Tagged


def record(times, chars=None, kinds=None, completion=None, prompt=1000, cached=0, end=None, **kw):
    chars = chars or [4] * len(times)
    return Tagged(
        case="pp1000 tg",
        run=0,
        index=0,
        warmup=False,
        request_id="r",
        nonce="n",
        target_prompt_tokens=prompt,
        target_output_tokens=len(times),
        token_event_s=list(times),
        token_event_chars=chars,
        token_event_kinds=kinds or "c" * len(times),
        completion_tokens=len(times) if completion is None else completion,
        prompt_tokens=prompt,
        cached_tokens=cached,
        usage_reported=True,
        end_s=end if end is not None else (times[-1] + 0.001 if times else 1.0),
        **kw,
    )


def formula_value(name, rec):
    """The metric as its formula gives it (before any case verdict withholds it)."""
    return registry.computed(rec, reading.read(rec))[name]


def test_one_token_per_event_stream():
    # 0.5 s to the first token, then 20 ms per token: 51 tokens.
    times = [0.5 + 0.02 * i for i in range(51)]
    rec = record(times, end=1.5)
    m = registry.request_metrics(rec)
    assert m["ttft_s"] == pytest.approx(0.5)
    assert m["decode_tps"] == pytest.approx(50.0)
    assert m["e2e_tps"] == pytest.approx(51 / 1.5)
    assert m["prefill_tps"] == pytest.approx(1000 / 0.5)
    assert m["itl_s"] == pytest.approx(0.02)
    assert m["tokens_per_event"] == pytest.approx(1.0)


def test_cached_tokens_are_not_counted_as_prefilled():
    rec = record([0.25, 0.3], cached=500)
    assert formula_value("prefill_tps", rec) == pytest.approx(500 / 0.25)


def test_buffered_stream_keeps_e2e_and_drops_stream_timings():
    # The field report: 29 tokens in 2 events. Timing the gap between events gave 772 tok/s.
    rec = record([3.9, 3.937], chars=[8, 110], completion=29, end=3.94)
    m = registry.request_metrics(rec)
    assert m["e2e_tps"] == pytest.approx(29 / 3.94)
    for name in registry.STREAM_TIMING_METRICS:
        assert isinstance(m[name], Unavailable), name
        assert "SSE buffering: 29 tokens arrived in 2 events" in m[name].reason


def test_vllm_style_merging_of_two_or_three_tokens_is_tolerated():
    times = [0.1 + 0.03 * i for i in range(40)]
    rec = record(times, completion=100)  # 2.5 tokens per event
    assert not isinstance(formula_value("decode_tps", rec), Unavailable)


def test_reasoning_then_content_ttft_and_ttfc():
    rec = record([0.2, 0.25, 0.3, 0.35], kinds="rrcc")
    assert formula_value("ttft_s", rec) == pytest.approx(0.2)
    assert formula_value("ttfc_s", rec) == pytest.approx(0.3)


def test_reasoning_only_output_has_no_ttfc():
    assert isinstance(formula_value("ttfc_s", record([0.2, 0.3], kinds="rr")), Unavailable)


def test_empty_output_has_no_ttft_but_e2e_counts_claimed_tokens():
    rec = record([], completion=256, end=7.0)
    assert isinstance(formula_value("ttft_s", rec), Unavailable)
    assert formula_value("e2e_tps", rec) == pytest.approx(256 / 7.0)


def test_without_usage_tokens_are_a_lower_bound_from_events():
    rec = dataclasses.replace(record([0.1, 0.2, 0.3], end=0.5), completion_tokens=None)
    assert request_formulas.completion_tokens(rec) == 3


def test_failed_request_has_no_metrics():
    rec = record([0.1, 0.2], status="error", error_kind="http_500")
    assert all(isinstance(v, Unavailable) for v in registry.request_metrics(rec).values())


def test_aggregate_throughput_over_case_wall_time():
    a = record([0.1, 0.2], end=1.0, sent_mono_s=100.0)
    b = record([0.1, 0.2], end=1.0, sent_mono_s=100.5)
    assert case_formulas.aggregate_output_tps([a, b]) == pytest.approx(4 / 1.5)


def test_each_measure_name_has_one_address():
    """measure/metrics.py holds the notation and the TTFT-trend judgment: it passes on no name
    from another module, so every importer names the module that defines what it uses."""
    import ast

    from tests.conftest import REPO_ROOT

    tree = ast.parse((REPO_ROOT / "benchy" / "measure" / "metrics.py").read_text(encoding="utf-8"))
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert imported <= used | {"annotations"}, imported - used  # imported to be used, not passed on
    passed_on = []
    for path in (p for top in ("benchy", "tests", "benchmarks") for p in (REPO_ROOT / top).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "benchy.measure.metrics":
                passed_on += [f"{path.name}: {a.name}" for a in node.names if a.name in imported]
    assert not passed_on


def test_an_answer_that_opens_with_whitespace_events_is_no_think_block():
    """Issue 51: a model that streams blank lines first (llama.cpp sends "\\n" events before
    the answer) was read as an empty <think> head, so every event became reasoning and the
    case was flagged reasoning_only. Blank events before plain text open no think block."""
    texts = ["\n"] * 9 + [" The", " answer", " is", " four", "."]
    rec = record([0.2 + 0.01 * i for i in range(len(texts))], chars=[len(t) for t in texts])
    rec = dataclasses.replace(rec, token_event_text="".join(texts))
    assert formula_value("ttfc_s", rec) == pytest.approx(0.2)  # the first event is the answer's
    assert not reading.read(rec).think.opened
    assert formula_value("reasoning_tokens", rec) == 0


def test_blank_events_before_a_real_think_block_still_open_it():
    texts = ["\n"] * 9 + ["<think>", " so", "</think>", " Four", "."]
    rec = record([0.2 + 0.01 * i for i in range(len(texts))], chars=[len(t) for t in texts])
    rec = dataclasses.replace(rec, token_event_text="".join(texts))
    read = reading.read(rec)
    assert read.think.opened and read.think.closed
    assert formula_value("ttfc_s", rec) == pytest.approx(0.2 + 0.01 * 12)
