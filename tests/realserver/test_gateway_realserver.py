"""Issue 36, item 8 on real parts: a real fixed delay in front of a real llama.cpp server. benchy
must separate it from prefill (warning fixed_latency, prefill t/s from TTFT withheld) with the
engine's rate beside llama.cpp's own; without the delay, the same sweep stays clean of it.

The delay is a real API gateway (nginx with a pre-call guardrail: auth_request to a check that
takes 250 ms, the echo module's echo_sleep, then the stream passed on unbuffered), netem in a
network namespace the test makes where the kernel has sch_netem, and a delaying TCP proxy
(tests/realserver/delay.py): each a real hop on the wire. One llama.cpp server and its direct
sweep (the control) serve them all."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO_ROOT, run_benchy

pytestmark = pytest.mark.realserver

_spec = importlib.util.spec_from_file_location("benchy_realserver_delay", Path(__file__).resolve().parent / "delay.py")
delay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(delay)
_nginx_spec = importlib.util.spec_from_file_location(
    "benchy_realserver_nginx", Path(__file__).resolve().parent / "nginx.py"
)
nginx = importlib.util.module_from_spec(_nginx_spec)
sys.modules[_nginx_spec.name] = nginx
_nginx_spec.loader.exec_module(nginx)

DELAY_S = 0.25
SWEEP = ("--pp", "128", "512", "2048", "--tg", "4", "-c", "1", "--runs", "4", "--warmup", "1")
FLAGS = ("--quiet", "--format", "json", "--no-server-metrics")


def sweep(base_url: str, *prefix: str) -> dict:
    """The sweep through `base_url`; `prefix` runs the child inside a namespace."""
    if prefix:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        cmd = [*prefix, sys.executable, "-m", "benchy", "run", "--base-url", base_url, *SWEEP, *FLAGS]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT, env=env)
    else:
        proc = run_benchy("run", "--base-url", base_url, *SWEEP, *FLAGS)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: warnings under a strict exit policy
    return json.loads(proc.stdout)


def own_prefill_tps(results: dict) -> float:
    """llama.cpp's own prefill rate: its timings' prompt_n over prompt_ms, of the longest prompt."""
    longest = max(results["cases"], key=lambda c: c["pp"])
    rates = [
        r["server_timings"]["prompt_n"] / r["server_timings"]["prompt_ms"] * 1000
        for r in longest["requests"]
        if not r["warmup"] and r.get("server_timings") and r["server_timings"].get("prompt_ms")
    ]
    return float(np.median(rates))


def assert_separated(results: dict, held_s: float) -> None:
    w = next(w for w in results["warnings"] if w["code"] == "fixed_latency")
    d = w["details"]
    assert d["fixed_s"] == pytest.approx(held_s, abs=0.06)  # what the path held, to one decode step and HTTP
    assert d["engine_prefill_tps"] == pytest.approx(own_prefill_tps(results), rel=0.5)
    for case in results["cases"]:
        assert case["summary"]["prefill_tps"] is None and case["unavailable_codes"]["prefill_tps"] == "fixed_latency"
        assert case["summary"]["ttft_s"] is not None


@pytest.fixture(scope="module")
def engine(llama_server_factory):
    """One slot, no RAM cache: every prompt prefilled in full, one at a time."""
    return llama_server_factory(parallel=1, cache_ram=0)


@pytest.fixture(scope="module")
def direct(engine) -> dict:
    """The control: the same sweep straight to llama.cpp, clean of any fixed part."""
    control = sweep(engine.base_url)
    assert "fixed_latency" not in {w["code"] for w in control["warnings"]}
    assert all(c["summary"]["prefill_tps"] is not None for c in control["cases"])
    return control


def test_a_delaying_proxy_in_front_of_llamacpp_is_a_fixed_part(engine, direct):
    with delay.DelayingProxy("127.0.0.1", engine.port, DELAY_S) as proxy:
        results = sweep(proxy.url + "/v1")
    held = float(np.median([delivered - arrived for arrived, delivered in proxy.held]))
    assert_separated(results, held)


# A pre-call guardrail as API gateways run one: every call waits for a check (here nginx's own
# echo_sleep in an internal location) before it is passed on; SSE goes through unbuffered.
GUARDRAIL = f"location = /_guardrail {{ internal; echo_sleep {DELAY_S}; echo allowed; }}"
GATEWAY = "auth_request /_guardrail; proxy_buffering off;"


def guardrail_held_s(access_log: Path) -> float:
    """What nginx held each generation before its upstream saw it, by nginx's own clock: the
    request's time less the upstream's (the median over the POSTs; ms resolution)."""
    held = []
    for line in access_log.read_text().splitlines():
        method, uri, status, request_s, upstream_s = line.split()[:5]
        if method == "POST" and uri.endswith("/completions") and status == "200" and upstream_s != "-":
            held.append(float(request_s) - float(upstream_s))
    assert held, access_log.read_text()[-2000:]
    return float(np.median(held))


def test_an_nginx_gateway_with_a_guardrail_in_front_of_llamacpp_is_a_fixed_part(engine, direct, tmp_path):
    why = nginx.missing_echo_module()
    if why:
        pytest.skip(why)
    module = f"load_module {nginx.echo_module()};"
    with nginx.nginx_proxy([engine.root_url], GATEWAY, main=module, server=GUARDRAIL, logs=tmp_path) as url:
        results = sweep(url + "/v1")
    (tmp_path / "results.json").write_text(json.dumps(results))  # kept for a look after a failure
    assert_separated(results, guardrail_held_s(tmp_path / "access.log"))


def test_netem_in_a_namespace_in_front_of_llamacpp_is_a_fixed_part(llama_server_factory):
    why = delay.netem_unavailable()
    if why:
        pytest.skip(why)
    with delay.netem_path(DELAY_S) as (ns, here):
        server = llama_server_factory(parallel=1, cache_ram=0, extra_args=("--host", here))
        results = sweep(server.base_url, "ip", "netns", "exec", ns)
    assert_separated(results, DELAY_S)
