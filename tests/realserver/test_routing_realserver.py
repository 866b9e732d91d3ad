"""Two real llama.cpp servers (xllamacpp, tiny model) behind nginx, each with its own cache: the
router a deployment puts in front of replicas, without cache affinity. Multi-turn and
probe-cache through it must say "partial reuse" with the hit fraction and the pattern, never
"the cache is off" (issue 24)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver

REPO_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("benchy_realserver_nginx", Path(__file__).resolve().parent / "nginx.py")
nginx = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nginx)


def benchy(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m benchy ARGS` of this checkout (tests/conftest.py's one way to start a child benchy)."""
    return run_benchy(*args, timeout=timeout)


def test_multi_turn_through_round_robin_is_partial_reuse(llama_server_factory):
    """One conversation over two round-robin replicas: turn k lands where turn k − 2 was
    served, so it reuses that much of its history, never all of it."""
    a, b = llama_server_factory(), llama_server_factory()
    with nginx.nginx_proxy([a.root_url, b.root_url]) as proxy:
        args = ["--turns", "5", "-c", "1", "--pp", "64", "--tg", "12", "--warmup", "0", "--no-server-metrics"]
        proc = benchy("run", "--base-url", proxy + "/v1", "--quiet", "--format", "json", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    [case] = results["cases"]
    turns = sorted((r for r in case["requests"] if not r["warmup"]), key=lambda r: r["turn"])
    assert [r["turn"] for r in turns] == [1, 2, 3, 4, 5] and all(r["status"] == "ok" for r in turns)
    for r in turns[2:]:  # the replica held the conversation as it was two turns before
        assert r["cached_tokens"] < r["expected_cached_tokens"]
        assert r["cached_tokens"] >= turns[r["turn"] - 3]["prompt_tokens"] - 1
    part = case["workload"]["partial_reuse"]
    assert part is not None and part["partial_requests"] >= 3 and part["hit_requests"] == 0
    assert part["turn_lag"] == 2 and part["replicas"] == 2
    codes = {w["code"] for w in results["warnings"]}
    assert "cache_partial_reuse" in codes and "cache_not_reused" not in codes


def test_probe_cache_through_a_weighted_round_robin_gives_partial_hits(llama_server_factory):
    """Two one-slot servers without a host-RAM cache (each holds its last prompt only), the
    first listed twice: shared-prefix repeats and unique prompts fall on them in a 3-cycle,
    so some repeats meet the shared prompt still in the slot and the rest do not."""
    a, b = (llama_server_factory(parallel=1, cache_ram=0) for _ in range(2))
    with nginx.nginx_proxy([a.root_url, a.root_url, b.root_url]) as proxy:
        proc = benchy(
            "probe-cache",
            "--base-url",
            proxy + "/v1",
            "--lengths",
            "512",
            "-n",
            "8",
            "--tg",
            "2",
            "--format",
            "json",
            "-q",
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [entry] = json.loads(proc.stdout)["lengths"]
    cached = entry["shared"]["cached_tokens"][1:]
    prompt = entry["prompt_tokens"]
    served = [c >= prompt / 2 for c in cached]
    assert 0 < sum(served) < len(served), cached
    assert entry["verdict"] == "partial_hits", entry["reason"]
    assert entry["hit_fraction"] == pytest.approx(sum(served) / len(served))
    assert entry["gain_on_hits"] > 1.2
