"""The house shows the pipeline: one package per stage, imports that only point upstream.

Read from the code's own imports (module level and inside functions alike: a lazy import
still closes a circle), so a newcomer's map of benchy/ cannot drift from what the code does.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "benchy"
MAX_TOP_LEVEL = 10
# A stage may import those it names here and nothing else of benchy (besides benchy itself,
# for __version__, and jsontypes, the saved-file helper every stage's dataclasses use).
MAY_IMPORT = {
    "records": set(),  # the exchange record: the bottom of the house, below client and measure
    "workloads": set(),
    "measure": {"records", "workloads"},  # a workload's settings, as the plan saves them (workloads/spec.py)
    "client": {"records"},
    "load": {"client", "measure", "workloads", "records"},
    "server": {"measure"},
    # the server's own figures are typed there; the load stage's Calibration (load/calibration.py)
    "results": {"measure", "workloads", "server", "records", "load"},
    "checks": {"measure", "results"},
    "report": {"measure", "results", "folders"},
    # the bundle in, a frozen result out
    "analysis": {"measure", "workloads", "server", "results", "checks", "records"},
    "sim": set(),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(path: Path) -> set[str]:
    """Every benchy module `path` imports, anywhere in it."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {_known(m) for m in found if m.startswith("benchy")} - {name, ""}


def _known(name: str) -> str:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


GRAPH = {name: imported(path) for name, path in MODULES.items()}


def stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_round_a_circle():
    assert cycles(GRAPH) == []


def test_no_stage_imports_itself_round_a_circle():
    stages: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        stages[stage(module)] |= {stage(t) for t in targets} - {stage(module)}
    assert cycles(stages) == []


# Imports across the rules above that are known debts, each with why; the test fails on a new
# one and on one named here that is gone, so the list only shrinks.
CROSSINGS_LEFT: set[tuple[str, str]] = set()


def test_each_stage_imports_only_upstream():
    wrong = {
        (module, target)
        for module, targets in GRAPH.items()
        if stage(module) in MAY_IMPORT
        for target in targets
        if stage(target) not in MAY_IMPORT[stage(module)] | {stage(module), "", "jsontypes"}
    }
    assert not wrong - CROSSINGS_LEFT, sorted(wrong - CROSSINGS_LEFT)
    assert CROSSINGS_LEFT <= wrong, f"paid off: strike {sorted(CROSSINGS_LEFT - wrong)} from CROSSINGS_LEFT"


def test_the_top_level_holds_few_modules_and_every_stage_is_a_package():
    top = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL, top
    for name in MAY_IMPORT:
        assert (PACKAGE / name / "__init__.py").is_file(), name
        assert ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())), f"{name}/ says what it holds"


# A module a newcomer can read in one sitting: past this, split it by meaning (issue 51 item 7).
MAX_MODULE_LINES = 600
# Known debts, each with why; the test fails on a new one and on one named here that is gone.
LONG_MODULES_LEFT: set[str] = set()


def test_no_module_is_longer_than_a_sitting():
    long = {
        str(path.relative_to(REPO_ROOT))
        for path in MODULES.values()
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES
    }
    assert long - LONG_MODULES_LEFT == set(), f"over {MAX_MODULE_LINES} lines: split by meaning"
    assert LONG_MODULES_LEFT - long == set(), "paid off: strike it from LONG_MODULES_LEFT"


# mypy --strict, module by module (pyproject's [[tool.mypy.overrides]] with strict = true, which
# `make lint` checks): every module of benchy/ is under it but those of the packages named here.
NOT_YET_STRICT: set[str] = set()  # results/ and analysis/ joined once issue 51's refactor landed


def _strict_patterns() -> list[str]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    overrides = config["tool"]["mypy"].get("overrides", [])
    return [m for o in overrides if o.get("strict") for m in o["module"]]


def _covered(module: str, patterns: list[str]) -> bool:
    return any(module == p or (p.endswith(".*") and (module + ".").startswith(p[:-1])) for p in patterns)


def test_every_module_is_checked_by_mypy_strict():
    assert _covered("benchy.load.sink", ["benchy.load.*"]) and not _covered("benchy.loads", ["benchy.load.*"])
    patterns = _strict_patterns()
    loose = sorted(m for m in MODULES if stage(m) not in NOT_YET_STRICT and not _covered(m, patterns))
    assert loose == [], "name them under strict = true in pyproject.toml's [[tool.mypy.overrides]]"
    assert not any(_covered(f"benchy.{name}", patterns) for name in NOT_YET_STRICT), "strict now: strike it"


# A result is written by the analysis only (benchy/analysis, and the builder it runs:
# results/ and measure/'s figures); every later stage reads it. Read from the code: an
# assignment (or augmented one, or a deletion) into an attribute of a name that holds a result
# by the house's naming (run, case, results, typed, saved), or into an item of one.
RESULT_HOLDERS = {"run", "case", "results", "typed", "saved"}
WRITES_RESULTS = {"analysis", "results", "measure"}


def _result_classes() -> set[str]:
    """The names of the dataclasses benchy/results/ defines: what a result is made of."""
    return {
        node.name
        for module, path in MODULES.items()
        if stage(module) == "results"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list)
    }


def _typed_holders(tree: ast.AST, classes: set[str]) -> set[str]:
    """Names that hold a result by their type, whatever they are called (`entry`, `out`, `point`,
    `progress.result`): a parameter, field or variable annotated with one of `classes`, a
    variable assigned one's constructor or a function's call that returns one."""

    def typed(annotation: ast.expr | None) -> bool:
        return annotation is not None and bool(classes & set(ast.unparse(annotation).replace("|", " ").split()))

    def called(value: ast.expr | None) -> str | None:
        func = value.func if isinstance(value, ast.Call) else None
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None

    makers = set(classes)
    makers |= {
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) if typed(n.returns)
    }
    holders = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and typed(node.annotation):
            holders.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and typed(node.annotation):
            holders.add(node.target.id)
        elif isinstance(node, ast.Assign) and called(node.value) in makers:
            holders |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return holders


def _written_results(tree: ast.AST, holders: set[str] = RESULT_HOLDERS) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        for target in (one for t in targets for one in (t.elts if isinstance(t, ast.Tuple) else [t])):
            while isinstance(target, ast.Subscript):
                target = target.value
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                if target.value.id in holders:
                    found.append((node.lineno, f"{target.value.id}.{target.attr}"))
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute):
                if target.value.attr in holders - RESULT_HOLDERS:  # `progress.result.stopped`
                    found.append((node.lineno, f"{ast.unparse(target.value)}.{target.attr}"))
    return found


def test_no_stage_after_the_analysis_writes_into_a_result():
    sample = "run.warnings = []\ncase.summary['x'] = None\nother.n = 1\ndel typed.cases[0]"
    assert _written_results(ast.parse(sample)) == [(1, "run.warnings"), (2, "case.summary"), (4, "typed.cases")]
    # and by type: what probe/ and capacity/ make (a ProbeResult, a CapacityPoint …) is made whole
    classes = _result_classes()
    assert {"ProbeResult", "LengthEntry", "CapacityResult", "CapacityPoint", "Setup", "CaseResult"} <= classes
    sample = "def f(entry: LengthEntry | None, n: int):\n    entry.gpu = 1\n    n.x = 2\n"
    sample += "def g() -> ProbeCapacity:\n    out = ProbeCapacity()\n    out.verdict, x = 'found', 1\n    return out\n"
    sample += "def h(p):\n    made = g()\n    made.reason = ''\n    p.result.stopped = None\n"
    sample += "class P:\n    result: CapacityResult\n"
    tree = ast.parse(sample)
    typed = _typed_holders(tree, classes)
    assert typed == {"entry", "out", "made", "result"}
    assert [w for _, w in _written_results(tree, RESULT_HOLDERS | typed)] == [
        "entry.gpu", "out.verdict", "made.reason", "p.result.stopped"
    ]  # fmt: skip
    writes = set()
    for module, path in MODULES.items():
        if stage(module) not in WRITES_RESULTS:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            holders = RESULT_HOLDERS | _typed_holders(tree, classes)
            writes |= {f"{module}:{line} {what}" for line, what in _written_results(tree, holders)}
    assert writes == set()


def test_a_result_refuses_writes_once_the_analysis_made_it(tmp_path):
    """The run-time half of the rule: a result is a frozen dataclass, as built and as read back."""
    import dataclasses

    import pytest

    from benchy.results import files
    from benchy.results.types import CaseResult, RunResult, Setup

    run = RunResult(benchy_version="0", setup=Setup(), cases=[CaseResult("pp1 tg1", 1, 1)])
    for made in (run, files.read(files.save(run, tmp_path))):
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.cases[0].n_ok = 3  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.warnings = []  # type: ignore[misc]
        assert made == RunResult.from_dict(made.to_dict())  # still equal to its saved form


def _results_modules() -> list[object]:
    import importlib

    return [importlib.import_module(m) for m in sorted(MODULES) if stage(m) == "results"]


def _dataclasses_of(module: object) -> list[type]:
    import dataclasses
    import inspect

    name = getattr(module, "__name__", "")
    return [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if c.__module__ == name and dataclasses.is_dataclass(c)
    ]


def test_a_probe_or_capacity_result_refuses_writes_as_made_and_as_read_back(tmp_path):
    """probe.json and capacity.json as their readers give them (report, compare, browse): frozen
    all the way down, and equal to what was saved."""
    import dataclasses

    import pytest

    from benchy.load.calibration import Calibration
    from benchy.results import capacity, probe

    made_probe = probe.ProbeResult(
        setup=probe.ProbeSetup(calibration=Calibration(overhead_tokens=36.0, method="usage")),
        lengths=[probe.LengthEntry(length=300, shared=probe.ProbeSide(ttft_s=[0.02]))],
        capacity=probe.ProbeCapacity(points=[probe.CapacityPass(prefixes=1)]),
    )
    made_capacity = capacity.CapacityResult(
        setup=capacity.CapacitySetup(case="pp64 tg16"),
        answer=capacity.CapacityAnswer("found", 4, 5),
        points=[capacity.CapacityPoint(load=4, rounds=[capacity.CapacityRound(12, 11)])],
    )
    read_probe = probe.read(probe.save(made_probe, tmp_path))
    read_capacity = capacity.read(capacity.save(made_capacity, tmp_path))
    assert (read_probe, read_capacity) == (made_probe, made_capacity)
    assert isinstance(read_probe.setup.calibration, Calibration)  # typed, not a dict
    for p in (made_probe, read_probe):
        for target, name in ((p, "images"), (p.setup, "gpu"), (p.setup.calibration, "scale"), (p.lengths[0], "gpu")):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(target, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.capacity.points[0].hits = 1  # type: ignore[misc,union-attr]
    for c in (made_capacity, read_capacity):
        for target, name in ((c, "stopped"), (c.setup, "model"), (c.answer, "line"), (c.points[0], "per_user_tps")):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(target, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.points[0].rounds[0].counted = False  # type: ignore[misc]


def test_every_result_class_is_a_frozen_dataclass_and_rows_are_append_only():
    """Issue 51: a result is constructed once (results/build.py, results/files.py), never
    written into; a case's rows are written once each, with the case's verdicts."""

    from benchy.measure import workloads
    from benchy.results import capacity, figures, probe, rows, setup, types
    from benchy.workloads import spec

    # every module of results/, and the workload figures and settings a case holds (measure/, workloads/)
    result_classes = [c for module in (*_results_modules(), workloads, spec) for c in _dataclasses_of(module)]
    assert {types.RunResult, types.CaseResult, types.MetricSummary, types.CheckWarning} <= set(result_classes)
    assert {probe.ProbeResult, probe.ProbeSetup, capacity.CapacityResult, setup.Setup} <= set(result_classes)
    assert {workloads.WorkloadFigures, workloads.PartialReuse, spec.WorkloadSpec} <= set(result_classes)
    # a request's row is the exchange record (records/, frozen since the client's draft makes it) with its metrics
    writable = {c.__qualname__ for c in result_classes if not c.__dataclass_params__.frozen}  # type: ignore[attr-defined]
    assert writable == set(), "a result's class is a frozen dataclass (a gatherer makes one at its end: FactsTally)"
    for cls in (figures.CaseFigures, figures.Verdicts, figures.Withhold, figures.Judged):
        assert cls.__dataclass_params__.frozen, cls.__name__  # type: ignore[attr-defined]
    changers = {"__setitem__", "__delitem__", "apply", "once", "remember", "insert", "extend"}
    assert changers & set(dir(rows.Rows)) == set()


def _reachable_dataclasses(*roots: type) -> set[type]:
    """Every dataclass a value of `roots` can hold: their fields' type hints walked, through
    unions, lists, tuples and dicts."""
    import dataclasses
    import typing

    seen: set[type] = set()
    todo: list[object] = list(roots)
    while todo:
        hint = todo.pop()
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            if hint not in seen:
                seen.add(hint)
                todo += typing.get_type_hints(hint).values()
        else:
            todo += typing.get_args(hint)
    return seen


def _held(value: object, found: dict[type, object]) -> None:
    """One instance of each dataclass `value` holds (itself included), walked as saved."""
    import dataclasses
    from collections.abc import Mapping, Sequence

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        found.setdefault(type(value), value)
        for f in dataclasses.fields(value):
            _held(getattr(value, f.name), found)
    elif isinstance(value, Mapping):
        for item in value.values():
            _held(item, found)
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        for item in value:
            _held(item, found)


def test_a_result_is_frozen_all_the_way_down():
    """Issue 51 item 3: a result holds figures of other stages' types (the GPU's, the server's,
    the client's health, the canary's…): each frozen too, so `run.cases[0].gpu.energy_j = 0`
    fails as `run.cases[0].n_ok = 0` does. What gathers while a case runs (sanity's tally, a GPU
    window, a /metrics scraper) is a builder of its own that makes the frozen value at its end.
    The roots: what `run`, `rebuild`, `report`, `probe-cache`, `capacity` and `selftest` save."""
    import dataclasses

    import pytest

    from benchy.measure.gpu import GpuCase
    from benchy.measure.selftest import ClientCeiling
    from benchy.results import files
    from benchy.results.capacity import CapacityResult
    from benchy.results.probe import ProbeResult
    from benchy.results.types import RunResult
    from benchy.server.identity import ServerIdentity
    from benchy.server.metrics import HistogramDelta, ServerCaseMetrics

    reachable = _reachable_dataclasses(RunResult, ProbeResult, CapacityResult, ClientCeiling)
    # the walk sees through unions, lists and dicts: a case's GPU (| None), a histogram (a dict's value)
    assert {GpuCase, HistogramDelta, ServerIdentity, ClientCeiling} <= reachable and len(reachable) >= 70
    writable = sorted(f"{c.__module__}.{c.__qualname__}" for c in reachable if not c.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    assert writable == [], "a result's figures are frozen dataclasses, each made once"
    # and as read back from disk (report, compare, browse): every figure the shipped run holds
    found: dict[type, object] = {}
    _held(files.read(REPO_ROOT / "reports" / "dgx-spark-sim" / "results.json"), found)
    assert {ServerCaseMetrics, HistogramDelta, ServerIdentity} <= set(found) and set(found) <= reachable
    for value in found.values():
        first = dataclasses.fields(value)[0].name  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, first, getattr(value, first))


def test_each_command_has_a_room_of_its_own():
    """The command line is a package: `benchy X` is defined in benchy/cli/X.py (what commands
    share lives beside them), and no room of it outgrows 800 lines."""
    from benchy.cli import cli

    assert (PACKAGE / "cli" / "__init__.py").is_file() and not (PACKAGE / "cli.py").exists()
    # `sim` and `browse` live with what they serve (sim/cli.py, report/browse_cli.py); main adds them
    elsewhere = {"sim", "browse"}
    homes = {n: c.callback.__module__ for n, c in cli.commands.items() if c.callback and n not in elsewhere}
    assert len(homes) >= 8, homes
    assert {name: home for name, home in homes.items() if home != f"benchy.cli.{name.replace('-', '_')}"} == {}
    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in (PACKAGE / "cli").glob("*.py")}
    assert max(sizes.values()) <= 800, sizes


# The tricks by which a result is written after it is made that the attribute rule above cannot
# see (issue 51): a class swap (`x.__class__ = Frozen…`), setattr, a cache keyed by id() (an
# object's id is reused once it dies: a cache that outlives it answers for another), and the
# once/remember caches that fill in as a result is read. Forbidden in the stages that make
# results; those that are left are named here, each a debt of issue 51 to pay (not to add to):
# the test fails when a new one appears, and when one named here is gone, so the list shrinks.
WRITE_TRICKS_LEFT: set[str] = set()  # all paid (issue 51 item 3): results are frozen dataclasses, built once


def _tricks(module: str, tree: ast.AST) -> set[str]:
    """`module:function trick` for each write trick in `tree`."""
    found = set()

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.ClassDef):
                inner = child.name
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = f"{where}.{child.name}" if where and where[0].isupper() else child.name
            trick = _trick(child)
            if trick:
                found.add(f"{module}:{where or '<module>'} {trick}")
            visit(child, inner)

    visit(tree, "")
    return found


def _trick(node: ast.AST) -> str | None:
    if isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Attribute) and t.attr == "__class__" for t in node.targets
    ):
        return "__class__ ="
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("setattr", "id"):
            return "setattr" if func.id == "setattr" else "id()"
        if isinstance(func, ast.Attribute) and func.attr in ("once", "remember", "__setattr__", "__delattr__"):
            return func.attr  # object.__setattr__(frozen, …): a frozen dataclass written into
    return None


def test_no_result_is_written_by_class_swaps_setattr_or_id_keyed_caches():
    sample = "x.__class__ = F\ndef f(a):\n    setattr(a, 'n', 1)\n    c[id(a)] = 2\nclass K:\n    def g(self):\n        self.rows.once(1, f)\n"
    sample += "def h(case):\n    object.__setattr__(case, 'scan', 1)\n"
    assert _tricks("m", ast.parse(sample)) == {
        "m:<module> __class__ =",
        "m:f setattr",
        "m:f id()",
        "m:K.g once",
        "m:h __setattr__",
    }
    found = {
        trick
        for module, path in MODULES.items()
        if stage(module) in WRITES_RESULTS
        for trick in _tricks(module, ast.parse(path.read_text(encoding="utf-8")))
    }
    assert found - WRITE_TRICKS_LEFT == set(), "a new way to write into a result after it is made"
    assert WRITE_TRICKS_LEFT - found == set(), "paid off: strike it from WRITE_TRICKS_LEFT"


# Inside the stages that make results, the attribute writes into a result that are left, named
# as issue 51's debt: all paid (the class swap went, files.read and the queueing verdict make
# a new result, the builder decides before it builds). Fails on a new one.
RESULT_WRITES_LEFT: set[str] = set()


def test_the_writes_into_a_result_left_inside_the_analysis_are_only_those_named():
    found = {
        f"{module} {what}"
        for module, path in MODULES.items()
        if stage(module) in WRITES_RESULTS
        for _, what in _written_results(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert found - RESULT_WRITES_LEFT == set(), "a new write into a result after it is made"
    assert RESULT_WRITES_LEFT - found == set(), "paid off: strike it from RESULT_WRITES_LEFT"


def _remade_with_warnings(tree: ast.AST) -> list[int]:
    """Lines that make a result again to give it warnings: `replace(run, warnings=…)`."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)) == "replace"
        and any(k.arg == "warnings" for k in node.keywords)
    ]


def test_no_result_is_made_again_to_hold_its_warnings():
    """Issue 51 item 3: the warnings are checked on the run's view before the RunResult exists
    (results/view.py); the RunResult is then constructed once, with them."""
    sample = "a = replace(run, warnings=w)\nb = dataclasses.replace(r, warnings=[])\nc = replace(run, cases=[])\n"
    assert _remade_with_warnings(ast.parse(sample)) == [1, 2]
    found = {
        f"{module}:{line}"
        for module, path in MODULES.items()
        for line in _remade_with_warnings(ast.parse(path.read_text(encoding="utf-8")))
    }
    assert found == set()


# The warnings of the traps the analysis decides (results/findings.py) are worded by the finding;
# a check may word one of their codes only where it reads what no finding decided, named here.
CHECK_WORDED_FINDING_CODES = {
    # files before 1.9 carry no queueing judgment: a cause inferred from slots, qualified
    "benchy.checks.queueing PREFILL_HOLDS_QUEUEING",
}


def _warned_codes(tree: ast.AST) -> set[str]:
    """The Code members a module makes warnings of: Warning_(Code.X, …) or warning(Code.X, …)."""
    return {
        node.args[0].attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("Warning_", "warning")
        and node.args
        and isinstance(node.args[0], ast.Attribute)
        and isinstance(node.args[0].value, ast.Name)
        and node.args[0].value.id == "Code"
    }


def _wording(tree: ast.AST) -> list[ast.FunctionDef]:
    """The innermost functions of a module that make a warning."""
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and _warned_codes(n)]
    return [f for f in functions if not any(g is not f and g in functions for g in ast.walk(f))]


# A trap's old shape: found and worded in one method, which reads the case and says None where it found nothing.
FOUND_AND_WORDED = "class Q:\n    def warning_of(self, case: CaseResult, run: RunView) -> CheckWarning | None:\n"
FOUND_AND_WORDED += "        return None if case.n else warning(Code.A, case.label)\n"


def test_a_finding_s_warning_is_worded_in_its_class_not_in_a_check():
    """Issue 51 item 2: each finding owns its words; checks/ asks it for them. A finding finds
    (`found_in`), then words what it found (`words`): no method of it does both."""
    from benchy.results import findings

    assert _warned_codes(ast.parse("Warning_(Code.A, x)\nwarning(Code.B)\nother(Code.C)\n")) == {"A", "B"}
    assert [f.name for f in _wording(ast.parse(FOUND_AND_WORDED))] == ["warning_of"]
    wording = _wording(ast.parse(MODULES["benchy.results.findings"].read_text(encoding="utf-8")))
    assert len(wording) >= len(findings.DECIDED) and {f.name for f in wording} == {"words"}
    owned = {f.code.name for f in (*findings.DECIDED, findings.BUFFERED_STREAMS)}
    worded_elsewhere = {
        f"{module} {code}"
        for module, path in MODULES.items()
        if module != "benchy.results.findings"
        for code in _warned_codes(ast.parse(path.read_text(encoding="utf-8"))) & owned
    }
    assert worded_elsewhere == CHECK_WORDED_FINDING_CODES


def test_results_make_no_warnings_but_the_findings_own():
    """The one upward arrow inside results/ (a check in results/verdicts/queueing.py) is gone:
    checks/ words the warnings; inside results/ only a decided finding words its own."""
    making = {module for module, path in MODULES.items() if stage(module) == "results"}
    making = {m for m in making if _warned_codes(ast.parse(MODULES[m].read_text(encoding="utf-8")))}
    assert making == {"benchy.results.findings"}
    # and a finding words only what it found: no case or run to read, no None for nothing found
    assert _seeing(_wording(ast.parse(FOUND_AND_WORDED))) == ["warning_of"]
    wording = _wording(ast.parse(MODULES["benchy.results.findings"].read_text(encoding="utf-8")))
    assert wording and _seeing(wording) == []


def _seeing(functions: list[ast.FunctionDef]) -> list[str]:
    """The wording functions that take a case or a run, or return other than one CheckWarning."""
    looks = ("Case", "Run", "Sequence", "Iterable", "list")
    return [
        f.name
        for f in functions
        if (f.returns is None or ast.unparse(f.returns) != "CheckWarning")
        or any(a.annotation is not None and any(w in ast.unparse(a.annotation) for w in looks) for a in f.args.args)
    ]


# Issue 51 item 1: the exchange record is made once, by the client's draft when the answer
# closes (client/draft.py), and never written into after. Outside the client no code writes a
# record's field on a name that holds one; inside it, what `rec` names is the Draft.
RECORD_NAMES = {"rec", "record", "row", "sent", "done", "got", "planned"}


def _record_writes(tree: ast.AST, fields: set[str]) -> list[str]:
    """`name.field` for each write of a record's field on a name (or `x.record`, `x.rec`)."""
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        for target in targets:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                if not isinstance(one, ast.Attribute) or one.attr not in fields:
                    continue
                held = one.value
                name = held.id if isinstance(held, ast.Name) else held.attr if isinstance(held, ast.Attribute) else ""
                if name in RECORD_NAMES or name == "rec":
                    found.append(f"{ast.unparse(held)}.{one.attr}")
    return found


def test_a_record_is_frozen_and_written_only_as_the_clients_draft():
    import dataclasses

    from benchy.client.draft import Draft
    from benchy.records import RequestRecord
    from benchy.results.types import RequestResult

    for cls in (RequestRecord, RequestResult):
        assert cls.__dataclass_params__.frozen, cls.__name__  # type: ignore[attr-defined]
    fields = {f.name for f in dataclasses.fields(RequestRecord)}
    sample = "rec.status = 'x'\nrequest.record.end_s = 1\nrow.n, other.status = 1, 2\nself.rec.error = 'e'\n"
    assert _record_writes(ast.parse(sample), fields) == ["rec.status", "request.record.end_s", "self.rec.error"]
    outside = {
        f"{module}: {write}"
        for module, path in MODULES.items()
        if not module.startswith("benchy.client.")
        for write in _record_writes(ast.parse(path.read_text(encoding="utf-8")), fields)
    }
    assert outside == set(), "a record written into after it was made: make a new one (dataclasses.replace)"
    # In the client, `rec` is the request's Draft: no function there takes a RequestRecord as `rec`.
    typed_as_record = {
        f"{module}: {node.arg}"
        for module, path in MODULES.items()
        if module.startswith("benchy.client.")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.arg) and node.arg == "rec" and node.annotation is not None
        if "RequestRecord" in ast.unparse(node.annotation)
    }
    assert typed_as_record == set()
    assert Draft.__module__ == "benchy.client.draft"


def test_every_registered_check_is_a_check_class():
    """Issue 51 item 2: each trap a class that detects (pure) and words apart; no check is left a
    function that finds and words in one body (checks/check.py)."""
    from benchy.checks import warnings
    from benchy.checks.check import Check, ManyCheck, RunLevelCheck

    registered = (*warnings.RUN_CHECKS, *warnings.CASE_CHECKS)
    left = [
        getattr(c, "__qualname__", repr(c)) for c in registered if not isinstance(c, Check | ManyCheck | RunLevelCheck)
    ]
    assert len(registered) > 40 and left == []
