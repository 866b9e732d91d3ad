"""The warning codes are a closed set (results/verdicts/codes.py): every code a check yields is
a member, every member is yielded by some check, and docs/checks.md's table lists exactly the
members with their severity rules. Read from the code itself (its calls that make a warning),
so a new check cannot add a code the enum, the docs or a reader of results.json does not know."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import typing
from pathlib import Path

import jsonschema
import pytest

from benchy.checks.registry import Warning_
from benchy.measure.health import ClientHealth
from benchy.measure.registry import METRICS
from benchy.results.types import RunResult
from benchy.results.verdicts.codes import ERROR, INFO, VERDICTS, WARNING, Code, Rule, Verdict
from benchy.results.verdicts.details import DangerousStop, Details, NoFigures, NoUsage
from tests.conftest import REPO_ROOT

MAKERS = {"Warning_", "warning", "CheckWarning"}  # the calls that make a warning
MAKER = Path(inspect.getsourcefile(Warning_) or "")  # where Warning_ checks the code it forwards


def yielded_codes() -> tuple[set[str], list[str]]:
    """The Code members named as the first argument of a warning-making call anywhere in
    benchy/, and each such call whose first argument is anything else (a bare string)."""
    found: set[str] = set()
    bare: list[str] = []
    for path in (REPO_ROOT / "benchy").rglob("*.py"):
        if path.resolve() == MAKER.resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if name not in MAKERS:
                continue
            first = node.args[0]
            if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "Code":
                found.add(first.attr)
            else:
                bare.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    return found, bare


def test_every_code_a_check_yields_is_a_member_and_every_member_is_yielded():
    found, bare = yielded_codes()
    assert not bare, f"warnings made without a Code member: {bare}"
    members = {code.name for code in Code}
    assert found <= members  # an unknown attribute would fail at import too: this names it
    assert members - found == set(), "codes no check yields"


def test_a_warning_outside_the_set_or_its_rule_is_refused():
    with pytest.raises(ValueError):
        Warning_("sse_buffering", WARNING, None, "m", "h")  # a bare string
    with pytest.raises(ValueError):
        Warning_(Code.GPU_IDLE_DOMINATES, WARNING, None, "m", "h")  # an info code raised as a warning
    with pytest.raises(ValueError):
        Warning_(Code.CLIENT_OVERLOADED, ERROR, None, "m", "h")  # not a failure code
    assert Warning_(Code.REQUEST_ERRORS, ERROR, "c", "m", "h").severity == ERROR
    assert Warning_(Code.FIRST_CHUNK_BEFORE_PREFILL, INFO, "c", "m", "h").code == "first_chunk_before_prefill"


def docs_table() -> dict[str, str]:
    """docs/checks.md: code → its severity column, from the table of codes."""
    rows = {}
    for line in (REPO_ROOT / "docs" / "checks.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            for code in re.findall(r"`(\w+)`", cells[0]):
                rows[code] = cells[1]
    return rows


def test_the_docs_table_lists_every_code_with_its_severity_rule():
    rows = docs_table()
    assert set(rows) == {code.value for code in Code}
    assert {code: rows[code.value] for code in Code} == {code: code.rule.words() for code in Code}


def test_every_code_has_its_rule_and_its_class_of_figures():
    assert set(VERDICTS) == set(Code)
    assert all(issubclass(code.details, Details) and dataclasses.is_dataclass(code.details) for code in Code)


def filled(cls: type[Details]) -> Details:
    """An instance of `cls` with every figure set to a value of its own type."""
    samples = {int: 7, float: 0.25, str: "x", bool: True}
    values: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        kind = typing.get_args(typing.get_type_hints(cls)[f.name])[0]
        origin = typing.get_origin(kind)
        if origin is dict:
            values[f.name] = {"k": samples[typing.get_args(kind)[1]]}
        elif origin is list:
            item = typing.get_args(kind)[0]
            values[f.name] = [DangerousStop("<|message|>", "r")] if item is DangerousStop else [samples[item]]
        elif kind is ClientHealth:
            values[f.name] = ClientHealth(loop_lag_ms_p95=30.0, workers=2)
        else:
            values[f.name] = samples[kind]
    return cls(**values)


@pytest.mark.parametrize("code", list(Code), ids=[c.value for c in Code])
def test_each_warning_reads_back_as_its_own_class_with_the_keys_its_check_set(code):
    figures = filled(code.details)
    made = Warning_(code, code.rule.severity, "c", "m", "h", details=figures)
    saved = RunResult(warnings=[made]).to_dict()
    assert set(saved["warnings"][0]["details"]) == {f.name for f in dataclasses.fields(code.details)}
    again = RunResult.from_dict(json.loads(json.dumps(saved))).warnings[0]
    assert type(again.details) is code.details and again.details == figures
    bare = RunResult.from_dict(RunResult(warnings=[Warning_(code, code.rule.severity, "c", "m", "h")]).to_dict())
    assert bare.to_dict()["warnings"][0]["details"] == {}  # no figure set: none written


def test_figures_of_another_codes_class_are_refused():
    with pytest.raises(ValueError):
        Warning_(Code.USAGE_MISMATCH, WARNING, "c", "m", "h", details=NoUsage(requests=1, scale=1.0))


def test_a_code_this_benchy_does_not_emit_reads_with_no_figures():
    data = RunResult().to_dict()
    data["warnings"] = [{"code": "retired_code", "case": None, "details": {"requests": 3}}]
    (read,) = RunResult.from_dict(data).warnings
    assert read.code == "retired_code" and type(read.details) is NoFigures


def test_every_metric_a_verdict_names_is_a_registered_metric():
    named = {name: code for code, v in VERDICTS.items() for name in (*v.qualifies, *v.withholds)}
    assert named, "no verdict names a metric"
    assert set(named) <= set(METRICS), {n: c.value for n, c in named.items() if n not in METRICS}
    with pytest.raises(ValueError, match="no_such_metric"):  # what the table's import would raise
        Verdict(Rule(WARNING), NoFigures, withholds=("no_such_metric",))


def test_a_warning_names_its_codes_metrics_or_a_part_of_them():
    entry = VERDICTS[Code.FIXED_LATENCY]
    made = Warning_(Code.FIXED_LATENCY, WARNING, "c", "m", "h")
    assert (tuple(made.metrics), tuple(made.withheld)) == (entry.qualifies, entry.withholds) != ((), ())
    part = Warning_(Code.RATE_DRIFT, WARNING, "c", "m", "h", metrics=VERDICTS[Code.RATE_DRIFT].qualifies[1:])
    assert part.metrics == list(VERDICTS[Code.RATE_DRIFT].qualifies[1:])
    with pytest.raises(ValueError):  # a metric its code's entry does not name
        Warning_(Code.FIXED_LATENCY, WARNING, "c", "m", "h", withheld=("e2e_tps",))


def test_no_check_names_a_metric_outside_its_codes_entry():
    """Read from the calls themselves, so a check that fires rarely cannot hide a stray name:
    each literal `metrics=`/`withheld=` of a warning-making call is within its code's entry."""
    stray = []
    for path in (REPO_ROOT / "benchy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Attribute):
                continue
            if getattr(node.func, "id", None) not in MAKERS or node.args[0].attr not in Code.__members__:
                continue
            entry = VERDICTS[Code[node.args[0].attr]]
            named = [("metrics", a) for a in node.args[5:6]] + [("withheld", a) for a in node.args[6:7]]
            for arg, value in [*named, *((kw.arg or "", kw.value) for kw in node.keywords)]:
                allowed = {"metrics": entry.qualifies, "withheld": entry.withholds}.get(arg)
                literals = [
                    c.value for c in ast.walk(value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                ]
                stray += [
                    f"{path.name}: {node.args[0].attr} {arg}={n}"
                    for n in literals
                    if allowed is not None and n not in allowed
                ]
    assert not stray


def test_the_queueing_trap_is_held_in_one_module():
    """Its thresholds (module-level QUEUE_*) are assigned in results/verdicts/queueing.py and
    nowhere else, so the decision and the words cannot drift apart."""
    home = REPO_ROOT / "benchy" / "results" / "verdicts" / "queueing.py"
    assigned = {
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "benchy").rglob("*.py")
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        for name in ast.walk(target)
        if isinstance(name, ast.Name) and name.id.startswith("QUEUE_")
    }
    assert assigned == {str(home.relative_to(REPO_ROOT))}


def test_the_schema_pins_each_codes_figures():
    """results.schema.json says which figures each code carries: a no_usage warning's figures
    are valid as its own and refused under usage_mismatch, whose class has no `scale`."""
    from tests.test_schema import validator

    check = validator()
    data = RunResult().to_dict()
    data["warnings"] = [{"code": "no_usage", "details": {"requests": 2, "scale": 1.1}}]
    check.validate(data)
    data["warnings"][0]["code"] = "usage_mismatch"
    with pytest.raises(jsonschema.ValidationError):
        check.validate(data)
