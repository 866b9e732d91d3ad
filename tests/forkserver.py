"""Simulators and child benchy processes forked from one warm process, not started from scratch.

A `python -m benchy sim` spends ~0.35 CPU-s and ~0.5 s of wall before it serves anything (an
interpreter, click, aiohttp), a child `python -m benchy run` 1-2 CPU-s (numpy, scipy, the o200k
vocabulary, matplotlib), and the suite starts hundreds of them. Here each test process keeps one
forkserver (the standard library's multiprocessing) that has imported all of that once
(tests/forkserver_preload.py); a simulator or a benchy is a fork of it that runs the same entry
point, `benchy.cli.main`, with the test's current environment, working directory, argv and
standard streams (pipes, files or a terminal, as a subprocess would have them), its own process
id and exit status: a test can still signal it, kill it, read what it printed and wait for it.
Only the start-up is shared: each is still its own process, a simulator serving real HTTP on its
own port of 127.0.0.1 and writing its own truth log.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import context as mp_context
from multiprocessing import forkserver as mp_forkserver
from multiprocessing import popen_forkserver, reduction
from pathlib import Path

from benchy.sim.process import _LISTEN, REPO_ROOT, SimProcess, child_env

# The suite's own fork server, not multiprocessing's shared one: benchy's worker pool stops
# that one when it closes (load/workers.py), which, in a test process running benchy in
# process, would take these simulators' exit statuses with it.
_SERVER = mp_forkserver.ForkServer()
_SERVER.set_forkserver_preload(["tests.forkserver_preload"])


class _Popen(popen_forkserver.Popen):
    """multiprocessing's fork-server start, from the suite's own server."""

    def _launch(self, process_obj) -> None:
        shared = mp_forkserver.connect_to_new_process
        mp_forkserver.connect_to_new_process = _SERVER.connect_to_new_process
        try:
            super()._launch(process_obj)
        finally:
            mp_forkserver.connect_to_new_process = shared


class _Process(mp_context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj):
        return _Popen(process_obj)


# Read by a benchy module when it is imported, so a fork would keep the forkserver's value: a
# child given another value is exec'd afresh (python -m benchy, same pid and streams) instead.
READ_AT_IMPORT = ("BENCHY_ROWS_IN_MEMORY",)


class _Fd:
    """A file descriptor of the test process that the fork receives as its own (SCM_RIGHTS)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        return (_received, (reduction.DupFd(self.fd),))


def _received(dup) -> int:
    return dup.detach()


def _fresh_std_streams() -> None:
    """sys.stdin/stdout/stderr over fds 0-2 as an interpreter starting now would make them (a
    terminal's stdout line-buffered, stderr always), not the forkserver's from its own start."""
    old = sys.__stdout__ or sys.stdout
    encoding, errors = old.encoding, old.errors
    sys.stdin = sys.__stdin__ = open(0, encoding=encoding, errors=errors, closefd=False)  # noqa: SIM115
    for fd, name, line_buffering in ((1, "stdout", os.isatty(1)), (2, "stderr", True)):
        binary = open(fd, "wb", closefd=False)  # noqa: SIM115
        err = "backslashreplace" if name == "stderr" else errors
        stream = io.TextIOWrapper(binary, encoding=encoding, errors=err, line_buffering=line_buffering)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _main(argv: list[str], fds: tuple[int | None, ...], environ: dict[str, str], cwd: str) -> None:
    """In the fork: the child's streams, environment, directory and argv, then benchy's main."""
    for target, fd in enumerate(fds):
        if fd is not None:
            os.dup2(fd, target)
            os.close(fd)
    _fresh_std_streams()
    os.chdir(cwd)
    if any(environ.get(name) != os.environ.get(name) for name in READ_AT_IMPORT):
        os.execve(sys.executable, [sys.executable, "-m", "benchy", *argv], environ)
    os.environ.clear()
    os.environ.update(environ)
    sys.argv = [str(REPO_ROOT / "benchy" / "__main__.py"), *argv]
    from benchy import cli

    cli.main(argv)


def _fd_of(spec, for_child: str) -> tuple[int | None, object, bool]:
    """(the fd the child gets, the parent's end of a pipe or None, whether to close the fd here)."""
    if spec is None:
        return None, None, False
    if spec == subprocess.PIPE:
        read, write = os.pipe()
        return (read, write, True) if for_child == "r" else (write, read, True)
    if spec == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR), None, True
    if isinstance(spec, int):
        return spec, None, False
    return spec.fileno(), None, False


class ForkedPopen:
    """What the tests use of subprocess.Popen, for a forked `python -m benchy ARGS`."""

    def __init__(
        self,
        argv: list[str],
        *,
        stdin=None,
        stdout=None,
        stderr=None,
        text: bool = False,
        env: dict | None = None,
        cwd: Path | str = REPO_ROOT,
        daemon: bool = False,
    ) -> None:
        self.args = ["python", "-m", "benchy", *argv]
        ends = [_fd_of(stdin, "r"), _fd_of(stdout, "w"), _fd_of(stderr, "w")]
        fds = tuple(None if fd is None else _Fd(fd) for fd, _, _ in ends)
        environ = dict(child_env() if env is None else env)
        self._process = _Process(target=_main, args=(list(argv), fds, environ, str(cwd)), daemon=daemon)
        try:
            self._process.start()
        finally:
            for fd, _, close in ends:
                if close and fd is not None:
                    os.close(fd)
        self.pid = self._process.pid
        mode = ("w", "r", "r")
        self.stdin, self.stdout, self.stderr = (
            None if end is None else open(end, mode[i] + ("" if text else "b"))  # noqa: SIM115
            for i, (_, end, _) in enumerate(ends)
        )

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
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._process.exitcode

    def communicate(self, timeout: float | None = None):
        """Both pipes read to their end (threads, so neither blocks the other), then the exit."""
        got: dict[str, object] = {}
        readers = [
            threading.Thread(target=lambda n=name, s=stream: got.__setitem__(n, s.read()), daemon=True)
            for name, stream in (("stdout", self.stdout), ("stderr", self.stderr))
            if stream is not None
        ]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        for stream in (self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        return got.get("stdout"), got.get("stderr")

    def __enter__(self) -> ForkedPopen:
        return self

    def __exit__(self, *exc) -> None:
        if self.poll() is None:
            self.kill()
        self.wait()


def run_forked(argv: list[str], *, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """subprocess.run(python -m benchy ARGV, capture_output=True, text=True), forked."""
    proc = ForkedPopen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class ForkedSim(SimProcess):
    """SimProcess, started as a fork of the warm process: the same flags, truth log, `.proc`
    (signals, wait, exit status), `.stderr()` and start-up checks."""

    def _launch(self, argv: list[str]) -> None:
        self._stdout_path, self._stderr_path = _new_file("out"), _new_file("err")
        self._stderr = open(self._stderr_path, "w+")  # noqa: SIM115  (read by stderr(), closed by stop())
        # Files of the fork's own (its copies of these descriptors), apart from the one stderr()
        # reads; daemon: a simulator a failed test left running never holds up the test's exit.
        with open(self._stdout_path, "w") as out, open(self._stderr_path, "w") as err:
            self.proc = ForkedPopen(["sim", *argv], stdout=out, stderr=err, daemon=True)  # type: ignore[assignment]

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
