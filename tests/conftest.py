"""Shared fixtures: `start_sim` launches `benchy sim` subprocesses whose truth log tests read."""
from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

LISTENING = re.compile(r"benchy sim listening on (http://\S+)")
START_TIMEOUT_S = 30.0


class RunningSim:
    """A started `benchy sim`: its URLs, its process and its truth log."""

    def __init__(self, proc: subprocess.Popen, url: str, truth_path: Path | None, stderr_path: Path):
        self.proc = proc
        self.url = url
        self.base_url = url + "/v1"
        self.truth_path = truth_path
        self.stderr_path = stderr_path

    def truth(self, expect: int | None = None, timeout: float = 10.0) -> list[dict]:
        """Parsed truth-log records; with `expect`, waits until at least that many exist
        (a record is written as its response ends, which can trail the client by a moment)."""
        if self.truth_path is None:
            raise RuntimeError("this sim was started with truth_log=False")
        deadline = time.monotonic() + timeout
        while True:
            records = self._read_truth()
            if expect is None or len(records) >= expect or time.monotonic() > deadline:
                return records
            time.sleep(0.01)

    def _read_truth(self) -> list[dict]:
        if not self.truth_path.exists():
            return []
        lines = self.truth_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode


def sim_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def _read_listening_line(proc: subprocess.Popen, stderr_path: Path) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    match = LISTENING.search(line)
    if not match:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"benchy sim did not start (stdout {line!r}): {stderr_path.read_text()}")
    return match.group(1)


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.02)


@pytest.fixture
def start_sim(tmp_path):
    """start_sim(*flags, truth_log=True) -> RunningSim; every sim is stopped at teardown."""
    started: list[RunningSim] = []

    def start(*flags: str, truth_log: bool = True) -> RunningSim:
        n = len(started)
        truth_path = tmp_path / f"truth-{n}.jsonl" if truth_log else None
        stderr_path = tmp_path / f"sim-{n}.stderr"
        cmd = [sys.executable, "-m", "benchy", "sim", "--port", "0", *flags]
        if truth_path:
            cmd += ["--truth-log", str(truth_path)]
        with open(stderr_path, "wb") as stderr:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                    env=sim_env(), cwd=REPO_ROOT)
        try:
            url = _read_listening_line(proc, stderr_path)
            sim = RunningSim(proc, url, truth_path, stderr_path)
            started.append(sim)
            _wait_healthy(url)
        except BaseException:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            raise
        return sim

    yield start
    for sim in started:
        sim.stop()
