"""`benchy run`'s options as one typed object, in the groups its --help shows them in.

Why: the command took every option as a parameter (27 of them), so what belongs together
(where the output goes and how it is printed; what is judged) was told only by a comment or
by the help's sections. Click still hands the command its values one by one (and the option
groups of options.option_group as objects); `RunOptions.of` sorts them into the five groups
by their names, refusing one that no group takes, and the command body reads the groups.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from benchy.cli.options import Callback, Decorator

if TYPE_CHECKING:
    from benchy.client.settings import ClientSettings
    from benchy.load.plan import LoadSettings
    from benchy.load.prompts import Template
    from benchy.measure.ceiling import CeilingInputs
    from benchy.workloads.case import Case


class ErrorLimits(TypedDict):
    """The --max-errors group's values, handed on to RunSettings' fields of the same names."""

    max_errors: int | None
    max_error_rate: float | None
    max_connect_failures: int


@dataclass(frozen=True)
class ServerOptions:
    """Whom to measure and what to read of it besides the answers."""

    client: ClientSettings
    endpoint: str
    no_server_metrics: bool
    replicas: tuple[str, ...]
    gpu_metrics: str | None
    cache_reset: bool


@dataclass(frozen=True)
class WorkloadOptions:
    """What is sent: the cases and how their prompts are made."""

    cases: list[Case]
    no_nonce: bool
    no_stream: bool
    tokenizer_file: str | None
    template: Template
    stop: tuple[str, ...]
    skip_unfit: bool


@dataclass(frozen=True)
class LoadOptions:
    """How it is sent: the load, the runs, when to stop early, a saturation sweep."""

    load: LoadSettings
    runs: int
    warmup: int
    limits: ErrorLimits
    saturation: int | None


@dataclass(frozen=True)
class OutputOptions:
    """Where the results go and what is printed."""

    output: Path | None
    force: bool
    no_report: bool
    fmt: str
    quiet: bool
    view: str


@dataclass(frozen=True)
class CheckOptions:
    """What the run is judged against beyond its own findings."""

    strict: bool
    ceiling: CeilingInputs
    canary: bool


@dataclass(frozen=True)
class RunOptions:
    server: ServerOptions
    workload: WorkloadOptions
    load: LoadOptions
    output: OutputOptions
    checks: CheckOptions

    @classmethod
    def of(cls, **values: Any) -> RunOptions:
        """The command's parameter values (click's, by name) sorted into the groups; a value
        no group takes is a programming error (an option added to the command only)."""
        made = {name: _group(group, values) for name, group in GROUPS.items()}
        if values:
            raise TypeError(f"run options in no group: {', '.join(sorted(values))}")
        return cls(**made)


GROUPS: dict[str, type] = {
    "server": ServerOptions,
    "workload": WorkloadOptions,
    "load": LoadOptions,
    "output": OutputOptions,
    "checks": CheckOptions,
}


def _group(group: type, values: dict[str, Any]) -> Any:
    return group(**{f.name: values.pop(f.name) for f in fields(group)})


def as_one(build: Callable[..., object]) -> Decorator:
    """The command's decorator nearest its body: click's values become one object,
    `build(**values)`, the command's only parameter."""

    def decorate(command: Callback) -> Callback:
        @functools.wraps(command)
        def whole(**values: object) -> object:
            return command(build(**values))

        return whole

    return decorate
