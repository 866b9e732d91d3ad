"""A capacity search's bundle: capacity-manifest.json beside its rounds' run folders.

Why: capacity.json must be remade from what the search saved alone (`benchy rebuild DIR`), as a
run's results are. Each round is a `benchy run` whose folder (rounds/NN-label) is a run bundle
with its results.json; what else the figures need is here: the setup, the search's settings
and SLO, each round's load and folder in the order they were measured, and a stop that no
round's results name (Ctrl-C between rounds, a round that measured nothing). A rebuild replays
the rounds through the same search (search.py) and the same figures (runner.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchy import jsontypes
from benchy.capacity.search import BY_CONCURRENCY, SearchSettings
from benchy.jsontypes import Saved
from benchy.results.capacity import CapacitySetup
from benchy.results.types import Stopped

CAPACITY_MANIFEST = "capacity-manifest.json"
CAPACITY_MANIFEST_SCHEMA = "benchy/capacity-manifest/1"


class CapacityBundleError(ValueError):
    """A capacity folder that cannot be rebuilt; one line."""


@dataclass
class SearchPlan(Saved):
    """search.SearchSettings as saved (that class is frozen and plain; this one is its JSON)."""

    by: str = BY_CONCURRENCY
    target: float = 0.9
    confidence: float = 0.95
    method: str = "wilson"
    start: float = 1.0
    limit: float = 256.0
    floor: float = 1.0
    min_requests: int = 20
    max_requests: int = 200
    resolution: float = 0.1
    client_retries: int = 1

    @classmethod
    def of(cls, s: SearchSettings) -> SearchPlan:
        return cls(**{name: getattr(s, name) for name in cls.__dataclass_fields__})

    def settings(self) -> SearchSettings:
        return SearchSettings(**{name: getattr(self, name) for name in self.__dataclass_fields__})


@dataclass
class MeasuredRound(Saved):
    """One round, in the order measured: its load and its run folder, relative to the manifest."""

    load: float
    folder: str


@dataclass
class CapacityManifest(Saved):
    """Everything a capacity search's figures read but its rounds' results."""

    setup: CapacitySetup
    schema: str = CAPACITY_MANIFEST_SCHEMA
    search: SearchPlan = field(default_factory=SearchPlan)
    slo: dict[str, float] = field(default_factory=dict)
    rounds: list[MeasuredRound] = field(default_factory=list)
    stopped: Stopped | None = None  # a stop that no round's results name (Ctrl-C, nothing measured)
    finished: bool = False  # the search ended and saved; False on disk: it was killed first


def is_capacity_folder(directory: Path) -> bool:
    return (Path(directory) / CAPACITY_MANIFEST).is_file()


def write_manifest(manifest: CapacityManifest, directory: Path) -> Path:
    """Writes capacity-manifest.json atomically (a reader, or a kill, never meets half a file)."""
    return jsontypes.write_manifest_file(directory / CAPACITY_MANIFEST, manifest)


def read_manifest(directory: Path) -> CapacityManifest:
    """The folder's capacity-manifest.json; CapacityBundleError (one line) otherwise."""
    path = Path(directory) / CAPACITY_MANIFEST
    return jsontypes.read_manifest_file(
        path, CapacityManifest, CAPACITY_MANIFEST_SCHEMA, CapacityBundleError, ": not a capacity folder"
    )
