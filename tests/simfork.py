"""Simulators forked from one warm process instead of started from scratch.

A `benchy sim` started as `python -m benchy sim` spends ~0.35 CPU-s and ~0.5 s of wall before
it serves anything (an interpreter, click, aiohttp, its vocabulary), and the suite starts a
couple of hundred of them. Here each test process keeps one forkserver (the standard library's
multiprocessing) that has imported all of that once; a simulator is a fork of it that runs
`benchy sim` through the same entry point (`benchy.cli.main`) with its own stdout and stderr
files, its own process id and exit status, so a test can still signal it, wait for it and read
what it printed. Only the start-up is shared: each simulator is still its own process, serving
real HTTP on its own port of 127.0.0.1 and writing its own truth log.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import tempfile
import time

from benchy.sim.process import _LISTEN, REPO_ROOT, SimProcess, child_env

_PRELOAD = "tests.simfork_preload"
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload([_PRELOAD])


def _serve(argv: list[str], stdout_path: str, stderr_path: str, environ: dict[str, str]) -> None:
    """In the fork: the test's environment as it is now (the forkserver's is as it was when it
    started), stdout and stderr to the simulator's own files, then `benchy sim`."""
    os.environ.clear()
    os.environ.update(environ)
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        with open(path, "w") as file:
            os.dup2(file.fileno(), fd)
    os.chdir(REPO_ROOT)
    from benchy import cli

    cli.main(["sim", *argv])


class Forked:
    """What SimProcess and the tests use of a subprocess.Popen, for a forked simulator."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self._process = process
        self.pid = process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self._process.terminate()

    def kill(self) -> None:
        self._process.kill()

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired("benchy sim", timeout or 0)
        return self._process.exitcode


class ForkedSim(SimProcess):
    """SimProcess, started as a fork of the warm process: the same flags, truth log, `.proc`
    (signals, wait, exit status), `.stderr()` and start-up checks."""

    def start(self) -> ForkedSim:
        argv = ["--port", "0", *self.flags]
        if self.truth_path is not None:
            argv += ["--truth-log", str(self.truth_path)]
        self._stdout_path, self._stderr_path = _new_file("out"), _new_file("err")
        self._stderr = open(self._stderr_path, "w+")  # noqa: SIM115  (read by stderr(), closed by stop())
        process = _CONTEXT.Process(
            target=_serve, args=(argv, self._stdout_path, self._stderr_path, child_env()), daemon=True
        )
        process.start()
        self.proc = Forked(process)  # type: ignore[assignment]
        try:
            self.url = self._listening_url()
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _listening_url(self) -> str:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            line = _first_line(self._stdout_path)
            match = _LISTEN.search(line)
            if match:
                return match.group(1)
            exited = self.proc is None or self.proc.poll() is not None
            if exited or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"benchy sim did not start: {(line + self.stderr()).strip()[-500:]}")
            time.sleep(0.005)

    def stop(self) -> int | None:
        code = super().stop()
        for path in (self._stdout_path, self._stderr_path):
            if os.path.exists(path):
                os.unlink(path)  # stderr() still reads the open file
        return code


def _first_line(path: str) -> str:
    """The first complete line of a file being written, or ''."""
    try:
        with open(path) as file:
            line = file.readline()
    except FileNotFoundError:
        return ""
    return line if line.endswith("\n") else ""


def _new_file(kind: str) -> str:
    fd, path = tempfile.mkstemp(prefix=f"benchy-sim-{kind}-")
    os.close(fd)
    return path
