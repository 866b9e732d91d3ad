"""The metric registry is the one description of every metric: docs/metrics.md, table, compare and --slo agree."""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest

from benchy.measure import reading, registry, slo, unavailable
from benchy.measure.registry import METRICS
from benchy.records.plan import Tagged
from benchy.report import compare, markdown, table
from benchy.results.types import RunResult
from tests.conftest import REPO_ROOT


def readme_metric_table() -> dict[str, str]:
    """`name` → definition, from the docs/metrics.md table whose header is `| metric | definition |`."""
    lines = (REPO_ROOT / "docs" / "metrics.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| metric | definition |")
    rows = {}
    for line in lines[start + 2 :]:
        found = re.fullmatch(r"\| `(\w+)` \| (.*) \|", line)
        if not found:
            break
        rows[found.group(1)] = found.group(2)
    return rows


def test_readme_metric_table_is_the_registry():
    assert readme_metric_table() == {m.name: m.definition for m in METRICS.values()}


def test_every_request_metric_has_a_formula():
    for m in METRICS.values():
        assert m.formula is not None or m.level != registry.REQUEST, m.name
        assert m.definition and m.title and m.unit, m.name
    assert set(registry.STREAM_TIMING_METRICS) <= set(registry.REQUEST_METRICS)


def test_views_are_made_from_the_registry():
    headers, _ = table.rows(RunResult(), table.Footnotes())
    assert headers[2 : 2 + len(registry.TABLE_METRICS)] == [m.title for m in registry.TABLE_METRICS]
    assert [m.name for m in registry.COMPARE_METRICS] == ["e2e_tps", "ttft_s", "decode_tps"]
    assert not hasattr(compare, "METRICS") or compare.METRICS is METRICS
    text = markdown.glossary()
    for m in METRICS.values():
        assert (f"**{m.title}** = {m.definition}" in text) == m.glossary, m.name


@pytest.mark.parametrize("name", sorted(registry.SLO_METRICS))
def test_every_slo_alias_parses_in_its_unit(name):
    metric = registry.SLO_METRICS[name]
    if metric.is_time:
        assert slo.parse_slo(f"{name}=250ms") == {metric.name: pytest.approx(0.25)}
        assert slo.parse_slo(f"{name}=2s") == {metric.name: 2.0}
    else:
        assert slo.parse_slo(f"{name}=20") == {metric.name: 20.0}


def test_slo_direction_follows_higher_is_better():
    fast = {"e2e_tps": 30.0, "ttft_s": 0.1}
    assert slo.meets_slo(fast, {"e2e_tps": 20.0, "ttft_s": 0.2}) is True
    assert slo.meets_slo(fast, {"e2e_tps": 40.0}) is False
    assert slo.meets_slo(fast, {"ttft_s": 0.05}) is False


def test_dependencies_name_metrics_and_reads_name_record_fields():
    """`depends` is read (a withheld metric takes those computed from it along, and its value is
    passed to the formula): a name there must be a metric; what the record gives is `reads`."""
    from dataclasses import fields

    from benchy.records.plan import Tagged

    record_fields = {f.name for f in fields(Tagged)}
    for m in registry.METRICS.values():
        assert set(m.depends) <= set(registry.METRICS), (m.name, set(m.depends) - set(registry.METRICS))
        assert set(m.reads) <= record_fields | {"slo"}, (m.name, set(m.reads) - record_fields)
        assert m.source in registry.SOURCES, m.name


def test_computing_order_puts_each_metric_after_what_it_depends_on():
    seen: set[str] = set()
    for m in registry.ORDER:
        assert set(m.depends) <= seen, m.name
        seen.add(m.name)
    assert seen == set(METRICS)


def test_a_cycle_or_an_unknown_dependency_is_refused():
    a = dataclasses.replace(METRICS["ttft_s"], name="a", depends=("b",))
    b = dataclasses.replace(METRICS["ttft_s"], name="b", depends=("a",))
    with pytest.raises(ValueError, match="cycle"):
        registry.computing_order([a, b])
    with pytest.raises(ValueError, match="no_such_metric"):
        registry.computing_order([dataclasses.replace(a, depends=("no_such_metric",))])
    with pytest.raises(ValueError, match="twice"):
        registry.computing_order([a, a])


def _formula_names() -> set[str]:
    return {m.formula.__name__ for m in METRICS.values() if m.formula is not None}


@pytest.mark.parametrize("module", ["request_formulas", "case_formulas", "window_formulas", "turn_formulas"])
def test_no_formula_calls_another_formula(module):
    """Values are passed forward in the registry's order, so a formula never recomputes what it
    depends on (prefill_tps takes TTFT's value instead of calling ttft_s)."""
    path = REPO_ROOT / "benchy" / "measure" / f"{module}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    formulas = _formula_names()
    defined = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert formulas & set(defined), f"{module}.py defines no registered formula"
    for name in formulas & set(defined):
        for node in ast.walk(defined[name]):
            if isinstance(node, ast.Call):
                callee = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                assert callee not in formulas, f"{name} calls the formula {callee}"


def test_an_unavailable_dependency_makes_its_dependents_unavailable_for_its_reason():
    rec = Tagged(
        case="pp8 tg",
        run=0,
        index=0,
        warmup=False,
        request_id="r",
        nonce=None,
        target_prompt_tokens=8,
        target_output_tokens=4,
        token_event_s=[],
        token_event_chars=[],
        prompt_tokens=8,
        completion_tokens=4,
        usage_reported=True,
        end_s=1.0,
        first_chunk_s=0.1,
    )
    values = registry.computed(rec, reading.read(rec))
    why = values["ttft_s"]
    assert isinstance(why, unavailable.Unavailable) and why.code == unavailable.NO_TEXT_EVENT
    dependents = set(registry.with_dependents(("ttft_s",))) - {"ttft_s"}
    assert dependents and all(values[name] is why for name in dependents)
    assert values["e2e_tps"] == pytest.approx(4.0)  # depends on e2e_s, which is available


def test_withholding_ttft_takes_what_is_computed_from_it_along():
    taken = registry.with_dependents(("ttft_s",))
    assert taken[0] == "ttft_s" and {"prefill_tps", "ttft_gap_s"} <= set(taken)
    assert "e2e_tps" not in taken and "server_decode_tps" not in taken


def test_case_level_formulas_are_the_registrys():
    assert set(registry.CASE_FORMULA_METRICS) == {
        "aggregate_tps",
        "request_rate",
        "achieved_rate",
        "input_tps",
        "input_rate",
    }


def _keys(level: str) -> set[str]:
    return {m.key for m in registry.of_level(level)}


def test_every_figure_beside_a_case_is_a_registered_metric_with_a_source():
    """The figures a case keeps beside its own (turn rows, the TTFT gain, the GPU's energy,
    benchy's event loop) are the registry's: a new one left out of it fails here."""
    from dataclasses import fields

    from benchy.load.monitor import LoopMonitor
    from benchy.measure import gpu, workloads

    counts = {"turn", "n_ok", "n_failed", "unavailable"}
    assert {f.name for f in fields(workloads.TurnRow)} - counts == _keys(registry.TURN)
    assert {f.name for f in fields(workloads.TtftGain)} - {"baseline"} == _keys(registry.GAIN)
    assert {*gpu.ENERGY_FIGURES, "power_w", "bandwidth_gbs"} == _keys(registry.GPU_WINDOW)
    loop = {f.name for f in fields(LoopMonitor().figures([]))}
    assert _keys(registry.LOOP) <= loop
    assert loop - _keys(registry.LOOP) == {"lag_samples", "cpu_s", "wall_s"}  # counts, not figures
    for level in (registry.TURN, registry.GAIN, registry.GPU_WINDOW, registry.LOOP, registry.SERVER_WINDOW):
        assert {m.source for m in registry.of_level(level)} <= set(registry.SOURCES)


def test_energy_figures_take_the_energys_reason_along():
    from benchy.measure.window_formulas import EnergyWindow

    window = EnergyWindow(output_tokens=100, requests=4, idle_power_w=50.0, window_s=2.0)
    values = registry.compute(registry.GPU_WINDOW, window, {"gpu_energy_j": 300.0})
    assert values["gpu_joules_per_token"] == pytest.approx(3.0)
    assert values["gpu_joules_per_request"] == pytest.approx(75.0)
    assert values["gpu_marginal_joules_per_token"] == pytest.approx((300.0 - 100.0) / 100)
    why = unavailable.Unavailable("no_energy", "the exporter gave no energy")
    withheld = registry.compute(registry.GPU_WINDOW, window, {"gpu_energy_j": why})
    assert all(withheld[m.name] is why for m in registry.of_level(registry.GPU_WINDOW) if m.formula)


def test_turn_and_server_histogram_figures_are_made_by_registry_formulas():
    """A turn row's medians and the server's histogram means are computed by the registry (its
    TURN and SERVER_WINDOW formulas), not beside it: each such metric has a formula, every
    histogram an engine publishes has its mean registered, and the modules that fill them take
    no statistic of their own."""
    import inspect

    from benchy.measure import workloads
    from benchy.server import metrics as server_metrics

    assert all(m.formula is not None for m in registry.of_level(registry.TURN))
    means = {m.key for m in registry.of_level(registry.SERVER_WINDOW) if m.definition.startswith("the mean of")}
    published = {name for engine in server_metrics.ENGINES for name in engine.histograms}
    assert published and published <= means
    assert all(METRICS[f"server_window_{key}"].formula is not None for key in means)
    for module in (workloads, server_metrics):
        assert "stats." not in inspect.getsource(module), module.__name__


def test_a_turns_medians_come_from_its_requests_metrics():
    from benchy.measure.turn_formulas import NONE_OK, TurnSample

    why = unavailable.Unavailable(unavailable.BUFFERED, "buffered")
    ok = [
        Tagged("c", 0, i, False, f"r{i}", None, 100, 8, prompt_tokens=100 + i, cached_tokens=10 * i) for i in range(3)
    ]
    sample = TurnSample(
        ok=ok,
        values=[{"ttft_s": t, "ttftc_s": t + 0.05, "prefill_tps": why, "e2e_s": 2 * t} for t in (0.3, 0.1, 0.2)],
        cold_ttft=[0.8, why, 0.4],
    )
    found = registry.compute(registry.TURN, sample, {})
    assert found["turn_ttft_s"] == pytest.approx(0.2) and found["turn_e2e_s"] == pytest.approx(0.4)
    assert found["turn_ttftc_s"] == pytest.approx(0.25)  # the first tool call's, as TTFT's
    assert found["turn_prefill_tps"] is why  # one request without it: no median, its reason
    assert found["turn_new_tokens"] == pytest.approx(91) and found["turn_prompt_tokens"] == pytest.approx(101)
    assert found["turn_cold_ttft_s"] == pytest.approx(0.6)
    assert found["turn_ttft_gain"] == pytest.approx(0.6 / 0.2)
    empty = registry.compute(registry.TURN, TurnSample(ok=[], values=[], cold_ttft=[]), {})
    assert empty["turn_ttft_s"] is NONE_OK and isinstance(empty["turn_ttft_gain"], unavailable.Unavailable)
