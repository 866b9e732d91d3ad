"""Runs `benchy sim` as a child process on a free port: for `benchy demo` and the tests."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

_LISTEN = re.compile(r"listening on (http://\S+)")


class SimProcess:
    """Context manager: starts the simulator, waits until /health answers, stops it on exit."""

    def __init__(self, *flags: str, truth_log: Path | None = None, start_timeout_s: float = 30.0) -> None:
        self.flags = list(flags)
        self.truth_log = truth_log
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.url = ""

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self) -> "SimProcess":
        cmd = [sys.executable, "-m", "benchy", "sim", "--port", "0", *self.flags]
        if self.truth_log is not None:
            cmd += ["--truth-log", str(self.truth_log)]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        # stderr to a file, not a pipe: a chatty child must never block on a full pipe.
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env)
        line = self.proc.stdout.readline()
        match = _LISTEN.search(line)
        if not match:
            self.stop()
            err = self.stderr_text()
            raise RuntimeError(f"benchy sim did not start: {(line + err).strip()[-500:]}")
        self.url = match.group(1)
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"benchy sim at {self.url} never became healthy")

    def stderr_text(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "SimProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
