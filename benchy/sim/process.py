"""Runs `benchy sim` as a child process on a free port: for `benchy demo` and the tests."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchy.jsontypes import JsonObject

_LISTEN = re.compile(r"benchy sim listening on (http://\S+)")
REPO_ROOT = Path(__file__).resolve().parents[2]


def child_env() -> dict[str, str]:
    """The environment for a child `python -m benchy`: this checkout first on its path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


class SimProcess:
    """Context manager: starts the simulator, waits until /health answers, stops it on exit.
    With `truth_log`, `truth()` reads the simulator's ground-truth log."""

    def __init__(self, *flags: str, truth_log: Path | None = None, start_timeout_s: float = 30.0) -> None:
        self.flags = list(flags)
        self.truth_path = truth_log
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> SimProcess:
        argv = ["--port", "0", *self.flags]
        if self.truth_path is not None:
            argv += ["--truth-log", str(self.truth_path)]
        self._launch(argv)
        try:
            self.url = self._listening_url()
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, argv: list[str]) -> None:
        """`benchy sim ARGV` as a child process, into self.proc (and its stderr's file)."""
        # stderr to a file, not a pipe: a chatty child must never block on a full pipe.
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchy", "sim", *argv],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=child_env(),
            cwd=REPO_ROOT,
        )

    def _listening_url(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None  # started with a stdout pipe
        ready, _, _ = select.select([self.proc.stdout], [], [], self.start_timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        match = _LISTEN.search(line)
        if not match:
            self.stop()
            raise RuntimeError(f"benchy sim did not start: {(line + self.stderr()).strip()[-500:]}")
        return match.group(1)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"benchy sim at {self.url} never became healthy")

    def truth(self, expect: int | None = None, timeout: float = 10.0) -> list[JsonObject]:
        """Parsed truth-log records; with `expect`, waits until at least that many exist
        (a record is written as its response ends, which can trail the client by a moment)."""
        if self.truth_path is None:
            raise RuntimeError("this sim was started without a truth log")
        deadline = time.monotonic() + timeout
        while True:
            records = self._read_truth()
            if expect is None or len(records) >= expect or time.monotonic() > deadline:
                return records
            time.sleep(0.01)

    def _read_truth(self) -> list[JsonObject]:
        if self.truth_path is None or not self.truth_path.exists():
            return []
        lines = self.truth_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
