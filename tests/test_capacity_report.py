"""capacity.json's shape and the capacity report's pure parts: the shipped schema, reading files
back (and refusing others in one line), the Pareto front and compare's verdict by the brackets."""

from __future__ import annotations

import json

import pytest

from benchy.report import capacity as report
from benchy.results import capacity as capacity_types
from benchy.results.capacity import CapacityAnswer, CapacityPoint, CapacityResult, CapacitySetup


def test_shipped_schema_is_generated_from_the_classes():
    shipped = json.loads(capacity_types.SCHEMA_FILE.read_text(encoding="utf-8"))
    assert shipped == capacity_types.json_schema(), "stale: run benchy.results.capacity.write_schema()"


def point(load, total, per_user, verdict="pass") -> CapacityPoint:
    return CapacityPoint(load=load, throughput_tps=total, per_user_tps=per_user, verdict=verdict)


def test_pareto_front_keeps_the_points_no_other_beats_on_both_axes():
    pts = [point(1, 100, 50), point(2, 190, 48), point(4, 350, 44), point(8, 340, 30), point(16, 400, 20)]
    assert [p.load for p in report.pareto_front(pts)] == [16, 4, 2, 1]  # c8 is beaten by c4 on both


def result(capacity, failing, kind="found", points=()) -> CapacityResult:
    answer = CapacityAnswer(kind, capacity, failing)
    return CapacityResult(setup=CapacitySetup(case="pp512 tg128"), answer=answer, points=list(points))


@pytest.mark.parametrize(
    "a, b, words",
    [
        ((4, 5), (8, 9), "more: concurrency 8 against concurrency 4"),
        ((8, 9), (4, 5), "less: concurrency 4 against concurrency 8"),
        ((4, 5), (4, 5), "the same capacity"),
        ((None, 1), (2, 3), "more: concurrency 2 against none"),
    ],
)
def test_compare_says_more_only_when_the_brackets_part(a, b, words):
    assert report.verdict(result(*a), result(*b)).startswith(words)


def test_a_file_round_trips_and_others_are_refused_in_one_line(tmp_path):
    saved = result(4, 5, points=[point(4, 700, 200)])
    capacity_types.save(saved, tmp_path)
    assert capacity_types.read(tmp_path).to_dict() == saved.to_dict()
    (tmp_path / "capacity.json").write_text(json.dumps({"schema": "benchy/capacity/2.0"}))
    with pytest.raises(capacity_types.CapacityFileError, match="not one this benchy reads"):
        capacity_types.read(tmp_path)
    (tmp_path / "capacity.json").write_text(json.dumps({"schema": "benchy/capacity/1.0", "points": [{}]}))
    with pytest.raises(capacity_types.CapacityFileError, match="malformed: points\\[0\\]: missing field 'load'"):
        capacity_types.read(tmp_path)


def test_a_failing_share_is_never_rounded_up_to_the_target():
    """179/200 = 89.5% fails a 90% target: the line, the points table and compare's table must
    not print "90%" for it (the issue's "3 fails: 90% within SLO")."""
    from benchy.capacity.runner import answer_line
    from benchy.capacity.search import Answer, SearchSettings

    failing = CapacityPoint(load=3, verdict="fail", clear=True, requests=200, good=179, goodput=179 / 200)
    passing = CapacityPoint(load=2, verdict="pass", clear=True, requests=200, good=190, goodput=190 / 200)
    found = CapacityResult(
        setup=CapacitySetup(goodput=0.9), answer=CapacityAnswer("found", 2, 3), points=[passing, failing]
    )
    line = answer_line(SearchSettings(target=0.9), Answer("found", 2, 3, False), found.points, False, None)
    assert "3 fails: 89.5% within SLO" in line
    assert "| 89.5% |" in report.points_table(found) and "| 95% |" in report.points_table(found)
    assert "89.5% (179/200)" in report.compare_markdown([found, found], ["a", "b"])


@pytest.mark.parametrize("good", range(150, 201))
def test_a_share_and_its_text_fall_on_the_same_side_of_the_target(good):
    share, target = good / 200, 0.9
    text = capacity_types.share_text(share, target)
    assert (float(text.rstrip("%")) >= 90) == (share >= target), text


def test_a_round_of_20_requests_prints_no_p99_as_run_does_not():
    """One policy for 'too few' (issue 54): a capacity round of 20 requests shows its TTFT
    median, and p90 / p99 as too few, as `benchy run` does for the same 20 values."""
    from benchy.measure import stats
    from benchy.results.types import MetricSummary

    values = [0.1 + 0.01 * i for i in range(20)]
    few = CapacityPoint(
        load=2, verdict="pass", requests=20, ttft=MetricSummary.of(values), itl=MetricSummary.of(values)
    )
    table = report.points_table(CapacityResult(setup=CapacitySetup(), points=[few]))
    row = next(line for line in table.splitlines() if line.startswith("| 1 |"))
    assert f"{stats.median(values) * 1000:,.0f} / {stats.TOO_FEW} / {stats.TOO_FEW}" in row
    many = [0.1 + 0.001 * i for i in range(700)]
    enough = CapacityPoint(
        load=2, verdict="pass", requests=700, ttft=MetricSummary.of(many), itl=MetricSummary.of(many)
    )
    assert stats.TOO_FEW not in report.points_table(CapacityResult(setup=CapacitySetup(), points=[enough]))
