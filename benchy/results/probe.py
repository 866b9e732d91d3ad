"""probe.json: the one saved form of `benchy probe-cache`, from which its report is made.

Typed like results.json and capacity.json (jsontypes): written and read through `to_dict` /
`from_dict`, its JSON Schema (benchy/data/probe.schema.json) generated from these classes
(`write_schema`; tests/test_probe_files.py fails when it is stale). The schema id stays
`benchy/probe/1`: the typed classes describe the file benchy wrote before they existed, key for
key, so those files load as they are; a reader takes `benchy/probe/1` and any `1.MINOR`.

Each length keeps every request's record (`requests`, the request log's own form) beside the
figures made of them; the report reads only what is here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchy import jsontypes
from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.load.calibration import Calibration
from benchy.measure.gpu import GpuCase, GpuSetup
from benchy.results.types import PROBE_SCHEMA, Stopped
from benchy.server.cache_reset import CacheReset

PROBE_FILE = "probe.json"
SCHEMA_FILE = Path(__file__).parent.parent / "data" / "probe.schema.json"
_SCHEMA_ID = re.compile(r"benchy/probe/(\d+)(?:\.(\d+))?")
PROBE_MAJOR = 1


class ProbeFileError(ValueError):
    """A probe file benchy cannot read; one line."""


@dataclass(frozen=True)
class NotProbed(Saved):
    """An asked length left out, and why (capped to a length another one already probes)."""

    asked: int
    reason: str


@dataclass(frozen=True)
class ResetCalls(Saved):
    """--cache-reset over the whole probe: how many resets, and the last one's outcome."""

    calls: int
    last: CacheReset | None = None


@dataclass(frozen=True)
class ProbeSetup(Saved):
    """What was probed, against what, and how (credentials never included)."""

    base_url: str | None = _opt("the server, without credentials")
    model: str | None = None
    server_version: str | None = None
    endpoint: str = "chat"
    context_length: int | None = _opt("tokens one request may hold (null: not reported)")
    n: int = _opt("requests per side and length", 5)
    output_tokens: int = _opt("output tokens of each request (only the first one matters)", 8)
    alpha: float = _opt("significance level of every test", 0.05)
    min_speedup: float = _opt("the least speed-up that counts as a cache", 1.2)
    calibration: Calibration = _opt(
        "the prompt-length calibration (load/calibration.py Calibration, as saved)", factory=Calibration
    )
    command_line: str = _opt("secrets redacted", "")
    started_utc: str | None = None
    host: str | None = None
    benchy_version: str | None = None
    context_source: str | None = _opt("where context_length came from (server/identity.py)", omit=True)
    gpu: GpuSetup | None = _opt("--gpu-metrics: the GPUs and their idle baseline", omit=True)
    lengths_not_probed: list[NotProbed] = _opt("asked lengths left out, and why", factory=list)
    cache_reset: ResetCalls | None = _opt("--cache-reset: the resets made", omit=True)


@dataclass(frozen=True)
class ProbeSide(Saved):
    """One side of a length (shared or unique prefixes): a value per request, in sending order."""

    ttft_s: list[float | None] = _opt("TTFT, s (null: unavailable, see `unavailable`)", factory=list)
    cached_tokens: list[int | None] = _opt("the server's usage.cached_tokens", factory=list)
    prompt_tokens: list[int | None] = _opt("the server's usage.prompt_tokens", factory=list)
    request_ids: list[str] = field(default_factory=list)
    unavailable: list[str] = _opt("why a TTFT is null", factory=list)


@dataclass(frozen=True)
class LengthEntry(Saved):
    """One prompt length probed: both sides, the verdict and the figures it rests on."""

    length: int = _opt("the prompt length sent, server tokens (capped to the context)", 0)
    length_asked: int = _opt("the length asked (--lengths)", 0)
    prompt_tokens: int | None = _opt("median server-counted prompt tokens", None)
    shared: ProbeSide = field(default_factory=ProbeSide)
    unique: ProbeSide = field(default_factory=ProbeSide)
    n_ok: int = 0
    n_failed: int = 0
    errors: dict[str, int] = _opt("error kind → requests", factory=dict)
    first_errors: dict[str, str] = _opt("error kind → its first message, in the server's words", factory=dict)
    speedup: float | None = _opt("median unique TTFT ÷ median repeat TTFT")
    p_faster: float | None = _opt("one-sided Welch t on log TTFT: repeats faster than unique")
    p_below_min: float | None = _opt("one-sided Welch t: speed-up below min_speedup")
    rank_p: float | None = _opt("Mann–Whitney U for the hypothesis the verdict rests on")
    hit_fraction: float | None = _opt("partial_hits: the share of repeats served from cache")
    gain_on_hits: float | None = _opt("partial_hits: median unique TTFT ÷ median TTFT of the hits")
    verdict: str = _opt('"detected" | "not_detected" | "cache_hit_no_gain" | "partial_hits" | "inconclusive"', "")
    reason: str = ""
    requests: list[dict[str, Any]] = _opt("every request's record, as the request log holds it", factory=list)
    gpu: GpuCase | None = _opt("--gpu-metrics: the GPUs over both sides of the length", omit=True)


@dataclass(frozen=True)
class CapacityPass(Saved):
    """One --capacity pass: K distinct prefixes sent once, then each again in the same order."""

    prefixes: int
    prompt_tokens: int | None = _opt("median server-counted prompt tokens of a re-use")
    shared_tokens: int = _opt("what every prefix shares (the chat template), counted once", 0)
    working_set_tokens: int | None = None
    judged: int = _opt("re-uses judged (both sends succeeded)", 0)
    hits: int = 0
    hit_fraction: float | None = None
    evidence: str = _opt('"cached_tokens" | "ttft": how a hit was told', "")
    first_ttft_s: float | None = _opt("median TTFT of the first sends, s")
    reuse_ttft_s: float | None = _opt("median TTFT of the re-uses, s")
    n_failed: int = 0
    first_errors: dict[str, str] = field(default_factory=dict)
    reuse_cached_tokens: list[int | None] = field(default_factory=list)
    request_ids: list[str] = _opt("the re-uses' request ids", factory=list)


@dataclass(frozen=True)
class StatedSize(Saved):
    """What the server says its KV cache holds (server/capacity.py)."""

    tokens: int | None = None
    source: str | None = None
    reason: str | None = _opt("why tokens is null, or what it leaves out")


@dataclass(frozen=True)
class ProbeCapacity(Saved):
    """--capacity: the cliff of the cache for reuse, beside the size the server states."""

    prefix_tokens_asked: int = 0
    prefix_tokens: int | None = _opt("median server-counted length of a prefix")
    max_tokens: int = _opt("--capacity-max-tokens", 0)
    hit_share: float = _opt("a working set whose re-uses hit at least this often fits", 0.5)
    points: list[CapacityPass] = _opt("every pass, by its number of prefixes", factory=list)
    fits_prefixes: int | None = None
    falls_prefixes: int | None = None
    cliff_tokens: float | None = None
    uncertainty_tokens: float | None = None
    verdict: str = _opt('"found" | "beyond_max" | "below_one_prefix" | "unmeasured"', "")
    reason: str = ""
    stated: StatedSize | None = _opt("the server's own statement of its KV cache", omit=True)


IMAGE_TEXT_TOKENS = 128  # probe-cache --images: each request's text, short, exact and its own


@dataclass(frozen=True)
class ImageProbe(LengthEntry):
    """probe-cache --images: the same image again (shared) against unique images of the same size,
    each after its own exact, nonce-led text of `length` tokens; judged as a length is, by TTFT
    alone (servers report prefix hits in cached_tokens, not image hits)."""

    width: int = 0
    height: int = 0
    image_tokens: float | None = _opt("median image tokens of a request, as the server counted them")
    saved_s: float | None = _opt("median unique-image TTFT − median repeated-image TTFT: what the cache saves, s")


@dataclass(frozen=True)
class ProbeResult(Saved):
    """A whole prefix-cache probe: probe.json."""

    schema: str = PROBE_SCHEMA
    benchy_version: str | None = None
    setup: ProbeSetup = field(default_factory=ProbeSetup)
    lengths: list[LengthEntry] = _opt("each length probed (none with --capacity)", factory=list)
    capacity: ProbeCapacity | None = _opt("--capacity: the capacity sweep", omit=True)
    images: ImageProbe | None = _opt("--images: the image-cache probe (benchy/probe/images.py)", omit=True)
    stopped: Stopped | None = _opt(
        "a probe whose process ended before it saved (by: killed), rebuilt from its bundle: where it was cut",
        omit=True,
    )


def save(result: ProbeResult, directory: Path) -> Path:
    """probe.json in `directory`, atomically (a reader never meets half a file)."""
    data = result.to_dict()
    ProbeResult.from_dict(data, strict=True)  # what is written must read back: a wrong type fails here
    return jsontypes.write_json_file(directory / PROBE_FILE, data)


def is_probe_data(data: object) -> bool:
    return _refused(data.get("schema") if isinstance(data, dict) else None) is None


def read(path: Path) -> ProbeResult:
    """A probe file (or the folder holding one); ProbeFileError (one line) otherwise."""
    path = path / PROBE_FILE if path.is_dir() else path
    return jsontypes.read_json_file(path, ProbeResult, ProbeFileError, _refused)


def _refused(schema: object) -> str | None:
    match = _SCHEMA_ID.fullmatch(schema) if isinstance(schema, str) else None
    if match is not None and int(match.group(1)) == PROBE_MAJOR:
        return None
    return f"schema {schema!r} is not one this benchy reads ({PROBE_SCHEMA})"


def json_schema() -> dict[str, Any]:
    return jsontypes.json_schema(ProbeResult, PROBE_SCHEMA, "benchy probe.json")


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Regenerates the shipped JSON Schema of probe.json."""
    return jsontypes.write_schema_file(path, json_schema())
