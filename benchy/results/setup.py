"""The run's setup as results.json saves it (`setup`): what was measured, with what, and how.

Apart from results/types.py (the run's and its cases' figures), which re-exports these names:
the setup is made once, before any request, and read by every stage after.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.load.calibration import Calibration as Calibration  # one class: the load stage's (re-exported)
from benchy.load.calibration import LengthCheck as LengthCheck
from benchy.load.lengths import PromptLengths as PromptLengths
from benchy.load.saved import LoadSetup as LoadSetup  # the load stage's saved form of its settings
from benchy.measure.ceiling import CeilingSetup
from benchy.measure.gpu import GpuSetup
from benchy.measure.sanity.canary import Canary
from benchy.measure.selftest import ClientCeiling
from benchy.results.verdicts.details import DangerousStop
from benchy.server.cache_reset import CacheReset
from benchy.server.identity import ServerIdentity
from benchy.server.metrics import MetricsStatus
from benchy.workloads.dataset import DatasetSetup


@dataclass(frozen=True)
class Setup(Saved):
    """What was measured, with what, and how (credentials never included)."""

    base_url: str | None = _opt("the server, without credentials")
    model: str | None = None
    server_version: str | None = None
    endpoint: str | None = None
    benchy_version: str | None = None
    host: str | None = None
    python: str | None = None
    event_loop: str | None = _opt("the event loop the requests ran on: 'uvloop 0.23.0' or 'asyncio' (client/loop.py)")
    receive_stamps: str | None = _opt(
        "(1.24) where each read's time comes from: the kernel's arrival stamp or the read (client/kernel_stamps.py)",
        omit=True,
    )
    command_line: str | None = _opt("secrets redacted")
    extra_body: dict[str, Any] | None = _opt("(1.15) --extra-body, its credential-named keys' values as ***")
    tools: list[dict[str, Any]] | None = _opt(
        "(1.26) --tools: the function definitions sent (docs/tools.md)", omit=True
    )
    tool_choice: str | None = _opt("(1.26) --tool-choice", omit=True)
    started_utc: str | None = None
    prompt_nonce: bool | None = None
    runs: int | None = None
    warmup: int | None = None
    calibration: Calibration | None = _opt("the main endpoint's calibration")
    calibrations: dict[str, Calibration] = _opt("endpoint → calibration", factory=dict)
    calibration_failures: list[str] = _opt("calibration attempts that failed and were retried", factory=list)
    tokenizer: str | None = None
    load: LoadSetup | None = None
    hardware: str | None = _opt("--hardware profile", omit=True)
    model_profile: str | None = _opt("--model-profile (or the one guessed)", omit=True)
    ceiling: CeilingSetup | None = _opt("present when a ceiling was asked for", omit=True)
    template: str | None = _opt("none | harmony")
    reasoning_effort: str | None = None
    stop: list[str] = field(default_factory=list)
    dangerous_stops: list[DangerousStop] = _opt("stops that fire inside a Harmony response", factory=list)
    canary: Canary | None = _opt("(1.26) --canary: fixed prompts with checkable answers (sanity/canary.py)", omit=True)
    server: ServerIdentity | None = _opt("the server's identity (server/identity.py)", omit=True)
    server_metrics: MetricsStatus | None = _opt("what /metrics offered (server/metrics.py)", omit=True)
    gpu: GpuSetup | None = _opt("(1.7) --gpu-metrics: the GPUs, their peak bandwidth, the idle baseline", omit=True)
    cache_reset: CacheReset | None = _opt("(1.10) --cache-reset: the last reset (server/cache_reset.py)", omit=True)
    dataset: DatasetSetup | None = _opt("(1.18) --dataset: the file, its mode and sampling", omit=True)
    client_ceiling: ClientCeiling | None = _opt("(1.19) this host's `benchy selftest`, as cached", omit=True)
