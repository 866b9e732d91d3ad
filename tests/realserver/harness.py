"""Start/stop ``serve.py`` as a subprocess; shared by conftest.py and measure.py (no pytest here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SERVE = HERE / "serve.py"


class ServerStartError(RuntimeError):
    pass


def missing_requirements() -> str | None:
    """None if xllamacpp, gguf and tokenizers import; else the reason they don't."""
    for mod in ("xllamacpp", "gguf", "tokenizers"):
        try:
            __import__(mod)
        except Exception as e:  # ImportError, or a wheel that does not load on this machine
            return f"{mod} not importable ({type(e).__name__}: {e}); pip install -e '.[realserver]'"
    return None


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@dataclass
class LlamaServer:
    proc: subprocess.Popen
    root_url: str  # http://127.0.0.1:PORT
    model: str  # id from /v1/models
    model_path: Path
    stderr_path: Path
    start_s: float  # spawn -> /health 200, seconds
    args: list = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    @property
    def port(self) -> int:
        return int(self.root_url.rsplit(":", 1)[1])

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM this PID (only), then SIGKILL if it does not exit within ``timeout``."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_server(
    model_path: str | os.PathLike,
    logdir: str | os.PathLike,
    *,
    parallel: int = 4,
    threads: int = 1,
    cache_ram: int | None = None,
    ctx_per_slot: int = 3072,
    extra_args: tuple[str, ...] = (),
    timeout: float = 60.0,
) -> LlamaServer:
    """Spawn serve.py on a free port; wait for 'listening on' and /health == 200.

    Raises ServerStartError (with the server's stderr tail) on failure or timeout.
    ``cache_ram``: MiB of host-RAM prompt cache, 0 = off, None = llama.cpp default (8192).
    """
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    fd, err_name = tempfile.mkstemp(prefix="llama-server-", suffix=".stderr", dir=logdir)
    stderr_path = Path(err_name)
    args = [
        sys.executable,
        str(SERVE),
        "--model",
        str(model_path),
        "--port",
        "0",
        "--parallel",
        str(parallel),
        "--threads",
        str(threads),
        "--ctx-per-slot",
        str(ctx_per_slot),
    ]
    if cache_ram is not None:
        args += ["--cache-ram", str(cache_ram)]
    args += list(extra_args)
    t0 = time.monotonic()
    with os.fdopen(fd, "wb") as err:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True)

    def fail(why: str):
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        tail = stderr_path.read_text(errors="replace").splitlines()[-40:]
        raise ServerStartError(
            f"llama.cpp server {why} (rc={proc.returncode}); cmd: {' '.join(args)}\n"
            "--- server stderr (tail) ---\n" + "\n".join(tail)
        )

    # The first stdout line, read in a thread so that the wait is bounded.
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not line or not line[0].startswith("listening on "):
        fail(
            f"did not print 'listening on ...' within {timeout:.0f}s"
            if not line
            else f"printed {line[0]!r} instead of 'listening on ...'"
        )
    root = line[0].split("listening on ", 1)[1].strip().rstrip("/")

    deadline = t0 + timeout
    status, body = 0, b""
    while True:
        if proc.poll() is not None:
            fail("exited before /health answered 200")
        try:
            status, body = http_get(root + "/health")
            if status == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            fail(f"/health not 200 within {timeout:.0f}s (last: {status} {body[:200]!r})")
        time.sleep(0.05)
    start_s = time.monotonic() - t0
    status, body = http_get(root + "/v1/models")
    if status != 200:
        fail(f"/v1/models answered {status}")
    model = json.loads(body)["data"][0]["id"]
    return LlamaServer(
        proc=proc,
        root_url=root,
        model=model,
        model_path=Path(model_path),
        stderr_path=stderr_path,
        start_s=start_s,
        args=args,
    )


def load_tiny_model():
    """Import tiny_model.py by path (works whatever pytest's import mode)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchy_realserver_tiny_model", HERE / "tiny_model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
