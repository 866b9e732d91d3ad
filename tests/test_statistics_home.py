"""Statistics have one home, benchy/measure/stats.py: a median, percentile or spread computed
anywhere else is a second definition that can drift from the one the reports state (numpy's
percentile method, a sample or population std). Read from the code's own calls and imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "benchy"
HOME = PACKAGE / "measure" / "stats.py"
NUMPY_STATISTICS = {
    "median",
    "percentile",
    "quantile",
    "nanmedian",
    "nanpercentile",
    "nanquantile",
    "mean",
    "nanmean",
    "average",
    "std",
    "nanstd",
    "var",
    "nanvar",
}
STATISTICS_MODULES = {"statistics", "scipy.stats"}


def statistics_outside_home(path: Path) -> list[str]:
    """Each place in `path` that computes a statistic itself: numpy's statistic functions
    called through the module, or the statistics / scipy.stats modules imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    numpy_names = {"numpy"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "numpy":
                    numpy_names.add(alias.asname or "numpy")
                if alias.name in STATISTICS_MODULES:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            if node.module in STATISTICS_MODULES or (
                node.module == "scipy" and any(a.name == "stats" for a in node.names)
            ):
                found.append(f"line {node.lineno}: from {node.module} import …")
            if node.module == "numpy" and any(a.name in NUMPY_STATISTICS for a in node.names):
                found.append(f"line {node.lineno}: from numpy import a statistic")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in NUMPY_STATISTICS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in numpy_names
        ):
            found.append(f"line {node.lineno}: {node.func.value.id}.{node.func.attr}(…)")
    return found


def test_no_statistic_is_computed_outside_measure_stats():
    offenders = {
        str(path.relative_to(REPO_ROOT)): where
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOME and (where := statistics_outside_home(path))
    }
    assert not offenders, f"compute these through benchy.measure.stats: {offenders}"


@pytest.mark.parametrize(
    "source",
    [
        "import numpy as np\nx = np.median([1, 2])\n",
        "import numpy\nx = numpy.percentile([1, 2], 90)\n",
        "import statistics\n",
        "from scipy import stats\n",
        "from numpy import quantile\n",
    ],
)
def test_the_scan_sees_a_statistic(tmp_path, source):
    path = tmp_path / "module.py"
    path.write_text(source, encoding="utf-8")
    assert statistics_outside_home(path)


def test_the_home_itself_is_seen_computing():
    """The scan would see stats.py's own numpy calls: it is exempt by name, not blind."""
    assert statistics_outside_home(HOME)
