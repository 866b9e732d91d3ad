"""--extra-body: merged into every request body on every endpoint (the simulator's truth log
shows what arrived), recorded in results.json with credential-named values as ***, never
written anywhere with its secret; bad input is one line and exit 2."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from benchy.cli import main
from benchy.client.extra_body import is_secret, redacted
from benchy.client.redact import redacted_command_line
from tests.conftest import SimSince, run_benchy_here, shared_sim

SECRET = "sk-extra-SECRET-4711"
sim_fixture = shared_sim("--prefill-tps", "50000", "--decode-tps", "2000")


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


def one_line_error(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchy: error: ") and "Traceback" not in err, err
    return done.value.code, lines[0]


@pytest.mark.parametrize(
    "value, words",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"max_tokens": 5}', "'max_tokens', which benchy sets itself: use --tg"),
        ('{"stream": false}', "'stream'"),
        ('{"messages": []}', "'messages'"),
        ('{"stop": ["x"]}', "use --stop"),
        ("@/no/such/file.json", "cannot read it"),
    ],
)
def test_bad_extra_body_is_one_line_and_exit_2(capsys, value, words):
    code, line = one_line_error(capsys, "run", "--extra-body", value)
    assert code == 2 and words in line


def test_credential_names_are_told_from_token_counts():
    for name in ("api_key", "X-Api-Key", "accessToken", "password", "auth", "vendor_secret", "token"):
        assert is_secret(name), name
    for name in ("max_new_tokens", "skip_special_tokens", "top_k", "temperature", "chat_template_kwargs"):
        assert not is_secret(name), name
    assert redacted({"a": [{"apiKey": "x"}], "n": 1}) == {"a": [{"apiKey": "***"}], "n": 1}


def test_the_saved_command_line_shows_extra_body_without_its_secrets():
    line = redacted_command_line(["run", "--extra-body", json.dumps({"top_k": 7, "auth": {"user": "u", "pw": SECRET}})])
    assert SECRET not in line and '"top_k":7' in line and '"auth":"***"' in line
    assert redacted_command_line(["--extra-body=@/etc/extra.json"]) == "benchy --extra-body=@/etc/extra.json"
    assert SECRET not in redacted_command_line(["--extra-body", "{broken " + SECRET])


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_extra_body_reaches_the_server_on_every_endpoint_and_its_secret_nowhere(sim, tmp_path, api):
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    # reasoning_effort is a chat field; the Responses API takes reasoning.effort; the sim logs both.
    effort = {"reasoning": {"effort": "high"}} if api == "responses" else {"reasoning_effort": "high"}
    body = {**effort, "top_k": 7, "vendor": {"api_key": SECRET}}
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--endpoint", api, "--pp", "64", "--tg", "8", "--runs", "2",
        "-o", str(out), "--extra-body", json.dumps(body),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    ids = {r["request_id"] for c in results["cases"] for r in c["requests"]}
    traces = [t for t in sim.truth() if t["request_id"] in ids]
    assert len(traces) == len(ids) == 3  # the warmup and two measured, each with the extra fields
    assert {t["reasoning_effort"] for t in traces} == {"high"}
    assert results["setup"]["extra_body"] == {**effort, "top_k": 7, "vendor": {"api_key": "***"}}
    written = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    assert written and not any(SECRET.encode() in data for data in written)
    assert SECRET not in proc.stdout + proc.stderr


def test_extra_body_from_a_file_is_merged_and_named_by_its_path(sim, tmp_path):
    path = tmp_path / "extra.json"
    path.write_text(json.dumps({"reasoning_effort": "low", "token": SECRET}))
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--pp", "64", "--tg", "8", "--runs", "1", "--warmup", "0",
        "-q", "-o", str(out), "--extra-body", f"@{path}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["setup"]["extra_body"] == {"reasoning_effort": "low", "token": "***"}
    assert [t["reasoning_effort"] for t in sim.truth()][-1] == "low"


def test_a_scenario_file_takes_endpoint_and_extra_body(sim, tmp_path):
    path = tmp_path / "agents.toml"
    path.write_text('pp = 64\ntg = 8\nruns = 1\nendpoint = "messages"\n\n[extra_body]\nreasoning_effort = "medium"\n')
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--scenario", str(path), "--warmup", "0", "-q", "-o", str(out),
        "--extra-body", '{"top_k": 3}',
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    [rid] = [r["request_id"] for c in results["cases"] for r in c["requests"]]
    [trace] = [t for t in sim.truth() if t["request_id"] == rid]
    assert trace["endpoint"] == "messages" and trace["reasoning_effort"] == "medium"


def test_a_scenario_extra_body_that_sets_what_benchy_owns_names_the_scenario(capsys, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("pp = 64\ntg = 8\n\n[extra_body]\nmax_tokens = 5\n")
    code, line = one_line_error(capsys, "run", "--scenario", str(path))
    assert code == 2 and "scenario bad: extra_body" in line and "'max_tokens'" in line
