"""Small defects a newcomer met in the first hour (issue 54, item 7), each shown as a user meets
it: a wrong API path, a tokenizer named as on a hub, SIGTERM's exit code (test_interrupt.py and
test_load.py hold 143 there), and a one-case report's words."""

from __future__ import annotations

from benchy.cli.urls import with_url_hint
from tests.conftest import run_benchy_here


def test_a_wrong_api_path_says_what_the_api_root_is(start_sim):
    sim = start_sim("--decode-tps", "2000")
    root = sim.base_url.rsplit("/v1", 1)[0]
    proc = run_benchy_here("run", "--base-url", f"{root}/api/v1", "--pp", "64", "--tg", "4")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "HTTP 404" in proc.stderr and proc.stderr.count("\n") == 1
    assert f"nothing serves the API at {root}/api/v1" in proc.stderr and f"e.g. {root}/v1" in proc.stderr


def test_the_hint_never_shows_a_secret_of_the_url():
    said = with_url_hint("HTTP 404: not found", "http://user:pw@127.0.0.1:9/x/v1?key=abc")
    assert "pw" not in said and "abc" not in said and "127.0.0.1:9/v1" in said


def test_a_hub_name_as_tokenizer_says_files_only():
    proc = run_benchy_here("run", "--tokenizer", "Qwen/Qwen3-8B", "--pp", "64")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "never a hub name" in proc.stderr and "local file or model folder" in proc.stderr


def test_the_demo_never_replaces_a_real_runs_results(tmp_path):
    import json
    import shutil

    from tests.conftest import REPO_ROOT

    real = tmp_path / "mine"
    shutil.copytree(REPO_ROOT / "reports" / "dgx-spark-sim", real)  # a real run's folder
    before = (real / "results.json").read_bytes()
    assert json.loads(before)["setup"]["command_line"].startswith("benchy run")
    proc = run_benchy_here("demo", "-o", str(real))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "holds a run's results" in proc.stderr and "Starting benchy sim" not in proc.stderr
    assert (real / "results.json").read_bytes() == before


def test_the_banner_names_the_endpoint_measured(start_sim):
    sim = start_sim("--decode-tps", "2000", "--prefill-tps", "200000")
    proc = run_benchy_here("run", "--base-url", sim.base_url, "--pp", "64", "--tg", "4", "--runs", "1")
    assert proc.returncode == 0, proc.stderr
    banner = proc.stderr.splitlines()[0]
    assert banner.startswith("benchy: ") and "endpoint chat" in banner
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--pp", "64", "--tg", "4", "--runs", "1", "--endpoint", "completions"
    )
    assert proc.returncode == 0, proc.stderr
    assert "endpoint completions" in proc.stderr.splitlines()[0]
