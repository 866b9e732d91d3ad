"""`benchy run` takes one typed RunOptions (benchy/cli/run_options.py), in the groups its
--help shows: the command's body reads groups, not 27 parameters."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from benchy import cli
from benchy.cli.help_sections import section_of
from benchy.cli.run_options import GROUPS, RunOptions


def test_the_run_command_takes_one_options_object():
    assert list(inspect.signature(cli.cli.commands["run"].callback).parameters) == ["opts"]


def test_the_groups_are_the_options_fields():
    assert list(GROUPS) == [f.name for f in dataclasses.fields(RunOptions)]


def test_each_option_is_in_the_group_its_help_section_names():
    """Every plain option a group holds is listed under that group's title in `run --help`
    (the objects option_group builds, e.g. the client's settings, are made of several flags)."""
    params = {p.name for p in cli.cli.commands["run"].params}
    placed = 0
    for name, group in GROUPS.items():
        for f in dataclasses.fields(group):
            if f.name in params:
                assert section_of(f.name) == name.capitalize(), (f.name, section_of(f.name), name)
                placed += 1
    assert placed >= 20


def test_options_in_no_group_or_missing_are_refused():
    values = {f.name: None for group in GROUPS.values() for f in dataclasses.fields(group)}
    made = RunOptions.of(**values)
    assert made.output.fmt is None and made.checks.strict is None
    with pytest.raises(TypeError, match="in no group: stray"):
        RunOptions.of(**values, stray=1)
    values.pop("view")
    with pytest.raises(KeyError):
        RunOptions.of(**values)
