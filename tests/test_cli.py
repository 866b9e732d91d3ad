"""The command line's structure: one set of client options on every command that talks to a
server, handed to the command as one ClientSettings."""

from __future__ import annotations

import pytest

from benchy import cli, probe
from benchy.client.errors import ServerError
from benchy.client.settings import ClientSettings

SERVER_COMMANDS = ("run", "probe-cache", "capacity")


def _params(command: str) -> set[str]:
    return {p.name for p in cli.cli.commands[command].params}


@pytest.mark.parametrize("command", SERVER_COMMANDS)
def test_every_command_that_talks_to_a_server_takes_every_client_option(command):
    client = {"base_url", "model", "api_key", "timeout", "stall_timeout", "insecure", "transport"}
    assert client <= _params(command)
    assert "endpoint" in _params(command)


def test_probe_cache_hands_every_client_option_to_its_client(monkeypatch, capsys):
    seen: list[ClientSettings] = []

    def probe_that_records(settings):
        seen.append(settings.client)
        raise ServerError("recorded")

    monkeypatch.setattr(probe, "run_probe", probe_that_records)
    argv = ["probe-cache", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--transport", "aiohttp"]
    argv += ["--stall-timeout", "7", "--timeout", "30", "--insecure", "--api-key", "k"]
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 1 and "recorded" in capsys.readouterr().err
    assert seen == [
        ClientSettings(
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            model="m",
            timeout_s=30.0,
            stall_timeout_s=7.0,
            insecure=True,
            transport="aiohttp",
        )
    ]


def test_run_help_shows_its_flags_in_sections():
    """`benchy run --help` lists its flags under Server, Workload, Load, Output and Checks, in
    that order; every flag of run is in one of them (none left to the catch-all)."""
    from click.testing import CliRunner

    from benchy.cli.help_sections import OTHER, section_of

    command = cli.cli.commands["run"]
    unplaced = [p.name for p in command.params if section_of(p.name) == OTHER]
    assert unplaced == []
    text = CliRunner().invoke(cli.cli, ["run", "--help"]).output
    heads = [line[:-1] for line in text.splitlines() if line and not line[0].isspace() and line.endswith(":")]
    assert heads == ["Server", "Workload", "Load", "Output", "Checks", OTHER]
    at = {head: text.index(f"\n{head}:\n") for head in heads}
    assert at["Server"] < text.index("--base-url") < at["Workload"] < text.index("--pp") < at["Load"]
    assert at["Load"] < text.index("--max-errors") < at["Output"] < text.index("--output") < at["Checks"]
    assert at["Checks"] < text.index("--strict") < at[OTHER] < text.index("--help")
