"""The package as a user installs it: a wheel built from this checkout, installed in a fresh
virtual environment, must carry everything `benchy` reads at run time (the shipped scenarios,
the offline vocabulary, the hardware profiles): an editable checkout hides a missing file."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "benchy")

# Run inside the fresh environment: which benchy was imported, and what it found shipped.
PROBE = textwrap.dedent(
    """
    import json, benchy
    from benchy.measure import profiles
    from benchy.measure import tokenizer
    from benchy.report import html
    from benchy.workloads.scenario import load_scenario, shipped_names
    names = shipped_names()
    print(json.dumps({
        "file": benchy.__file__,
        "cases": {name: [c.label for c in load_scenario(name)] for name in names},
        "tokens": len(tokenizer.encode("hello world")),
        "profiles": len(profiles.hardware_names()),
        "plotly_js": html.asset(html.PLOTLY_JS)[:200],
    }))
    """
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with only the wheel of this checkout installed (no pip of its own, so quick);
    the dependencies come from the test's own environment through a .pth line, not a download."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy: the build writes build/ and *.egg-info beside its sources
    source.mkdir()
    for name in SOURCES:
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO_ROOT / name, source / name)
    wheels = tmp / "wheels"
    _pip(sys.executable, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", wheels, source)
    (wheel,) = wheels.glob("benchy-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    _pip(python, "install", "--no-deps", "--no-index", wheel)
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    Path(purelib, "benchy_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    return venv


def _pip(python, *args) -> None:
    """The test's own pip, acting on `python`'s environment."""
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "--quiet", *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=_clean_env())
    assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout}{done.stderr}"


def _clean_env() -> dict:
    """No PYTHONPATH: the checkout must not stand in for the installed package."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _run(venv: Path, *cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=_clean_env(), cwd=venv, timeout=120)


def test_installed_wheel_loads_every_shipped_scenario(installed):
    done = _run(installed, str(installed / "bin" / "python"), "-c", PROBE)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["file"]).is_relative_to(installed), "imported the checkout, not the installed wheel"
    shipped = sorted(p.stem for p in (REPO_ROOT / "benchy" / "scenarios").glob("*.toml"))
    assert shipped and sorted(found["cases"]) == shipped
    assert all(found["cases"].values()), "a shipped scenario with no cases"
    assert found["tokens"] > 0 and found["profiles"] > 0
    assert "plotly.js (basic - minified)" in found["plotly_js"], "report.html's plotly.js is not in the wheel"


def test_installed_command_names_the_shipped_scenarios(installed):
    """The failure the issue found: after a non-editable install the list was empty."""
    done = _run(installed, str(installed / "bin" / "benchy"), "run", "--scenario", "nope")
    assert done.returncode == 2
    assert "unknown scenario 'nope'; shipped: chat_long_context, chat_short" in done.stderr


def test_top_level_scenarios_is_the_shipped_folder():
    """`scenarios/` at the top of the repository stays where users look, without a second copy."""
    top = REPO_ROOT / "scenarios"
    assert top.resolve() == (REPO_ROOT / "benchy" / "scenarios").resolve()
    assert sorted(top.glob("*.toml"))


def test_every_benchy_command_in_the_engine_recipes_parses():
    """docs/engines.md is pasted as it is: each `benchy` line must be a command benchy takes,
    every flag known (parsed by the real command, nothing sent), and the README links the page."""
    import shlex

    from benchy.cli import cli

    root = Path(__file__).resolve().parent.parent
    assert "(docs/engines.md)" in (root / "README.md").read_text()
    text = (root / "docs" / "engines.md").read_text()
    code = "\n".join(re.findall(r"```sh\n(.*?)```", text, re.S))
    lines = [
        line.split("benchy ", 1)[1] for line in code.splitlines() if re.match(r"(OPENAI_API_KEY=\S+ )?benchy ", line)
    ]
    assert len(lines) >= 6
    for line in lines:
        name, *args = shlex.split(line.replace('"$KEY"', "k"))
        with cli.commands[name].make_context(name, list(args)) as ctx:
            assert ctx.params["output"] is not None, line  # each recipe keeps its results


def _make_installs(target: str, venv: Path) -> list[str]:
    """What `make TARGET` would pip-install into a fresh venv: the spec of each `pip install -e`
    line of its dry run (nothing installed, nothing run but make's own parse)."""
    done = subprocess.run(
        ["make", "-n", "-C", str(REPO_ROOT), target, f"VENV={venv}", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [
        line.split(" -e ", 1)[1].strip()
        for line in done.stdout.splitlines()
        if "pip install" in line and " -e " in line
    ]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_demo_installs_benchy_alone_while_test_and_lint_get_their_extras(tmp_path):
    """`make demo` needs benchy alone: pytest, mypy, ruff or llama.cpp's wheel are not a demo's
    business; `make test` and `make lint` (CI: make install; make lint; make test) still get them."""
    venv = tmp_path / "venv"
    assert _make_installs("demo", venv) == ["."]
    for target in ("test", "lint", "install"):
        specs = _make_installs(target, venv)
        assert any(re.search(r"\[.*\btest\b.*\]", s) and "dev" in s and "realserver" in s for s in specs), (
            target,
            specs,
        )
    # Once the base is in place (its stamp newer than pyproject.toml), only the extras are added.
    venv.mkdir()
    (venv / ".installed-benchy").touch()
    assert _make_installs("demo", venv) == []
    assert _make_installs("test", venv) == ["'.[test,realserver,router,dev]'"]
