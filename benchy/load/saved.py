"""The load settings as results.json's `setup.load` keeps them: the saved form, derived from
LoadSettings (load/plan.py) by its `saved()`.

Why in load/: the load stage owns its settings, so it owns their saved form too (as it owns
the one Calibration); results/setup.py re-exports it, and the run builds the typed setup with
it, not a dict parsed back.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.measure import images as image_figures


@dataclass(frozen=True, slots=True)
class LoadSetup(Saved):
    """How each case's load was bounded and spread (--requests, --duration, --max-inflight, …)."""

    requests: int | None = None
    duration_s: float | None = None
    drain_s: float | None = _opt("--drain: seconds the requests in flight got after --duration (1.26)", omit=True)
    max_inflight: int | None = None
    seed: int = 0
    workers: int | None = None
    slo: dict[str, float] | None = None
    ray: str | None = _opt("--ray: the Ray cluster's address as given (auto, local, host:port)", omit=True)
    ray_workers_per_node: int | None = _opt("--ray-workers-per-node: actors on each node", omit=True)
    batch: int | None = _opt("(1.26) --batch: inputs per request of --endpoint embeddings", omit=True)
    images: image_figures.ImageSetup | None = _opt("(1.27) --images: what each request carried", omit=True)
