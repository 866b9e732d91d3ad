"""Fixtures that run a real llama.cpp server (xllamacpp) on a tiny random model.

``llama_server`` (session scope) builds the model once (cached under pytest's cache dir, or
$BENCHY_REALSERVER_CACHE), starts ``serve.py`` in a subprocess on a free port (4 slots x 3072
tokens, 1 thread), waits for ``/health`` and yields a ``harness.LlamaServer``:
``.base_url`` (``http://127.0.0.1:PORT/v1``), ``.root_url`` (no /v1: /health, /tokenize,
/metrics, /slots), ``.model`` (id from /v1/models), ``.pid``, ``.stderr_tail()``. The server is
stopped by its PID at session end, also when tests fail. Without xllamacpp (or gguf /
tokenizers) every test using these fixtures is skipped with the reason.

``llama_server_factory`` (session scope) starts more servers with other options, e.g.
``llama_server_factory(parallel=1, cache_ram=0)``; all are stopped at session end.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "benchy_realserver_harness", Path(__file__).resolve().parent / "harness.py"
)
harness = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = harness  # dataclasses look their module up in sys.modules
_spec.loader.exec_module(harness)

START_TIMEOUT_S = float(os.environ.get("BENCHY_REALSERVER_START_TIMEOUT", "60"))


@pytest.fixture(scope="session")
def tiny_model_path(request, tmp_path_factory) -> Path:
    why = harness.missing_requirements()
    if why:
        pytest.skip(why)
    env_dir = os.environ.get("BENCHY_REALSERVER_CACHE")
    if env_dir:
        cache_dir = Path(env_dir)
    elif getattr(request.config, "cache", None) is not None:
        cache_dir = Path(request.config.cache.mkdir("benchy-realserver"))
    else:
        cache_dir = tmp_path_factory.mktemp("benchy-realserver")
    return harness.load_tiny_model().build(cache_dir / "tiny-llama.gguf")


@pytest.fixture(scope="session")
def llama_server_factory(tiny_model_path, tmp_path_factory):
    servers = []
    logdir = tmp_path_factory.mktemp("llama-server-logs")

    def factory(**kwargs):
        kwargs.setdefault("timeout", START_TIMEOUT_S)
        try:
            srv = harness.start_server(tiny_model_path, logdir, **kwargs)
        except harness.ServerStartError as e:
            pytest.fail(str(e), pytrace=False)
        servers.append(srv)
        return srv

    try:
        yield factory
    finally:
        for srv in servers:
            srv.stop()


@pytest.fixture(scope="session")
def llama_server(llama_server_factory):
    """The shared server: 4 slots x 3072 context, 1 thread, default caches (RAM cache on)."""
    return llama_server_factory()
