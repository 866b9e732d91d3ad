"""Bad input: one line on stderr, a non-zero exit, never a traceback."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from urllib.request import urlopen

import pytest

from benchy.cli import main
from tests.conftest import REPO_ROOT, SimSince, shared_sim, sim_env


def benchy(capsys, *argv: str) -> tuple[int, str]:
    """Runs the real entry point in-process; returns (exit code, the one stderr line)."""
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchy: error: "), err
    return done.value.code, lines[0]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run", "--nope"], "No such option"),
        (["run", "--runs", "abc"], "--runs"),
        (["run", "--runs", "0"], "--runs"),
        (["run", "-c", "0"], "--concurrency"),
        (["run", "--endpoint", "nope"], "--endpoint"),
        (["run", "--base-url", "localhost:8000/v1"], "http://"),
        (["run", "--base-url", "http://localhost:notaport/v1"], "port"),
        (["run", "--base-url", "http:///v1"], "no host"),
        (["run", "--scenario", "no-such-scenario"], "unknown scenario"),
        (["run", "--hardware", "no-such-gpu"], "no-such-gpu"),
        (["run", "--hardware", "gb10", "--model-profile", "no-such-model"], "no-such-model"),
        (["run", "--timeout", "soon"], "--timeout"),
        (["run", "--timeout", "0"], "--timeout"),
        (["run", "--timeout", "-1"], "--timeout"),
        (["run", "--stall-timeout", "0"], "--stall-timeout"),
        (["probe-cache", "--timeout", "0"], "--timeout"),
        (["probe-cache", "--base-url", "localhost:8000/v1"], "http://"),
        (["probe-cache", "--transport", "h3"], "--transport"),
        (["probe-cache", "--stall-timeout", "soon"], "--stall-timeout"),
        (["probe-cache", "--capacity", "--lengths", "512"], "replaces the per-length probe"),
        (["probe-cache", "--capacity", "--capacity-prefix-tokens", "4096", "--capacity-max-tokens", "1024"], "exceed"),
        (["probe-cache", "--capacity-prefix-tokens", "8"], "--capacity-prefix-tokens"),
        (["sim", "--replicas", "0"], "--replicas"),
        (["sim", "--route", "hash"], "--route"),
        (["sim", "--cache-match", "suffix"], "--cache-match"),
        (["sim", "--fault", "meteor:0.5"], "meteor"),
        (["sim", "--preset", "no-such-preset"], "no-such-preset"),
        (["demo", "--preset", "no-such-preset"], "no-such-preset"),
        (["run", "--groups", "2"], "--groups needs --shared-prefix"),
        (["run", "--turns", "2", "--trace", "sample"], "cannot be combined"),
        (["run", "--turns", "2", "--endpoint", "completions"], "--turns needs --endpoint chat"),
        (["run", "--trace", "nope.jsonl"], "trace file not found"),
        (["run", "--turns", "2", "--think-time", "soon"], "not a duration"),
        (["run", "--trace", "sample", "--pp", "100"], "drop --pp"),
        (["run", "--shared-prefix", "1.5"], "[0, 1)"),
    ],
)
def test_bad_flags_are_usage_errors(capsys, argv, words):
    code, line = benchy(capsys, *argv)
    assert code == 2 and words in line


def test_a_bad_base_url_is_shown_without_its_secrets(capsys):
    code, line = benchy(capsys, "run", "--base-url", "http://me:pw@localhost:notaport/v1?api-key=SECRET-7")
    assert code == 2 and "port" in line and "api-key=***" in line
    assert "SECRET-7" not in line and "pw" not in line


SCENARIOS = {
    "syntax.toml": (b'name = "x"\npp = [512,\ntg = \n', ":", "line 3"),
    "unknown_key.toml": (b'name = "x"\npp = [512]\ntg = 128\nrunz = 3\n', ":4:", "runz"),
    "bad_value.toml": (b'pp = 512\ntg = [1, "two"]\n', ":2:", "tg must be"),
    "missing.toml": (b"tg = 32\n", ":", "missing 'pp'"),
    "binary.toml": (b"pp = 512\ntg = 1\n\xff\xfe", ":", "not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_invalid_scenario_names_file_and_line(capsys, tmp_path, name):
    content, where, words = SCENARIOS[name]
    path = tmp_path / name
    path.write_bytes(content)
    code, line = benchy(capsys, "run", "--scenario", str(path))
    assert code == 2 and f"{path}{where}" in line and words in line


@pytest.mark.parametrize("name", ["dir.toml", "scenarios"])
def test_scenario_path_that_is_a_folder(capsys, tmp_path, name):
    (tmp_path / name).mkdir()
    code, line = benchy(capsys, "run", "--scenario", str(tmp_path / name))
    assert code == 2 and name in line and "is a folder" in line and "not found" not in line


@pytest.mark.parametrize("key, value", [("pp", "-3"), ("tg", "0"), ("concurrency", "[2, 0]"), ("depth", "-1")])
def test_a_bad_scenario_value_is_blamed_on_its_toml_key_not_a_flag(capsys, tmp_path, key, value):
    path = tmp_path / "bad.toml"
    lines = {"pp": "512", "tg": "32", key: value}
    path.write_text("".join(f"{k} = {v}\n" for k, v in lines.items()))
    code, line = benchy(capsys, "run", "--scenario", str(path))
    assert code == 2 and f"{key} must be" in line and f"--{key}" not in line, line


# One instant simulator for the tests that need a server to answer (each reads its own truth).
instant_sim = shared_sim("--instant")


def test_https_against_a_plain_http_server_suggests_http(capsys, instant_sim):
    sim = SimSince(instant_sim)
    tls_url = sim.base_url.replace("http://", "https://", 1)
    code, line = benchy(capsys, "run", "--base-url", tls_url, "--pp", "64", "--tg", "4")
    assert code == 1 and f"try --base-url {sim.base_url})" in line
    assert not [t for t in sim.truth() if t["request_id"]]


@pytest.mark.parametrize(
    "command, option",
    [("run", "--endpoint"), ("probe-cache", "--endpoint"), ("demo", "--runs"), ("demo", "--output")],
)
def test_every_option_has_help_text(command, option):
    from benchy.cli import cli

    [param] = [p for p in cli.commands[command].params if option in p.opts]
    assert param.help and len(param.help) > 10


def test_run_help_shows_the_lengths_a_bare_run_measures(capsys):
    """A bare `benchy run` measures pp512 tg128 at c1, 5 runs: --help says so."""
    from benchy.workloads.scenario import select_cases
    from benchy.workloads.selection import CaseSelection

    [bare] = select_cases(CaseSelection())  # what a bare run plans
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    shown = (("--pp", bare.pp), ("--tg", bare.tg), ("--concurrency", bare.concurrency), ("--runs", 5))
    for flag, default in shown:
        after = text.split(f"{flag} INTEGER", 1)[1][:200]
        assert f"[default: {default}" in after, (flag, after)


def test_demo_help_lists_the_presets(capsys):
    from benchy.sim.config import PRESETS

    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = "".join(capsys.readouterr().out.split())
    assert all(name.replace(" ", "") in text for name in PRESETS)


def test_results_of_another_schema_and_broken_results(capsys, tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "benchy/results/0", "cases": []}))
    code, line = benchy(capsys, "report", str(other))
    assert code == 1 and "benchy/results/0" in line and "benchy/results/1" in line
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "benchy/results/1", "cases": [')
    code, line = benchy(capsys, "report", str(broken))
    assert code == 1 and "not JSON" in line
    code, line = benchy(capsys, "report", str(tmp_path / "absent.json"))
    assert code == 1 and "absent.json" in line


def test_model_not_served_lists_the_served_ones(capsys, instant_sim):
    sim = SimSince(instant_sim)
    code, line = benchy(capsys, "run", "--base-url", sim.base_url, "--model", "gpt-17", "--pp", "64")
    assert code == 1 and "'gpt-17' is not served" in line and "benchy-sim" in line


def test_server_not_listening(capsys):
    with socket.socket() as sock:  # bound, not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        code, line = benchy(capsys, "run", "--base-url", f"http://127.0.0.1:{port}/v1", "--pp", "64")
    assert code == 1 and "cannot reach the server" in line


def test_output_folder_that_cannot_be_written(capsys, instant_sim, tmp_path):
    sim = SimSince(instant_sim)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, line = benchy(
        capsys, "run", "--base-url", sim.base_url, "--pp", "64", "--tg", "4", "--runs", "1", "-o", str(blocker / "run")
    )
    assert code == 1 and "cannot write" in line


def test_a_real_process_prints_one_line_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("pp = \n")
    proc = subprocess.run(
        [sys.executable, "-m", "benchy", "run", "--scenario", str(bad)],
        capture_output=True,
        text=True,
        env=sim_env(),
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr and str(bad) in proc.stderr


def test_a_prompt_longer_than_the_servers_context_is_refused_before_sending(capsys, instant_sim):
    """The server said how long its context is: a prompt that cannot fit is a usage error, not
    a run of HTTP 400s (and no request, calibration included, is sent for it)."""
    sim = SimSince(instant_sim)
    facts = json.loads(urlopen(f"{sim.base_url}/models", timeout=10).read())  # what benchy reads too
    context = facts["data"][0]["max_model_len"]
    code, line = benchy(capsys, "run", "--base-url", sim.base_url, "--pp", "64", str(context + 10), "--tg", "4")
    assert code == 2 and f"{context + 10:,}-token prompt" in line and f"context is {context:,} tokens" in line
    assert not [t for t in sim.truth() if t["request_id"]]


def test_a_trace_with_prompts_longer_than_the_context_is_refused_before_sending(capsys, start_sim):
    """The sample trace's longest prompts (4 of 40, up to 4,901 tokens) against a 4,096-token
    context: refused as a sweep's would be, in words a trace run can act on (it takes no --pp),
    and nothing is sent (not 4 HTTP 400s and exit 0)."""
    from benchy.workloads import trace

    sample = trace.load("sample")
    longest, over = max(r.input_tokens for r in sample), sum(r.input_tokens >= 4096 for r in sample)
    sim = start_sim("--context-length", "4096", "--instant")
    code, line = benchy(capsys, "run", "--base-url", sim.base_url, "--trace", "sample", "--speed", "2", "-q")
    assert code == 2 and f"{over} of its {len(sample)} requests" in line and f"{longest:,} tokens" in line
    assert "4,096 tokens" in line and "--pp" not in line
    assert sim.truth() == []


@pytest.mark.parametrize(
    "kind, hint", [("trace", "Replay a trace whose lengths fit"), ("sweep", "Lower --pp/--depth/--tg")]
)
def test_refused_requests_are_hinted_with_flags_the_case_takes(kind, hint):
    """HTTP 400s in a trace replay: its lengths are the trace's, so the hint names no --pp."""
    from benchy.checks.outputs import request_errors
    from benchy.results.types import CaseResult, RunResult

    case = CaseResult(label="x", pp=512, tg=32, kind=kind, errors={"http_400": 4}, n_ok=36, n_failed=4)
    [warning] = request_errors(case, RunResult(cases=[case]))
    assert hint in warning.hint and (kind == "sweep" or "--pp" not in warning.hint)


def test_a_capacity_prefix_longer_than_the_context_is_refused_before_sending(capsys, start_sim):
    """probe-cache --capacity with 8,000-token prefixes on a 4,096-token server: a usage error
    naming the longest prefix that fits, not exit 0 with "Prefixes of n/a tokens … not found"."""
    sim = start_sim("--context-length", "4096", "--instant")
    code, line = benchy(
        capsys, "probe-cache", "--base-url", sim.base_url, "--capacity", "--capacity-prefix-tokens", "8000", "-q"
    )
    assert code == 2 and "--capacity-prefix-tokens 8,000" in line and "4,096 tokens" in line
    limit = int(re.search(r"pass --capacity-prefix-tokens ([\d,]+) or less", line).group(1).replace(",", ""))
    assert 3000 < limit < 4096
    assert sim.truth() == []


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_https_to_a_plain_http_server_that_waits_for_a_request_line_is_named_at_once(capsys, transport):
    """llama-server on plain HTTP reads a TLS ClientHello as the start of a request line and
    waits for its end: the handshake got no answer for asyncio's 60 s (aiohttp: until --timeout).
    The port answers a plain request, so benchy says so, and how to fix the URL, well inside
    --timeout (the old wait ended as "no connection within 20 s", or "exceeded 20 s")."""
    from tests.netservers import Scripted

    async def answer(seen, writer) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
        return False

    with Scripted(answer) as plain:
        https = plain.url.replace("http://", "https://") + "/v1"
        code, line = benchy(
            capsys, "run", "--base-url", https, "--pp", "64", "--timeout", "20", "--transport", transport
        )
        assert plain.log.connections  # the handshake went to it
    assert code == 1 and "plain HTTP" in line and f"try --base-url {plain.url}/v1" in line
