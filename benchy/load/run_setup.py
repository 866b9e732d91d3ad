"""A run's setup as results.json's `setup` says it: what was asked, of what client, counted how.

Why in load/: every part of it is the load's or below it (the client's settings, the load
settings, the calibrations, the template, the ceiling's inputs); the server's own facts are
added by the run as its connect phase learns them. The run's settings are read through
SetupSource, the fields used here, so that this module needs nothing of benchy.run.
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Iterable
from typing import Any, Protocol

from benchy import __version__
from benchy.client import kernel_stamps
from benchy.client import loop as event_loop
from benchy.client.extra_body import redacted_body as redacted_extra_body
from benchy.client.redact import redact_url
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.load.prompts import Calibration, Template
from benchy.measure.ceiling import CeilingInputs


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
) -> dict[str, Any]:
    main_cal = calibrations.get(settings.endpoint) or next(iter(calibrations.values()))
    return {
        "base_url": redact_url(settings.client.base_url),
        "model": model,
        "server_version": version,
        "endpoint": settings.endpoint,
        "benchy_version": __version__,
        "host": platform.node(),
        "python": platform.python_version(),
        "event_loop": event_loop.name(),
        "receive_stamps": kernel_stamps.described(settings.client.transport, settings.client.stream),
        "command_line": settings.command_line,
        "extra_body": redacted_extra_body(settings.client.extra_body),
        **_tools_setup(settings.client),
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "prompt_nonce": settings.nonce,
        "runs": settings.runs,
        "warmup": settings.warmup,
        "calibration": main_cal.saved().to_dict(),
        "calibrations": {ep: c.saved().to_dict() for ep, c in calibrations.items()},
        "tokenizer": _tokenizer_text(main_cal),
        "load": settings.load.to_dict(),
        **_ceiling_setup(settings.ceiling, model, gpu_names),
        **_template_setup(settings),
        **_client_ceiling_setup(),
    }


def _tools_setup(client: ClientSettings) -> dict[str, Any]:
    """--tools and --tool-choice as sent (absent when no tools were)."""
    if client.tools is None and client.tool_choice is None:
        return {}
    return {"tools": client.tools, "tool_choice": client.tool_choice}


def _tokenizer_text(cal: Calibration) -> str:
    """setup.tokenizer: what counted the prompts (load/lengths.py)."""
    if cal.length_source.words is None:
        return "o200k_base (offline), calibrated to the server's usage counts"
    return f"o200k_base (offline), on words one token each by {cal.length_source.method}"


def _client_ceiling_setup() -> dict[str, Any]:
    """This host's cached `benchy selftest`, when it was measured."""
    from benchy.measure import selftest

    found = selftest.cached()
    return {"client_ceiling": found.to_dict()} if found else {}


def _template_setup(settings: SetupSource) -> dict[str, Any]:
    """template, reasoning_effort, stop and the stops that fire inside a Harmony response."""
    risky = settings.template.risky_stops(settings.stop)
    return {
        "template": settings.template.name,
        "reasoning_effort": settings.template.reasoning_effort,
        "stop": list(settings.stop),
        "dangerous_stops": [{"stop": stop, "reason": reason} for stop, reason in risky],
    }


def _ceiling_setup(inputs: CeilingInputs, model: str, gpu_names: Iterable[str | None] = ()) -> dict[str, Any]:
    """hardware, model_profile and the figures the decode ceiling is computed from (the model
    profile is guessed from the served id only when a bandwidth is known; a --hardware the
    GPUs contradict gives way to theirs)."""
    ceiling = inputs.resolve(model, gpu_names)
    if ceiling is None:
        return {}
    return {"hardware": ceiling.hardware, "model_profile": ceiling.model_profile, "ceiling": ceiling.to_dict()}
