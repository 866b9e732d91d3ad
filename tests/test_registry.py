"""The metric registry is the one description of every metric: docs/metrics.md, table, compare and --slo agree."""

from __future__ import annotations

import re

import pytest

from benchy.measure import metrics
from benchy.measure.metrics import METRICS
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
        assert m.formula is not None or m.level == metrics.CASE, m.name
        assert m.definition and m.title and m.unit, m.name
    assert set(metrics.STREAM_TIMING_METRICS) <= set(metrics.REQUEST_METRICS)


def test_views_are_made_from_the_registry():
    headers, _ = table.rows(RunResult(), table.Footnotes())
    assert headers[2 : 2 + len(metrics.TABLE_METRICS)] == [m.title for m in metrics.TABLE_METRICS]
    assert [m.name for m in metrics.COMPARE_METRICS] == ["e2e_tps", "ttft_s", "decode_tps"]
    assert not hasattr(compare, "METRICS") or compare.METRICS is METRICS
    text = markdown.glossary()
    for m in METRICS.values():
        assert (f"**{m.title}** = {m.definition}" in text) == m.glossary, m.name


@pytest.mark.parametrize("name", sorted(metrics.SLO_METRICS))
def test_every_slo_alias_parses_in_its_unit(name):
    metric = metrics.SLO_METRICS[name]
    if metric.is_time:
        assert metrics.parse_slo(f"{name}=250ms") == {metric.name: pytest.approx(0.25)}
        assert metrics.parse_slo(f"{name}=2s") == {metric.name: 2.0}
    else:
        assert metrics.parse_slo(f"{name}=20") == {metric.name: 20.0}


def test_slo_direction_follows_higher_is_better():
    fast = {"e2e_tps": 30.0, "ttft_s": 0.1}
    assert metrics.meets_slo(fast, {"e2e_tps": 20.0, "ttft_s": 0.2}) is True
    assert metrics.meets_slo(fast, {"e2e_tps": 40.0}) is False
    assert metrics.meets_slo(fast, {"ttft_s": 0.05}) is False


def test_every_dependency_is_a_record_field_or_a_metric():
    """`depends` is read (a withheld metric takes those computed from it along): a name in it
    that is neither a record field nor a metric would silently propagate nothing."""
    from dataclasses import fields

    from benchy.measure.records import RequestRecord

    known = {f.name for f in fields(RequestRecord)} | set(metrics.METRICS) | {"slo"}
    for m in metrics.METRICS.values():
        assert set(m.depends) <= known, (m.name, set(m.depends) - known)


def test_withholding_ttft_takes_what_is_computed_from_it_along():
    taken = metrics.with_dependents(("ttft_s",))
    assert taken[0] == "ttft_s" and {"prefill_tps", "ttft_gap_s"} <= set(taken)
    assert "e2e_tps" not in taken and "server_decode_tps" not in taken


def test_case_level_formulas_are_the_registrys():
    assert set(metrics.CASE_FORMULA_METRICS) == {"aggregate_tps", "request_rate", "achieved_rate"}
