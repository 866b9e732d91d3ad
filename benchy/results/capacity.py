"""capacity.json: the one saved form of a capacity search, from which its report is made.

Typed like results.json (results/types.py, jsontypes): written and read through `to_dict` /
`from_dict`, its JSON Schema (benchy/data/capacity.schema.json) generated from these classes
(`write_schema`; tests fail when it is stale). The schema id is `benchy/capacity/MAJOR.MINOR`
with results.json's version policy: a field added is a new MINOR, older files still load.
  1.0  the first version (issue 25); setup.server and the workload settings typed since (issue
       22: the schema names their properties; a workload's null settings are left out)
  1.1  each latency summary's p90_low, p90_high, p99_low, p99_high (99% order-statistic bounds)
  1.2  the workload settings' max_gap_s and subagents (results 1.26)

Every point probed is kept in the order it was probed, with each round it was sent in, also the
rounds that were not counted because benchy itself fell behind (`overloaded` says why).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchy import jsontypes
from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.results.types import MetricSummary, Stopped
from benchy.server.identity import ServerIdentity
from benchy.workloads.spec import WorkloadSpec

CAPACITY_MAJOR, CAPACITY_MINOR = 1, 2
CAPACITY_SCHEMA = f"benchy/capacity/{CAPACITY_MAJOR}.{CAPACITY_MINOR}"
CAPACITY_FILE = "capacity.json"
SCHEMA_FILE = Path(__file__).parent.parent / "data" / "capacity.schema.json"
_SCHEMA_ID = re.compile(r"benchy/capacity/(\d+)\.(\d+)")


class CapacityFileError(ValueError):
    """A capacity file benchy cannot read; one line."""


@dataclass(frozen=True)
class CapacitySetup(Saved):
    """What was searched, against what, and how (credentials never included)."""

    base_url: str | None = _opt("the server, without credentials")
    model: str | None = None
    server_version: str | None = None
    server: ServerIdentity | None = _opt("the server's identity (server/identity.py)", omit=True)
    endpoint: str | None = None
    benchy_version: str | None = None
    command_line: str | None = _opt("secrets redacted")
    started_utc: str | None = None
    case: str | None = _opt("the case searched, at its first load (its label)")
    kind: str = _opt('"sweep" | "multi_turn" | "shared_prefix"', "sweep")
    pp: int | None = None
    tg: int | None = None
    depth: int = 0
    workload: WorkloadSpec | None = _opt("the workload's settings (shared fraction, groups, turns …)", omit=True)
    by: str = _opt('"concurrency" | "rate" (requests/s, open loop)', "concurrency")
    slo: dict[str, float] = _opt("metric → threshold (--slo)", factory=dict)
    goodput: float = _opt("--goodput: the share of requests that must meet every target", 0.9)
    confidence: float = _opt("of each point's goodput interval", 0.95)
    interval: str = _opt('"wilson" | "exact" (Clopper–Pearson)', "wilson")
    start: float = 1.0
    limit: float = _opt("--max: the highest load the search could probe", 256.0)
    min_requests: int = 20
    max_requests: int = 200
    resolution: float | None = _opt("--by rate: bisect until the bracket is this fraction of its top")


@dataclass(frozen=True)
class CapacityRound(Saved):
    """One `benchy run` of a point's case: its measured requests and how many met every target."""

    requests: int
    good: int
    counted: bool = _opt(
        "false: benchy fell behind (client_overloaded), so not evidence; a round that passed an SLO a "
        "late client can only worsen (ttft, ttfc, e2e, e2e_tps) counts all the same",
        True,
    )
    overloaded: str | None = _opt("why benchy fell behind in this round (client_overloaded)", omit=True)
    folder: str | None = _opt("the round's results folder, relative to capacity.json", omit=True)


@dataclass(frozen=True)
class CapacityPoint(Saved):
    """One load probed, its counted rounds merged."""

    load: float
    label: str = _opt("the case's label at this load", "")
    verdict: str = _opt('"pass" | "fail": the side of the target its goodput is on', "fail")
    clear: bool = _opt("the goodput interval is wholly on that side (else: decided by the estimate)", False)
    requests: int = _opt("counted requests (failed ones included)", 0)
    good: int = _opt("of them: succeeded and met every target", 0)
    goodput: float | None = None
    interval: list[float] | None = _opt("the goodput's interval at setup.confidence")
    rounds: list[CapacityRound] = field(default_factory=list)
    ttft: MetricSummary | None = _opt("TTFT, s, over the counted requests (median, p90, p99 …)")
    itl: MetricSummary | None = _opt("inter-token latency, s")
    e2e: MetricSummary | None = _opt("end-to-end latency, s")
    throughput_tps: float | None = _opt("output tokens/s of the whole server (rounds weighted by requests)")
    per_user_tps: float | None = _opt("median decode rate of one request, tokens/s: what each user sees")
    cache_hit: float | None = _opt("cached prompt tokens ÷ prompt tokens, from the server's usage", omit=True)
    start_misses: int | None = _opt(
        "concurrency: of the requests missing the SLO, those among each round's first `load`, sent together as "
        "the round began (a burst that steady traffic does not have)",
        omit=True,
    )
    unavailable: dict[str, str] = _opt("figure → why it is null", factory=dict, omit=True)


@dataclass(frozen=True)
class CapacityAnswer(Saved):
    """The answer, with its bracket."""

    kind: str = _opt('"found" | "all_pass" | "none_pass" | "client_limited"', "found")
    capacity: float | None = _opt("the highest load that passed; null: none did")
    failing: float | None = _opt("the lowest load that failed; null: none did")
    confident: bool = _opt("both ends' goodput intervals are clear of the target", False)
    client_limited_at: float | None = _opt("where benchy itself kept falling behind", omit=True)
    line: str = _opt("the one line benchy printed", "")


@dataclass(frozen=True)
class CapacityResult(Saved):
    """A whole capacity search: capacity.json."""

    schema: str = _opt("benchy/capacity/MAJOR.MINOR", CAPACITY_SCHEMA)
    benchy_version: str | None = None
    partial: bool = _opt("interrupted or stopped before the answer", False)
    stopped: Stopped | None = None
    setup: CapacitySetup = field(default_factory=CapacitySetup)
    answer: CapacityAnswer | None = None
    points: list[CapacityPoint] = _opt("every load probed, in the order first probed", factory=list)
    notes: list[str] = _opt("what the reader should know (non-monotone points …)", factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**jsontypes.to_json(self), "schema": CAPACITY_SCHEMA}

    def point(self, load: float | None) -> CapacityPoint | None:
        return next((p for p in self.points if p.load == load), None)


def save(result: CapacityResult, directory: Path) -> Path:
    data = result.to_dict()
    CapacityResult.from_dict(data, strict=True)  # what is written must read back: a wrong type fails here
    return jsontypes.write_json_file(directory / CAPACITY_FILE, data)


def is_capacity_file(path: Path) -> bool:
    """Whether `path` is (or a folder holds) a capacity.json, by its schema id."""
    path = path / CAPACITY_FILE if path.is_dir() else path
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and str(data.get("schema", "")).startswith("benchy/capacity/")


def read(path: Path) -> CapacityResult:
    """A capacity file (or the folder holding one); CapacityFileError (one line) otherwise."""
    path = path / CAPACITY_FILE if path.is_dir() else path
    return jsontypes.read_json_file(path, CapacityResult, CapacityFileError, _refused)


def _refused(schema: object) -> str | None:
    match = _SCHEMA_ID.fullmatch(schema) if isinstance(schema, str) else None
    if match is None or int(match.group(1)) != CAPACITY_MAJOR:
        return f"schema {schema!r} is not one this benchy reads ({CAPACITY_SCHEMA})"
    if int(match.group(2)) > CAPACITY_MINOR:
        return f"schema {schema} is newer than this benchy ({CAPACITY_SCHEMA}): upgrade"
    return None


def json_schema() -> dict[str, Any]:
    return jsontypes.json_schema(CapacityResult, CAPACITY_SCHEMA, "benchy capacity.json")


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Regenerates the shipped JSON Schema of capacity.json."""
    return jsontypes.write_schema_file(path, json_schema())


def load_text(by: str, load: float | None) -> str:
    if load is None:
        return "none"
    return f"rate {load:g} req/s" if by == "rate" else f"concurrency {int(load)}"


def share_text(share: float, target: float) -> str:
    """A goodput share as a percentage that stays on its side of the target: 179/200 against
    90% is "89.5%", never "90%" (a failing share rounded up to the target reads as a pass). One
    more decimal at a time until the text and the target part, as far as a tenth of a basis point."""
    for digits in range(4):
        text = f"{share * 100:.{digits}f}"
        if (float(text) >= target * 100) == (share >= target):
            return f"{text}%"
    return f"{share * 100:.{digits}f}%"
