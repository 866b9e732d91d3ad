"""Input benchy can judge before it connects (issue 54, item 7): a prompt shorter than benchy's
own share of it (--pp 1) and an output folder it cannot write are refused first, in one line
with a non-zero exit, and the server never sees a request (not even a calibration's)."""

from __future__ import annotations

import socket

import pytest

from benchy.cli import main
from benchy.load import prompt_floor
from benchy.load.prompts import PromptFactory
from tests.conftest import SimSince, shared_sim

instant_sim = shared_sim("--instant")


def benchy(capsys, *argv: str) -> tuple[int, str]:
    """The real entry point in-process: (exit code, the one stderr line)."""
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benchy: error: "), lines
    return done.value.code, lines[0]


def _dead_url() -> tuple[socket.socket, str]:
    """A port bound but not listening: any connection to it is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.mark.parametrize("command", ["run", "capacity"])
def test_a_too_short_prompt_is_refused_before_connecting(capsys, command):
    """No server listens: had benchy connected first, it would say it cannot reach one."""
    sock, url = _dead_url()
    lengths = ("--pp", "1", "--slo", "ttft=1s") if command == "capacity" else ("--pp", "1", "512")
    with sock:
        code, line = benchy(capsys, command, "--base-url", url, *lengths, "--tg", "4")
    assert code == 2 and "--pp 1 is too short" in line and "at least 9 tokens" in line
    assert "reach" not in line


def test_a_too_short_prompt_sends_no_request(capsys, instant_sim):
    sim = SimSince(instant_sim)
    code, line = benchy(capsys, "run", "--base-url", sim.base_url, "--pp", "4", "--tg", "4")
    assert code == 2 and "--pp 4 is too short" in line
    assert sim.truth() == []


def test_the_floor_is_the_shortest_prompt_the_server_is_sent(capsys, instant_sim):
    """On the completions API (no chat template) the floor is exact: one token below it is
    refused up front, the floor itself is measured, and the server counted that many."""
    sim = SimSince(instant_sim)
    floor = prompt_floor.shortest(nonce=True)
    args = ("run", "--base-url", sim.base_url, "--endpoint", "completions", "--tg", "4", "--runs", "1", "-q")
    code, line = benchy(capsys, *args, "--pp", str(floor - 1))
    assert code == 2 and f"at least {floor} tokens" in line and sim.truth() == []
    with pytest.raises(SystemExit) as done:
        main([*args, "--pp", str(floor), "--warmup", "0"])
    assert done.value.code == 0, capsys.readouterr().err
    measured = [t for t in sim.truth() if t["request_id"]]
    assert measured and {t["prompt_tokens"] for t in measured} == {floor}


def test_no_nonce_lowers_the_floor_to_one_token():
    assert prompt_floor.shortest(nonce=False) == 1
    prompt_floor.check([], nonce=False)


def test_the_floor_counts_the_nonce_prompts_really_start_with():
    """NONCE_TOKENS is the nonce PromptFactory writes: one word (one token) each."""
    nonce = PromptFactory().next_nonce()
    assert len(nonce.split()) == prompt_floor.NONCE_TOKENS


def test_an_output_folder_that_cannot_be_written_sends_no_request(capsys, instant_sim, tmp_path):
    sim = SimSince(instant_sim)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, line = benchy(capsys, "run", "--base-url", sim.base_url, "--pp", "64", "-o", str(blocker / "run"))
    assert code == 1 and "cannot write" in line
    assert sim.truth() == []


def test_an_unwritable_output_folder_is_refused_before_connecting(capsys, tmp_path):
    sock, url = _dead_url()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with sock:
        code, line = benchy(capsys, "run", "--base-url", url, "--pp", "64", "-o", str(blocker / "run"))
    assert code == 1 and "cannot write" in line and "reach" not in line
