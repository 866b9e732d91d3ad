"""probe-cache --capacity and --cache-reset against a real llama.cpp server (xllamacpp, tiny
model): one slot without a host-RAM cache holds one prompt for reuse, not two, beside what
/props states; and llama-server without --slot-save-path has no reset, which benchy says."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver

REPO_ROOT = Path(__file__).resolve().parents[2]


def benchy(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m benchy ARGS` of this checkout (tests/conftest.py's one way to start a child benchy)."""
    return run_benchy(*args, timeout=timeout)


def test_capacity_of_one_slot_without_ram_cache(llama_server_factory):
    srv = llama_server_factory(parallel=1, cache_ram=0)
    proc = benchy(
        "probe-cache", "--base-url", srv.base_url, "--capacity", "--capacity-prefix-tokens", "256",
        "--capacity-max-tokens", "2048", "--tg", "2", "--cache-reset", "--format", "json", "-q",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    probe = json.loads(proc.stdout)
    cap = probe["capacity"]
    assert (cap["fits_prefixes"], cap["falls_prefixes"]) == (1, 2), cap["reason"]
    assert cap["points"][0]["evidence"] == "cached_tokens"
    assert cap["stated"]["tokens"] == 3072 and "total_slots 1" in cap["stated"]["source"]
    # llama-server answers the slot erase only with --slot-save-path: asked once, said plainly.
    reset = probe["setup"]["cache_reset"]
    assert reset["calls"] == 1 and not reset["last"]["ok"] and "--slot-save-path" in reset["last"]["message"]
