"""`benchy selftest`'s record: this machine's client ceiling (load/selftest.py measures it),
cached per host and saved in every run's setup; a case that drives more than half of it is
flagged client-bound (checks/client_bound.py)."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path

from benchy.jsontypes import Saved

STREAMS = 64  # in flight at once, as one worker process of a run carries
PHASE_S = 1.5  # seconds per phase: long enough for thousands of requests
CLIENT_BOUND_SHARE = 0.5  # a case driving more than this share of the ceiling is client-bound


@dataclass(frozen=True, slots=True)
class ClientCeiling(Saved):
    """This host's client ceiling (`benchy selftest`), as cached when it was measured."""

    host: str | None = None
    measured_utc: str | None = None
    benchy_version: str | None = None
    event_loop: str | None = None
    streams: int = 0
    phase_s: float = 0.0
    requests_per_s: float | None = None
    events_per_s: float | None = None
    stamp_lag_ms_p50: float | None = None
    stamp_lag_ms_p99: float | None = None


# ------------------------------------------------------------------ the per-host cache


def cache_path(host: str | None = None) -> Path:
    """$XDG_CACHE_HOME/benchy/selftest/<host>.json (~/.cache when unset)."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in (host or platform.node() or "host"))
    return root / "benchy" / "selftest" / f"{name}.json"


def save(ceiling: ClientCeiling) -> Path:
    path = cache_path(ceiling.host)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ceiling.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path


def cached() -> ClientCeiling | None:
    """This host's cached ceiling, or None when it was never measured (or the file is unreadable)."""
    try:
        return ClientCeiling.from_dict(json.loads(cache_path().read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
