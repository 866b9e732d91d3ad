"""Shared fixtures: `start_sim` launches `benchy sim` subprocesses whose truth log tests read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchy.sim.process import SimProcess, child_env  # noqa: E402  (after the path is set)


def sim_env() -> dict:
    """The environment for a child `python -m benchy` that must import this checkout."""
    return child_env()


def run_benchy(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m benchy ARGS` from the repo root, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "benchy", *args],
        capture_output=True,
        text=True,
        env=env or sim_env(),
        cwd=REPO_ROOT,
        timeout=timeout,
    )


@pytest.fixture
def start_sim(tmp_path):
    """start_sim(*flags, truth_log=True) -> SimProcess (`.base_url`, `.truth()`, `.stderr()`,
    `.proc`); every sim is stopped at teardown, also when the test fails."""
    started: list[SimProcess] = []

    def start(*flags: str, truth_log: bool = True) -> SimProcess:
        truth_path = tmp_path / f"truth-{len(started)}.jsonl" if truth_log else None
        sim = SimProcess(*flags, truth_log=truth_path)
        started.append(sim)
        return sim.start()

    yield start
    for sim in started:
        sim.stop()
