"""One analysis of a probe: its manifest and its records in, probe.json's ProbeResult out.

Why one: `benchy rebuild` of a probe folder must give what the probe gave. The live probe sends,
writes each record (requests.jsonl) and its plan and windows (probe-manifest.json), then
analyses them exactly as a rebuild does: nothing here reads anything but its arguments.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from benchy.measure import classify, registry, request_formulas
from benchy.measure import gpu as gpu_figures
from benchy.measure.gpu import GpuCase
from benchy.measure.unavailable import Unavailable
from benchy.probe import images
from benchy.probe.bundle import ProbeManifest
from benchy.probe.figures import figure
from benchy.probe.verdict import SERVED_SHARE, TIMING_HIT_SPEEDUP, decide
from benchy.records.plan import Tagged
from benchy.results.probe import (
    IMAGE_TEXT_TOKENS,
    CapacityPass,
    LengthEntry,
    ProbeCapacity,
    ProbeResult,
    ProbeSide,
    StatedSize,
)
from benchy.results.types import Stopped

CAPACITY_HIT_SHARE = 0.5  # a working set whose re-uses hit at least this often still fits

KILLED = "killed"  # Stopped.by of a probe whose process ended without saving (SIGKILL, a crash)
LENGTH_CASE, CAPACITY_CASE = "probe", "capacity"  # a record's case: "probe 2000 shared", "capacity 4 reuse"


def analyze(manifest: ProbeManifest, records: Iterable[Tagged]) -> ProbeResult:
    """probe.json's content from the probe's plan and records (in the order they were sent)."""
    by_length: dict[int, list[Tagged]] = {}
    by_pass: dict[int, list[Tagged]] = {}  # in the order the passes were sent
    pictured: list[Tagged] = []  # --images (probe/images.py)
    for rec in records:
        kind, size, _ = rec.case.split(" ")
        if kind == images.IMAGE_CASE:
            pictured.append(rec)
            continue
        (by_length if kind == LENGTH_CASE else by_pass).setdefault(int(size), []).append(rec)
    entries = []
    for planned in manifest.lengths:
        recs = by_length.get(planned.length)
        if recs is None:
            continue  # not reached (the probe was stopped first)
        window = manifest.gpu.get(str(planned.length))
        gpu = _gpu_entry(window, recs, manifest) if window is not None else None
        entries.append(length_entry(planned.length, planned.asked, recs, gpu=gpu))
    capacity = None
    if manifest.capacity is not None:
        sweep = Sweep()
        for k, recs in by_pass.items():
            if not sweep.add(capacity_point(k, recs[:k], recs[k:])):
                break
        plan = manifest.capacity
        capacity = sweep.result(plan.prefix_tokens_asked, plan.max_tokens, manifest.stated)
    pictured_entry = None
    if manifest.images is not None and pictured:
        entry = length_entry(IMAGE_TEXT_TOKENS, IMAGE_TEXT_TOKENS, pictured, by_cached=False)
        pictured_entry = images.image_entry(manifest.images, entry, pictured)
    return ProbeResult(
        benchy_version=manifest.setup.benchy_version,
        setup=manifest.setup,
        lengths=entries,
        capacity=capacity,
        images=pictured_entry,
        stopped=None if manifest.finished else Stopped(KILLED, _killed_reason(by_length, by_pass)),
    )


def _killed_reason(by_length: dict[int, list[Tagged]], by_pass: dict[int, list[Tagged]]) -> str:
    """Names the cut of a probe whose process ended before it saved: the last length (or
    capacity pass) that has records, and how many of them had finished."""
    if by_pass:
        k, recs = list(by_pass.items())[-1]
        where = f"the capacity pass of {k} prefix(es) ({len(recs)} of its {2 * k} requests had finished)"
    elif by_length:
        length, recs = list(by_length.items())[-1]
        where = f"length {length:,} ({len(recs)} of its requests had finished)"
    else:
        where = "its calibration (no probe request had finished)"
    return f"the probe's process ended (killed) during {where}, before it saved: rebuilt from its bundle"


def _gpu_entry(window: GpuCase, records: list[Tagged], manifest: ProbeManifest) -> GpuCase:
    """The GPUs over one length's requests (both sides): energy per request and per output token."""
    gpu = GpuCase.from_dict(window.to_dict())  # the manifest's window stays as measured
    ok = [r for r in records if classify.classify(r).ok]
    setup = manifest.setup.gpu
    idle = setup.baseline.power_w if setup is not None and setup.baseline is not None else None
    return gpu_figures.per_token(gpu, sum(request_formulas.completion_tokens(r) for r in ok), len(ok), idle)


# ---- one length ---------------------------------------------------------------------------


def _ttft(rec: Tagged) -> float | Unavailable:
    value = registry.request_metrics(rec)["ttft_s"]
    return value if isinstance(value, Unavailable) else float(value)


def _side(records: list[Tagged]) -> tuple[ProbeSide, list[str]]:
    """A side's values, and why some TTFTs are unavailable."""
    ttfts = [_ttft(r) for r in records]
    side = ProbeSide(
        ttft_s=[None if isinstance(t, Unavailable) else t for t in ttfts],
        cached_tokens=[r.cached_tokens for r in records],
        prompt_tokens=[r.prompt_tokens for r in records],
        request_ids=[r.request_id for r in records],
        unavailable=sorted({t.reason for t in ttfts if isinstance(t, Unavailable)}),
    )
    return side, side.unavailable


def length_entry(
    length: int, asked: int, records: list[Tagged], by_cached: bool = True, gpu: GpuCase | None = None
) -> LengthEntry:
    """One length's sides and verdict; `by_cached` False: by the two TTFT samples alone, neither
    the server's cached_tokens (an image probe: they count prefix hits, not image hits) nor hits
    told one by one (verdict.decide's by_hits). `gpu`: the GPUs over the length, when sampled."""
    shared = [r for r in records if r.case.endswith("shared")]
    unique = [r for r in records if r.case.endswith("unique")]
    (s, s_missing), (u, u_missing) = _side(shared), _side(unique)
    repeats = [t for t in s.ttft_s[1:] if t is not None]
    uniques = [t for t in u.ttft_s if t is not None]
    reported = [p for p in s.prompt_tokens + u.prompt_tokens if p is not None]
    prompt_tokens = int(figure("prompt_tokens", reported)) if reported else None
    prompt_ms = [(r.server_timings or {}).get("prompt_ms") for r in shared[1:] if r.ok]
    cached = s.cached_tokens[1:] if by_cached else ()
    verdict = decide(repeats, uniques, cached, prompt_tokens, prompt_ms, by_hits=by_cached)
    failed = [r for r in records if not r.ok]
    missing = sorted(set(s_missing) | set(u_missing))
    return LengthEntry(
        length=length,
        length_asked=asked,
        prompt_tokens=prompt_tokens,
        shared=s,
        unique=u,
        n_ok=len(records) - len(failed),
        n_failed=len(failed),
        errors=dict(Counter(str(r.error_kind) for r in failed)),
        first_errors=first_errors(failed),
        speedup=verdict.speedup,
        p_faster=verdict.p_faster,
        p_below_min=verdict.p_below_min,
        rank_p=verdict.rank_p,
        hit_fraction=verdict.hit_fraction,
        gain_on_hits=verdict.gain_on_hits,
        verdict=verdict.verdict,
        reason=verdict.reason + "".join(f"; TTFT unavailable: {why}" for why in missing),
        requests=[r.to_dict() for r in records],
        gpu=gpu,
    )


def first_errors(failed: list[Tagged]) -> dict[str, str]:
    """The first failure of each kind, in the server's own words (e.g. its HTTP 400 text)."""
    first: dict[str, str] = {}
    for rec in failed:
        first.setdefault(str(rec.error_kind), rec.error or "")
    return first


# ---- the capacity sweep -------------------------------------------------------------------


def capacity_point(k: int, firsts: list[Tagged], reuses: list[Tagged]) -> CapacityPass:
    pairs = [(a, b) for a, b in zip(firsts, reuses) if a.ok and b.ok]
    prompt = [b.prompt_tokens for _, b in pairs if b.prompt_tokens]
    prompt_tokens = int(figure("prompt_tokens", prompt)) if prompt else None
    hits, evidence = _pair_hits(pairs, prompt_tokens)
    # What every prefix shares with the others (the chat template), as the first sends found it
    # cached: held once, so the working set counts it once.
    first_cached = [a.cached_tokens for a, _ in pairs if a.cached_tokens is not None]
    shared = min(int(figure("cached_tokens", first_cached)), prompt_tokens or 0) if first_cached else 0
    first_ttft = [t for t in (_ttft(a) for a, _ in pairs) if not isinstance(t, Unavailable)]
    reuse_ttft = [t for t in (_ttft(b) for _, b in pairs) if not isinstance(t, Unavailable)]
    return CapacityPass(
        prefixes=k,
        prompt_tokens=prompt_tokens,
        shared_tokens=shared,
        working_set_tokens=k * (prompt_tokens - shared) + shared if prompt_tokens else None,
        judged=len(hits),
        hits=sum(hits),
        hit_fraction=sum(hits) / len(hits) if hits else None,
        evidence=evidence,
        first_ttft_s=figure("ttft_s", first_ttft) if first_ttft else None,
        reuse_ttft_s=figure("ttft_s", reuse_ttft) if reuse_ttft else None,
        n_failed=sum(not r.ok for r in firsts + reuses),
        first_errors=first_errors([r for r in firsts + reuses if not r.ok]),
        reuse_cached_tokens=[b.cached_tokens for _, b in pairs],
        request_ids=[b.request_id for _, b in pairs],
    )


def _pair_hits(pairs: list[tuple[Tagged, Tagged]], prompt_tokens: int | None) -> tuple[list[bool], str]:
    """Per (first, re-use) pair, whether the re-use was served from cache, and by what."""
    if pairs and prompt_tokens and all(b.cached_tokens is not None for _, b in pairs):
        return [(b.cached_tokens or 0) >= SERVED_SHARE * prompt_tokens for _, b in pairs], "cached_tokens"
    timed = [
        (ta, tb)
        for ta, tb in ((_ttft(a), _ttft(b)) for a, b in pairs)
        if isinstance(ta, float) and isinstance(tb, float)
    ]
    if not timed:
        return [], "ttft"
    typical_first = figure("ttft_s", [ta for ta, _ in timed])
    # Faster than its own first send and than the pass's typical first send: one slow first
    # send (a busy client) does not make a miss look like a hit.
    out = [tb * TIMING_HIT_SPEEDUP < min(ta, typical_first) for ta, tb in timed]
    return out, "ttft"


@dataclass
class Sweep:
    """The capacity sweep's passes so far and its bracket: the largest K whose re-uses still hit
    (fits) and the smallest that did not (falls). The live probe asks it where to go next; a
    rebuild replays the passes through it in the order they were sent."""

    points: list[CapacityPass] = field(default_factory=list)
    fits: int | None = None
    falls: int | None = None

    def add(self, point: CapacityPass) -> bool:
        """Takes a pass; False when it judged nothing (the sweep stops there)."""
        self.points.append(point)
        if point.hit_fraction is None:
            return False
        if point.hit_fraction >= CAPACITY_HIT_SHARE:
            self.fits = point.prefixes
        else:
            self.falls = point.prefixes
        return True

    def result(self, prefix_tokens_asked: int, max_tokens: int, stated: StatedSize | None = None) -> ProbeCapacity:
        points = sorted(self.points, key=lambda p: p.prefixes)
        return capacity_result(prefix_tokens_asked, max_tokens, points, self.fits, self.falls, stated)


def _working_set(points: list[CapacityPass], k: int | None) -> int | None:
    """The working set, in tokens, of the pass with k prefixes (None: no such pass)."""
    return next((p.working_set_tokens for p in points if p.prefixes == k), None)


def capacity_result(
    prefix_tokens_asked: int,
    max_tokens: int,
    points: list[CapacityPass],
    fits: int | None,
    falls: int | None,
    stated: StatedSize | None = None,
) -> ProbeCapacity:
    """The sweep's answer: its verdict decided first (_cliff), then the result made once."""
    sizes = [p.prompt_tokens for p in points if p.prompt_tokens]
    prompt = int(figure("prompt_tokens", sizes)) if sizes else None
    verdict, reason, cliff, uncertainty = _cliff(points, prompt, fits, falls, max_tokens)
    return ProbeCapacity(
        prefix_tokens_asked=prefix_tokens_asked,
        prefix_tokens=prompt,
        max_tokens=max_tokens,
        hit_share=CAPACITY_HIT_SHARE,
        points=points,
        fits_prefixes=fits,
        falls_prefixes=falls,
        cliff_tokens=cliff,
        uncertainty_tokens=uncertainty,
        verdict=verdict,
        reason=reason,
        stated=stated,
    )


def _cliff(
    points: list[CapacityPass], prompt: int | None, fits: int | None, falls: int | None, max_tokens: int
) -> tuple[str, str, float | None, float | None]:
    """(verdict, reason, cliff tokens, uncertainty tokens) of the sweep's bracket."""
    if prompt is None:
        failures = {k: v for p in points for k, v in p.first_errors.items()}
        said = "".join(f"; first {kind}: {message}" for kind, message in sorted(failures.items()))
        return "unmeasured", f"no prefix and its re-use both succeeded: nothing to judge{said}", None, None
    if falls is None:
        reason = (
            f"re-uses still hit with {fits or 0} prefixes ({_working_set(points, fits) or 0:,} tokens): the cache "
            f"holds at least that (--capacity-max-tokens {max_tokens:,} stopped the sweep)"
        )
        return "beyond_max", reason, None, None
    if not fits:
        reason = (
            f"even one {prompt:,}-token prefix was not served again: the cache holds less than one prefix for "
            "reuse, or it is off"
        )
        return "below_one_prefix", reason, prompt / 2, prompt / 2
    low, high = _working_set(points, fits) or fits * prompt, _working_set(points, falls) or falls * prompt
    reason = (
        f"re-uses hit with {fits} prefixes ({low:,} tokens) and fell below "
        f"{CAPACITY_HIT_SHARE:.0%} with {falls} ({high:,} tokens): the cache holds about "
        f"{(low + high) / 2:,.0f} ± {(high - low) / 2:,.0f} prompt tokens for reuse"
    )
    return "found", reason, (low + high) / 2, (high - low) / 2
