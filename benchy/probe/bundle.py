"""A probe's raw bundle: probe-manifest.json (typed) beside requests.jsonl, all its analysis reads.

Why: probe.json must be remade from what the probe saved alone (`benchy rebuild DIR`), as a run's
results are. Besides the records, the analysis needs the setup (the server, the calibration, the
lengths left out), the plan (each length sent and the one asked; the capacity sweep's prefix
length and limit), the GPUs' window over each length as measured, the size the server states
for its cache, and the cache resets: all here, written before the first request and again
(atomically) when the probe ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchy import jsontypes
from benchy.jsontypes import Saved
from benchy.measure.gpu import GpuCase
from benchy.results.probe import ProbeSetup, StatedSize

PROBE_MANIFEST = "probe-manifest.json"
PROBE_MANIFEST_SCHEMA = "benchy/probe-manifest/1"
REQUESTS = "requests.jsonl"


class ProbeBundleError(ValueError):
    """A probe folder that cannot be rebuilt; one line."""


@dataclass
class PlannedLength(Saved):
    """One length probed: the one sent (capped to the context) and the one asked."""

    length: int
    asked: int


@dataclass
class CapacityPlan(Saved):
    """--capacity: each prefix's length asked, and the working set that stops the sweep."""

    prefix_tokens_asked: int
    max_tokens: int


@dataclass
class ImagePlan(Saved):
    """--images: the size probed (the manifest's, for a rebuild)."""

    width: int
    height: int


@dataclass
class ProbeManifest(Saved):
    """Everything a probe's analysis reads but its records (requests.jsonl)."""

    setup: ProbeSetup
    schema: str = PROBE_MANIFEST_SCHEMA
    lengths: list[PlannedLength] = field(default_factory=list)
    capacity: CapacityPlan | None = None
    gpu: dict[str, GpuCase] = field(default_factory=dict)  # length sent → the GPUs' window over it, as measured
    stated: StatedSize | None = None  # --capacity: what the server says its KV cache holds
    images: ImagePlan | None = None  # --images: the image-cache probe's size (probe/images.py)
    finished: bool = False  # the probe ended and saved; False on disk: it was stopped first


def is_probe_folder(directory: Path) -> bool:
    return (Path(directory) / PROBE_MANIFEST).is_file()


def write_manifest(manifest: ProbeManifest, directory: Path) -> Path:
    """Writes probe-manifest.json atomically (a reader, or a kill, never meets half a file)."""
    return jsontypes.write_manifest_file(directory / PROBE_MANIFEST, manifest)


def read_manifest(directory: Path) -> ProbeManifest:
    """The folder's probe-manifest.json; ProbeBundleError (one line) when it is missing or unreadable."""
    path = Path(directory) / PROBE_MANIFEST
    made = jsontypes.read_manifest_file(
        path, ProbeManifest, PROBE_MANIFEST_SCHEMA, ProbeBundleError, ": not a probe folder"
    )
    if not (Path(directory) / REQUESTS).is_file():
        raise ProbeBundleError(f"{directory}: no {REQUESTS} beside {PROBE_MANIFEST}: nothing to rebuild from")
    return made
