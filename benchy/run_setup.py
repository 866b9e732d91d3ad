"""A run's setup, typed (results/setup.py's Setup): what was asked, of what client, counted how.

Built in phases, each adding what it learns: this module makes the part known once the run has
calibrated (the client's settings, the load settings, the calibrations, the template, the
ceiling's inputs); the run (run.py) then adds the server's facts, the canary, the dataset's
sampling and the last cache reset by `replace`. No dict on the way: mypy checks every field
(an unknown key was "a field someone forgot"), and the saved form is made only when the
manifest and results.json are written.

Why beside run.py, not in load/: the Setup is the results' type, which the load stage may not
import (tests/test_house.py). The run's settings are read through SetupSource, the fields used
here, so that this module needs nothing of benchy.run.
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Iterable
from typing import Protocol

from benchy import __version__
from benchy.client import kernel_stamps
from benchy.client import loop as event_loop
from benchy.client.extra_body import redacted_body as redacted_extra_body
from benchy.client.redact import redact_url
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.load.prompts import Calibration, Template
from benchy.measure import selftest
from benchy.measure.ceiling import CeilingInputs
from benchy.results.setup import Setup
from benchy.results.verdicts.details import DangerousStop


class SetupSource(Protocol):
    """The run settings (benchy.run.RunSettings) the setup is made of."""

    client: ClientSettings
    endpoint: str
    command_line: str
    nonce: bool
    runs: int
    warmup: int
    load: LoadSettings
    ceiling: CeilingInputs
    template: Template
    stop: tuple[str, ...]


def run_setup(
    settings: SetupSource,
    model: str,
    version: str | None,
    calibrations: dict[str, Calibration],
    gpu_names: Iterable[str | None] = (),
) -> Setup:
    """The setup as the calibrate phase leaves it (the server's facts come after, run.py)."""
    main_cal = calibrations.get(settings.endpoint) or next(iter(calibrations.values()))
    ceiling = settings.ceiling.resolve(model, gpu_names)  # a --hardware the GPUs contradict gives way
    client = settings.client
    return Setup(
        base_url=redact_url(client.base_url),
        model=model,
        server_version=version,
        endpoint=settings.endpoint,
        benchy_version=__version__,
        host=platform.node(),
        python=platform.python_version(),
        event_loop=event_loop.name(),
        receive_stamps=kernel_stamps.described(client.transport, client.stream),
        command_line=settings.command_line,
        extra_body=redacted_extra_body(client.extra_body),
        tools=client.tools,
        tool_choice=client.tool_choice,
        started_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        prompt_nonce=settings.nonce,
        runs=settings.runs,
        warmup=settings.warmup,
        calibration=main_cal.saved(),
        calibrations={ep: c.saved() for ep, c in calibrations.items()},
        tokenizer=_tokenizer_text(main_cal),
        load=settings.load.saved(),
        hardware=ceiling.hardware if ceiling else None,
        model_profile=ceiling.model_profile if ceiling else None,
        ceiling=ceiling,
        template=settings.template.name,
        reasoning_effort=settings.template.reasoning_effort,
        stop=list(settings.stop),
        dangerous_stops=[DangerousStop(stop, why) for stop, why in settings.template.risky_stops(settings.stop)],
        client_ceiling=selftest.cached(),  # this host's `benchy selftest`, when it was measured
    )


def _tokenizer_text(cal: Calibration) -> str:
    """setup.tokenizer: what counted the prompts (load/lengths.py)."""
    if cal.length_source.words is None:
        return "o200k_base (offline), calibrated to the server's usage counts"
    return f"o200k_base (offline), on words one token each by {cal.length_source.method}"
