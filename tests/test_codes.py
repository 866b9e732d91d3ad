"""The warning codes are a closed set (results/verdicts/codes.py): every code a check yields is
a member, every member is yielded by some check, and docs/checks.md's table lists exactly the
members with their severity rules. Read from the code itself (its calls that make a warning),
so a new check cannot add a code the enum, the docs or a reader of results.json does not know."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from benchy.checks.registry import Warning_
from benchy.results.verdicts.codes import ERROR, INFO, WARNING, Code
from tests.conftest import REPO_ROOT

MAKERS = {"Warning_", "CheckWarning"}  # the calls that make a warning
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
        Warning_("sse_buffering", WARNING, None, "m", "h")  # type: ignore[arg-type]  (a bare string)
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
