"""Errors a command raises with an exit code of their own (outcome.py tables the codes)."""

from __future__ import annotations

import click

from benchy.outcome import (
    EXIT_CHECK_FAILED,
    EXIT_INTERRUPTED,
)


class _Interrupted(click.ClickException):
    exit_code = EXIT_INTERRUPTED


class _Unjudged(click.ClickException):
    exit_code = EXIT_CHECK_FAILED
