"""Issue 36, items 10 and 11 on real parts: a real cache-aware router (vllm-router, Rust, from
PyPI: the `router` extra) in front of two real llama.cpp servers, `--shared-prefix 0.75 -c 4
--requests 16`. The router answers /metrics for one replica: benchy must read its page naming
the replicas and add theirs up (their generated tokens equal the responses' usage, no
server_token_mismatch); requests it sent where the prefix was not are partial reuse, never
"enable the prefix cache"."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver

ROUTER = shutil.which("vllm-router", path=str(Path(sys.executable).parent)) or shutil.which("vllm-router")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def vllm_router(workers: list[str], log: Path) -> Iterator[str]:
    if ROUTER is None:
        pytest.skip("vllm-router is not installed (pip install -e '.[router]')")
    port, exporter = _free_port(), _free_port()  # its own Prometheus exporter listens apart
    cmd = [ROUTER, "--host", "127.0.0.1", "--port", str(port), "--prometheus-port", str(exporter)]
    cmd += ["--policy", "cache_aware", "--worker-urls", *workers]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm-router exited ({proc.returncode}): {log.read_text(errors='replace')[:1500]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("vllm-router did not listen within 60 s")
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_shared_prefix_through_a_cache_aware_router(llama_server_factory, tmp_path):
    a, b = llama_server_factory(), llama_server_factory()
    with vllm_router([a.root_url, b.root_url], tmp_path / "router.log") as router:
        args = ("--shared-prefix", "0.75", "-c", "4", "--requests", "16", "--pp", "512", "--tg", "16")
        proc = run_benchy("run", "--base-url", router + "/v1", "--quiet", "--format", "json", *args)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    status = results["setup"]["server_metrics"]
    assert status["router"] == "/list_workers"
    assert sorted(status["replicas"]) == sorted([a.root_url + "/metrics", b.root_url + "/metrics"])
    codes = {w["code"] for w in results["warnings"]}
    for case in results["cases"]:
        usage = sum(r["completion_tokens"] for r in case["requests"] if not r["warmup"] and r["status"] == "ok")
        assert case["server"]["counters"]["generation_tokens"] == usage  # both replicas' account: the whole
    assert "server_token_mismatch" not in codes
    shared = next(c for c in results["cases"] if c["workload"]["spec"]["fraction"])
    part = shared["workload"]["partial_reuse"]
    found = {w["code"]: w for w in results["warnings"] if w["case"] == shared["label"]}
    if part is not None and part["hit_requests"]:  # some went where the prefix was not: routing
        assert "depth_cache_miss" not in found and "cache_partial_reuse" in found
        assert "router" in found["cache_partial_reuse"]["message"]


def test_probe_cache_through_a_cache_aware_router(llama_server_factory, tmp_path):
    """probe-cache through the same router: the repeats of one prompt all go to the replica that
    holds it (cache_aware), so the probe finds the cache, and the replicas' own timings say the
    repeats prefilled about nothing while each unique prompt was prefilled whole."""
    a, b = llama_server_factory(), llama_server_factory()
    with vllm_router([a.root_url, b.root_url], tmp_path / "router.log") as router:
        args = ("--lengths", "1500", "-n", "5", "--quiet", "--format", "json")
        proc = run_benchy("probe-cache", "--base-url", router + "/v1", *args)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    (length,) = json.loads(proc.stdout)["lengths"]
    assert length["verdict"] == "detected", length["reason"]
    by_id = {r["request_id"]: r for r in length["requests"]}
    repeats = [by_id[i] for i in length["shared"]["request_ids"][1:]]
    uniques = [by_id[i] for i in length["unique"]["request_ids"]]
    assert all(r["server_timings"]["prompt_n"] <= 2 for r in repeats), [r["server_timings"] for r in repeats]
    assert all(r["server_timings"]["prompt_n"] > length["prompt_tokens"] / 2 for r in uniques)
    print(f"\n[router] probe-cache through vllm-router: {length['verdict']}, {length['speedup']:.0f}x")
