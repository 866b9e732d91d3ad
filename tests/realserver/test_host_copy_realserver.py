"""Issue 52, item 4 on real parts: one prompt length on a real llama.cpp server with default flags
(its host-RAM prompt cache on: --cache-ram's default), through chat, Responses and Messages.

The tiny model's cache copy is a few MB, so the server answers within milliseconds: benchy must
find no fixed part and no gap it blames on a hold (no new warning on a clean run). With a real
delaying hop in front (tests/realserver/delay.py), one prompt length cannot tell that hold from
llama.cpp's own cache copy before it answers: benchy finds the time (against the proxy's own
record of what it held) and names both causes, asserting neither."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_benchy, warning_codes

pytestmark = pytest.mark.realserver

_spec = importlib.util.spec_from_file_location("benchy_realserver_delay", Path(__file__).resolve().parent / "delay.py")
delay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(delay)

DELAY_S = 0.25
ONE_LENGTH = ("--pp", "512", "--tg", "8", "-c", "1", "--runs", "4", "--warmup", "1")
FLAGS = ("--quiet", "--format", "json", "--no-server-metrics")


@pytest.fixture(scope="module")
def default_flags(llama_server_factory):
    return llama_server_factory(parallel=1)  # cache_ram None: llama.cpp's own default (on)


def one_length(base_url: str, endpoint: str) -> dict:
    proc = run_benchy("run", "--base-url", base_url, "--endpoint", endpoint, *ONE_LENGTH, *FLAGS)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_one_length_on_default_llamacpp_is_clean(default_flags, endpoint):
    results = one_length(default_flags.base_url, endpoint)
    (case,) = results["cases"]
    headers = [r["headers_s"] for r in case["requests"] if not r["warmup"] and r.get("headers_s") is not None]
    assert headers and float(np.median(headers)) < 0.05  # it answered at once: nothing held
    assert not warning_codes(results) & {"fixed_latency", "ttft_not_prefill"}
    assert case["summary"]["prefill_tps"] is not None


def test_a_hold_in_front_of_llamacpp_at_one_length_is_named_with_its_cache_copy(default_flags):
    with delay.DelayingProxy("127.0.0.1", default_flags.port, DELAY_S) as proxy:
        results = one_length(proxy.url + "/v1", "chat")
    held = float(np.median([delivered - arrived for arrived, delivered in proxy.held]))
    fixed = next(w for w in results["warnings"] if w["code"] == "fixed_latency")
    assert fixed["details"]["fixed_s"] == pytest.approx(held, abs=0.05)
    said = fixed["message"]
    assert "llama.cpp's own host-RAM prompt cache copy" in said and "a hold in front" in said and "cannot tell" in said
    gaps = [w["message"] for w in results["warnings"] if w["code"] == "ttft_not_prefill"]
    assert all("takes the request" not in g for g in gaps)
