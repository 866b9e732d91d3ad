"""A newcomer's first commands meet: `benchy sim` listens where `benchy run` looks by default,
says so when that port is taken, and a base URL without /v1 gets the /v1 form as a hint."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest

from benchy.sim.config import SimConfig
from benchy.sim.process import SimProcess
from tests.conftest import run_benchy as benchy
from tests.conftest import sim_env


def run_default_base_url() -> str:
    from benchy.cli.run import run

    [option] = [p for p in run.params if p.name == "base_url"]
    return option.default


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_sim_listens_where_run_looks_by_default(tmp_path):
    default = urlsplit(run_default_base_url())
    assert (default.hostname, default.port) == (SimConfig().host, SimConfig().port)
    if not port_is_free(default.port):
        pytest.skip(f"port {default.port} is in use on this machine")
    truth = tmp_path / "truth.jsonl"
    # SimProcess passes --port 0; a later --port wins, so this is the plain default again
    sim = SimProcess("--port", str(default.port), truth_log=truth)
    with sim:
        assert sim.url == f"http://127.0.0.1:{default.port}"
        env = sim_env()
        env.pop("OPENAI_BASE_URL", None)
        proc = benchy("run", "--pp", "64", "--tg", "4", "--runs", "1", "--warmup", "0", "-q", env=env)
        assert proc.returncode == 0, proc.stderr
        served = [t for t in sim.truth(expect=3) if t["request_id"]]
        assert len(served) == 1 and served[0]["completion_tokens"] == 4
    assert "benchy run --base-url http://127.0.0.1" in sim.stderr()  # it says how to reach it


def test_a_taken_port_is_one_line_with_the_way_out():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = benchy("sim", "--port", str(port))
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert f"127.0.0.1:{port}" in line and "--port 0" in line


def test_a_base_url_without_v1_gets_the_v1_form_as_a_hint(start_sim):
    sim = start_sim()
    proc = benchy("run", "--base-url", sim.url, "--pp", "64", "--tg", "4", "-q")
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert "HTTP 404" in line and f"try --base-url {sim.url}/v1" in line
    assert not [t for t in sim.truth() if t["request_id"]]  # nothing was measured against the wrong URL


def test_the_v1_hint_goes_in_the_path_and_shows_no_secret(start_sim):
    """An Azure-style base URL carries its key in the query: the suggested URL puts /v1 before the
    query and masks the key, as results and logs do."""
    sim = start_sim()
    proc = benchy("run", "--base-url", f"{sim.url}?api-version=1&api-key=SECRET-42", "--pp", "64", "--tg", "4", "-q")
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert f"try --base-url {sim.url}/v1?api-version=1&api-key=***)" in line, line
    assert "SECRET-42" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("pasted", ["/chat/completions", "/completions/"])
def test_a_pasted_endpoint_url_is_cut_back_to_the_api_root(start_sim, pasted):
    """The most common paste, a whole endpoint URL, measures against the API root with a note,
    rather than 404ing on …/v1/chat/completions/chat/completions."""
    sim = start_sim("--instant")
    proc = benchy("run", "--base-url", f"{sim.base_url}{pasted}", "--pp", "64", "--tg", "4", "--runs", "1", "-q")
    assert proc.returncode == 0, proc.stderr
    assert f"using {sim.base_url} (dropped {pasted.rstrip('/')})" in proc.stderr
    served = [t for t in sim.truth() if t["request_id"]]
    assert served and all(t["completion_tokens"] == 4 for t in served)
